/* test-purge-overdue.c -- the purge thread's pass over a live thread's
 * segments (mia_segments_purge_overdue): it purges the free slices whose
 * purge is overdue by its grace, not before, and never while the owner
 * holds its segment lock.  Called here directly, as the purge thread does,
 * with the thread itself turned off. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"

#include <string.h>

#define BLOCK 1000u
#define COUNT 8192u      /* 8 MiB: two segments' worth */
#define KEEP_EVERY 2048u /* a block kept per 2 MiB keeps each segment the thread's */
#define GRACE 250u

static int64_t purged(void) { return __atomic_load_n(&mia_stats_global.purged_bytes, __ATOMIC_RELAXED); }

/* The thread's free slices that are resident (dirty), in bytes. */
static size_t free_dirty(const mia_tld_t *tld) {
  size_t n = 0;
  for (const mia_segment_t *seg = tld->segments; seg != NULL; seg = seg->next)
    n += (size_t)__builtin_popcountll(seg->dirty_mask & ~seg->used_mask) * MIA_SLICE_SIZE;
  return n;
}

int main(void) {
  mi_option_set(mi_option_purge_delay, 25);
  mi_option_set(mi_option_purge_thread, 0);
  static void *blocks[COUNT];
  for (size_t i = 0; i < COUNT; i++) {
    blocks[i] = mi_malloc(BLOCK);
    if (blocks[i] != NULL) memset(blocks[i], 0x2e, BLOCK);
  }
  for (size_t i = 0; i < COUNT; i++)
    if (i % KEEP_EVERY != 0) mi_free(blocks[i]);
  mia_tld_t *tld = mia_theap_get()->tld;
  uint64_t check = __atomic_load_n(&tld->next_purge_check, __ATOMIC_RELAXED);
  size_t waiting = free_dirty(tld);
  tap_diag("%zu KiB of free slices wait, the owner's purge is due at %llu", waiting >> 10,
           (unsigned long long)check);
  TAP_OK(check != 0 && waiting >= (4u << 20), "the freed pages wait as free slices with a purge scheduled");

  /* due for the owner, but not overdue: the purge thread leaves them */
  int64_t before = purged();
  uint64_t at = mia_segments_purge_overdue(tld, check + GRACE - 1, GRACE);
  TAP_OK(at == check + GRACE && purged() == before && free_dirty(tld) == waiting,
         "within the grace nothing is purged, and it says when to look again");

  /* overdue, but the owner is in a segment entry point: hands off */
  mia_lock(&tld->segment_lock);
  at = mia_segments_purge_overdue(tld, check + GRACE + 1, GRACE);
  mia_unlock(&tld->segment_lock);
  TAP_OK(at == check + 2 * GRACE + 1 && purged() == before && free_dirty(tld) == waiting,
         "with the owner holding its lock nothing is purged, and it looks again a grace later");

  /* overdue and the owner idle: purged */
  at = mia_segments_purge_overdue(tld, check + GRACE + 1, GRACE);
  int64_t gone = purged() - before;
  tap_diag("purged %lld KiB; %zu KiB of free slices left resident", (long long)(gone >> 10), free_dirty(tld) >> 10);
  TAP_OK(gone >= (int64_t)waiting / 2 && free_dirty(tld) <= waiting / 2, "overdue free slices are purged");
  TAP_OK(at == 0 || at > check + GRACE + 1, "and the next look is later (%llu)", (unsigned long long)at);

  for (size_t i = 0; i < COUNT; i += KEEP_EVERY) mi_free(blocks[i]);
  return tap_done();
}

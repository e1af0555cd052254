/* test-abandoned-scan.c -- blocks that outlive their thread and are freed
 * by another: the pages they emptied in the segment the thread left go
 * back at the first purge pass an arena purge delay after the frees,
 * without any thread adopting the segment, and the segment itself once
 * its last block is freed.  Before, they stayed resident until some
 * thread adopted the segment, which in a program whose threads have
 * finished never happens.
 *
 * Thread B allocates pages of 2,000-byte blocks, hands them all to the
 * main thread and exits; the main thread frees them, and the test drives
 * the purge passes the background thread would run. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"
#include "../abandoned.h"

#include <pthread.h>

#define DELAY_MS 200
#define BLOCKS 400   /* about a dozen pages */
#define SIZE 2000

static void *blocks[BLOCKS];

static void *thread_fill(void *arg) {
  (void)arg;
  for (size_t i = 0; i < BLOCKS; i++) {
    blocks[i] = mi_malloc(SIZE);
    if (blocks[i] != NULL) memset(blocks[i], 0x6b, SIZE);
  }
  return NULL;
}

static size_t pages_in(const mia_segment_t *seg) { return (size_t)__builtin_popcountll(seg->used_mask & ~(uint64_t)1); }

static bool intact(const unsigned char *p) { return p[0] == 0x6b && p[SIZE - 1] == 0x6b; }

int main(void) {
  mi_option_set(mi_option_purge_delay, DELAY_MS);
  mi_option_set(mi_option_arena_purge_mult, 1);
  mi_option_set(mi_option_purge_thread, 0);   /* the test runs the passes */
  mi_option_set(mi_option_guarded_sample_rate, 0);   /* every block from its page */
  mi_free(mi_malloc(16));   /* this thread's own segment */
  mia_subproc_t *sp = mia_theap_get()->tld->subproc;

  pthread_t t;
  bool ran = pthread_create(&t, NULL, thread_fill, NULL) == 0 && pthread_join(t, NULL) == 0;
  void *kept = blocks[BLOCKS - 1];
  mia_segment_t *seg = ran && kept != NULL ? segment_of(kept) : NULL;
  TAP_OK(seg != NULL && segment_of(blocks[0]) == seg && on_abandoned_list(sp, seg),
         "thread B left its segment, all its blocks live, on the abandoned list");
  if (seg == NULL || segment_of(blocks[0]) != seg) return tap_done();
  size_t pages_before = pages_in(seg);
  TAP_OK(pages_before >= 10, "with %zu pages", pages_before);
  TAP_OK(atomic_load(&sp->orphans_due) == 0, "no scan is scheduled while nobody frees into it");

  /* all but the last block: every page but the last one empties */
  uint64_t freed_at = mia_prim_clock_ms();
  for (size_t i = 0; i + 1 < BLOCKS; i++) mi_free(blocks[i]);
  uint64_t due = atomic_load(&sp->orphans_due);
  TAP_OK(due >= freed_at && due <= mia_prim_clock_ms() + DELAY_MS,
         "the frees scheduled a scan a purge delay later (in %lld ms)", (long long)(due - mia_prim_clock_ms()));
  TAP_OK(mia_arenas_next_purge(sp) != 0 && mia_arenas_next_purge(sp) <= due, "the purge passes wait for it");
  mia_arenas_purge(sp, false);
  TAP_OK(pages_in(seg) == pages_before && resident(blocks[0]) && atomic_load(&sp->orphans_due) == due,
         "a purge pass before it is due leaves the pages");

  sleep_ms(DELAY_MS + 50);
  mia_arenas_purge(sp, false);
  TAP_OK(atomic_load(&sp->orphans_due) == 0, "a pass after the delay ran the scan");
  TAP_OK(on_abandoned_list(sp, seg) && pages_in(seg) == 1,
         "the segment waits on the list with %zu page left (it had %zu)", pages_in(seg), pages_before);
  TAP_OK(!resident(blocks[0]) && !resident(blocks[BLOCKS / 2]), "the emptied pages' memory went back to the OS");
  TAP_OK(segment_of(kept) == seg && intact(kept), "the live block is intact and still found");
  TAP_OK(mia_page_of(blocks[0]) == NULL, "the page map no longer knows the freed pages");

  /* the last block: the segment goes back to its arena */
  int64_t released = __atomic_load_n(&mia_stats_global.released_segments, __ATOMIC_RELAXED);
  mi_free(kept);
  TAP_OK(atomic_load(&sp->orphans_due) != 0, "freeing the last block scheduled another scan");
  sleep_ms(DELAY_MS + 50);
  mia_arenas_purge(sp, false);
  TAP_OK(!on_abandoned_list(sp, seg) && mia_page_of(kept) == NULL &&
             __atomic_load_n(&mia_stats_global.released_segments, __ATOMIC_RELAXED) == released + 1,
         "then the empty segment went back to its arena (released_segments)");

  /* a thread started afterwards allocates as before */
  ran = pthread_create(&t, NULL, thread_fill, NULL) == 0 && pthread_join(t, NULL) == 0;
  bool ok = ran;
  for (size_t i = 0; i < BLOCKS; i++) ok = ok && blocks[i] != NULL && intact(blocks[i]);
  TAP_OK(ok, "another thread fills %d blocks again", BLOCKS);
  for (size_t i = 0; i < BLOCKS; i++) mi_free(blocks[i]);
  return tap_done();
}

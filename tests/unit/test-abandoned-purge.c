/* test-abandoned-purge.c -- the free slices of a segment an exited thread
 * left behind (its other pages still hold blocks) go back to the OS at the
 * first purge pass after the arenas' purge delay, unless a thread adopted
 * the segment meanwhile; before the delay they stay resident for the next
 * thread to reuse.  The page with the live block stays as it is.
 *
 * Thread B fills pages of 2,000-byte blocks, frees all but one and exits;
 * the test then drives the purge passes the background thread would run. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"
#include "../abandoned.h"

#include <pthread.h>

#define DELAY_MS 200
#define BLOCKS 400   /* about a dozen pages */

/* Fill pages, keep the last block (in *arg), free the rest and exit. */
static void *thread_fill(void *arg) {
  static void *blocks[BLOCKS];
  for (size_t i = 0; i < BLOCKS; i++) {
    blocks[i] = mi_malloc(2000);
    if (blocks[i] != NULL) memset(blocks[i], 0x6b, 2000);
  }
  *(void **)arg = blocks[BLOCKS - 1];
  for (size_t i = 0; i + 1 < BLOCKS; i++) mi_free(blocks[i]);
  return NULL;
}

/* The first free slice of seg still resident (dirty), or NULL. */
static uint8_t *free_dirty_slice(const mia_segment_t *seg) {
  uint64_t m = seg->dirty_mask & ~seg->used_mask;
  return m != 0 ? (uint8_t *)seg + (size_t)__builtin_ctzll(m) * MIA_SLICE_SIZE : NULL;
}

int main(void) {
  mi_option_set(mi_option_purge_delay, DELAY_MS);
  mi_option_set(mi_option_arena_purge_mult, 1);   /* abandoned segments wait DELAY_MS too */
  mi_option_set(mi_option_guarded_sample_rate, 0);   /* every block from its page */
  mi_free(mi_malloc(16));   /* this thread's own segment */
  mia_subproc_t *sp = mia_theap_get()->tld->subproc;

  void *kept = NULL;
  pthread_t t;
  bool ran = pthread_create(&t, NULL, thread_fill, &kept) == 0 && pthread_join(t, NULL) == 0;
  mia_segment_t *seg = ran ? segment_of(kept) : NULL;
  TAP_OK(seg != NULL && on_abandoned_list(sp, seg), "thread B left its segment on the abandoned list");
  if (seg == NULL) return tap_done();
  uint8_t *slice = free_dirty_slice(seg);
  TAP_OK(slice != NULL && resident(slice), "with free slices still resident");

  mia_arenas_purge(sp, false);
  TAP_OK(free_dirty_slice(seg) == slice && resident(slice), "a purge pass before the delay leaves them");
  uint64_t due = mia_arenas_next_purge(sp);
  TAP_OK(due != 0 && due <= mia_prim_clock_ms() + DELAY_MS, "the next purge is due within the delay (in %lld ms)",
         (long long)(due - mia_prim_clock_ms()));

  sleep_ms(DELAY_MS + 50);
  mia_arenas_purge(sp, false);
  TAP_OK(free_dirty_slice(seg) == NULL && !resident(slice), "a delay later, a purge pass gave them back");
  TAP_OK(on_abandoned_list(sp, seg) && segment_of(kept) == seg && *(unsigned char *)kept == 0x6b &&
             ((unsigned char *)kept)[1999] == 0x6b,
         "the segment waits on the list with its live block intact");
  TAP_OK(mia_arenas_next_purge(sp) == 0 || mia_arenas_next_purge(sp) > mia_prim_clock_ms(),
         "nothing of it is due again");

  /* a thread that adopts it later cuts its pages from the purged slices */
  void *again = NULL;
  ran = pthread_create(&t, NULL, thread_fill, &again) == 0 && pthread_join(t, NULL) == 0;
  TAP_OK(ran && segment_of(again) == seg && ((unsigned char *)again)[0] == 0x6b,
         "the next thread adopted it and filled pages there again");
  mi_free(again);
  mi_free(kept);
  return tap_done();
}

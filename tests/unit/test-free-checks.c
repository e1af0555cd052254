/* test-free-checks.c -- the checks every build but the tools builds makes
 * at free.  A second free of a block that is still free is reported
 * (EAGAIN) and ignored, from the owner thread and from others, so the
 * block is never handed out to two owners; release and secure builds see
 * it by the free mark (MIA_FREE_MARK in internal.h), which secure builds
 * give never-used blocks too, debug builds by the padding record.  A free
 * of a pointer into the middle of a huge block is reported (EINVAL) and
 * ignored, so the block stays whole.  Ordinary frees are never reported,
 * nor are frees of live blocks whose data holds the mark but no free
 * block's link; memory handed out without a pop (a huge span, an aligned
 * block placed inside a bigger one) never carries a mark left there. */
#include "internal.h"
#include "../tap.h"
#include "../errors.h"
#include "../handout.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct {
  void *p;
  int times;
} remote_t;

static void *remote_free(void *arg) {
  remote_t *r = arg;
  for (int i = 0; i < r->times; i++) mi_free(r->p);
  return NULL;
}

static void free_in_thread(void *p, int times) {
  remote_t r = {p, times};
  pthread_t t;
  if (pthread_create(&t, NULL, remote_free, &r) != 0 || pthread_join(t, NULL) != 0) abort();
}

/* does p start its page's block (no block placed for an alignment)? */
static mia_unused bool starts_block(const void *p) { return mia_page_block_start(mia_page_of(p), p) == p; }

/* one more error since `before`, and it was EAGAIN */
static bool reported(int before) {
  return atomic_load(&errors) == before + 1 && atomic_load(&last_error) == EAGAIN;
}

int main(void) {
#if MIA_ANNOTATED
  printf("1..0 # SKIP tools builds leave double frees to Valgrind or ASan\n");
  return 0;
#endif
  /* guarded sampling (on by default in secure builds) would send the odd
   * block to a slot, which reports double frees itself: keep to pages */
  mi_option_set(mi_option_guarded_sample_rate, 0);
  mi_register_error(on_error, NULL);
  mi_thread_init();
  int before;
  void *p;

#if MIALLOC_SECURE || MIALLOC_PADDING
  /* a block of a fresh page that was never handed out: secure builds mark
   * fresh blocks free, debug builds fill their records as free */
  before = atomic_load(&errors);
  p = mi_malloc(1200);
  mia_page_t *page = mia_page_of(p);
  size_t index = (size_t)((uint8_t *)p - page->start) / page->block_size;
  void *never = page->start + (index == 0 ? page->block_size : 0);
  bool fresh = page->capacity >= 2 && page->used == 1;
#if MIALLOC_SECURE && MIA_FREE_MARK
  /* the invariant behind it: every carved block not handed out is marked
   * (first in the test: on reused memory a former block's mark may be
   * there anyway) */
  uint32_t marked = 0;
  for (uint32_t i = 0; i < page->capacity; i++) marked += mia_block_marked_free(page->start + i * page->block_size);
  TAP_OK(marked == page->capacity - 1, "secure: the %u carved blocks not handed out carry the free mark (%u do)",
         page->capacity - 1, marked);
#endif
  mi_free(never);
  TAP_OK(fresh && atomic_load(&errors) == before + 1,
         "a free of a carved block never handed out is reported (%d, used %u of %u)",
         atomic_load(&errors) - before, page->used, page->capacity);
  TAP_OK(handed_out_once(1200), "and the blocks of that size are handed out once afterwards");
  mi_free(p);
#endif

  /* a plain double free, with another free in between */
  before = atomic_load(&errors);
  p = mi_malloc(48);
  void *q = mi_malloc(48);
  mi_free(p);
  mi_free(q);
  mi_free(p);
  TAP_OK(reported(before), "free(p), free(q), free(p): the second free of p is reported with EAGAIN (%d errors)",
         atomic_load(&errors) - before);
  TAP_OK(handed_out_once(48), "no block of that size is handed out twice afterwards");

  /* blocks freed, handed out again and freed again: never reported */
  before = atomic_load(&errors);
  void *keep[512];
  for (int round = 0; round < 200; round++) {
    for (int i = 0; i < 512; i++) keep[i] = mi_malloc(16 + (size_t)((i * 37 + round) % 700));
    for (int i = 0; i < 512; i += 2) mi_free(keep[i]);
    for (int i = 0; i < 512; i += 2) keep[i] = mi_malloc(16 + (size_t)((i * 11 + round) % 300));
    for (int i = 0; i < 512; i++) mi_free(keep[i]);
  }
  TAP_OK(atomic_load(&errors) == before, "200 rounds of blocks freed and handed out again: no report (%d)",
         atomic_load(&errors) - before);

  /* a block whose program data is what a freed block holds: the owner
   * looks on the free lists before it reports */
  before = atomic_load(&errors);
  void *a = mi_malloc(32), *b = mi_malloc(32);
  mi_free(a);
  memcpy(b, a, 16);   /* a use after free read, copied into a live block */
  mi_free(b);
  TAP_OK(atomic_load(&errors) == before, "a live block holding a freed block's bytes is freed without a report");
#if MIALLOC_SECURE || !MIA_FREE_MARK
  /* the same block freed by another thread: secure builds search the
   * lists there too (release builds take the mark's word, see check.c) */
  before = atomic_load(&errors);
  a = mi_malloc(32);
  b = mi_malloc(32);
  mi_free(a);
  memcpy(b, a, 16);
  free_in_thread(b, 1);
  TAP_OK(atomic_load(&errors) == before, "and so it is when another thread frees it (%d reports)",
         atomic_load(&errors) - before);
#endif

  /* another thread frees a block twice */
  before = atomic_load(&errors);
  p = mi_malloc(64);
  free_in_thread(p, 2);
  TAP_OK(reported(before), "a second free in another thread is reported with EAGAIN");
  TAP_OK(handed_out_once(64), "and the block is handed out once afterwards");

  /* another thread frees it, then the owner frees it again */
  before = atomic_load(&errors);
  p = mi_malloc(80);
  free_in_thread(p, 1);
  mi_free(p);
  TAP_OK(reported(before), "freed by another thread, then by the owner: reported with EAGAIN");
  TAP_OK(handed_out_once(80), "and the block is handed out once afterwards");

  /* the owner frees it, then another thread frees it again */
  before = atomic_load(&errors);
  p = mi_malloc(96);
  mi_free(p);
  free_in_thread(p, 1);
  TAP_OK(reported(before), "freed by the owner, then by another thread: reported with EAGAIN");
  TAP_OK(handed_out_once(96), "and the block is handed out once afterwards");

  /* a block of a page with offset blocks (an aligned allocation) */
  before = atomic_load(&errors);
  p = mi_malloc_aligned(200, 64);
  mi_free(p);
  mi_free(p);
  TAP_OK(reported(before), "an aligned block freed twice: reported with EAGAIN");

  /* a pointer into the middle of a huge block: the block stays live */
  before = atomic_load(&errors);
  size_t huge = 3 * 1024 * 1024;
  unsigned char *h = mi_malloc(huge);
  memset(h, 0x5a, huge);
  mi_free(h + 8192);
  bool whole = atomic_load(&errors) == before + 1 && atomic_load(&last_error) == EINVAL;
  TAP_OK(whole, "a free of a pointer into a huge block is reported with EINVAL");
  bool kept = mi_usable_size(h) >= huge;
  for (size_t i = 0; i < huge && kept; i += 4096) kept = h[i] == 0x5a;
  TAP_OK(kept, "and the block stays live with its contents");
  before = atomic_load(&errors);
  mi_free(h);
  TAP_OK(atomic_load(&errors) == before, "its real free later is not an error");

  /* huge blocks placed for an alignment are freed by the pointer handed out */
  before = atomic_load(&errors);
  void *ha = mi_malloc_aligned(huge, (size_t)1 << 20);
  void *hb = mi_malloc_aligned_at(huge, 4096, 64);
  mi_free(ha);
  mi_free(hb);
  TAP_OK(ha != NULL && hb != NULL && atomic_load(&errors) == before,
         "aligned huge blocks are freed without a report (%d)", atomic_load(&errors) - before);

#if MIA_FREE_MARK
  /* live data that holds the mark and an odd first word (a tagged value):
   * no block of another thread's batch, whose link names a block of the
   * page, so the owner looks on the lists and frees it.  1 is what the last
   * block of a batch used to hold. */
  before = atomic_load(&errors);
  uintptr_t odd_words[] = {0x12345679, 1};
  for (int i = 0; i < 2; i++) {
    uintptr_t *w = mi_malloc(48);
    w[0] = odd_words[i];
    w[1] = mia_free_mark;
    mi_free(w);
  }
  TAP_OK(atomic_load(&errors) == before, "live blocks holding the mark and an odd first word are freed without "
         "a report (%d)", atomic_load(&errors) - before);
  TAP_OK(handed_out_once(48), "and no block of that size is handed out twice afterwards");
  /* another thread cannot look on the lists, but a first word that names
   * no block of the page is no free block's link */
  before = atomic_load(&errors);
  uintptr_t data_words[] = {0x12345679, (uintptr_t)"a string", 0x4000};
  for (int i = 0; i < 3; i++) {
    uintptr_t *w = mi_malloc(48);
    w[0] = data_words[i];
    w[1] = mia_free_mark;
    free_in_thread(w, 1);
  }
  TAP_OK(atomic_load(&errors) == before, "and so are they, and blocks whose first word is other data, when "
         "another thread frees them (%d)", atomic_load(&errors) - before);
  TAP_OK(handed_out_once(48), "and no block of that size is handed out twice afterwards");

  /* memory handed out again where a freed block left its mark: a huge
   * span's start (dirty: the purge delay keeps it) and a block placed for
   * an alignment inside a bigger one.  The program must not get memory
   * that looks freed: realloc would copy the mark to a block start. */
  long purge_delay = mi_option_get(mi_option_purge_delay);
  mi_option_set(mi_option_purge_delay, 60000);
  size_t span = (size_t)2 << 20;
  uintptr_t *h1 = mi_malloc(span);
  h1[0] = 0x5555;
  h1[1] = mia_free_mark;   /* as a block that was there would have left it */
  mi_free(h1);
  uintptr_t *h2 = mi_malloc(span);
  TAP_OK(h2 == h1, "a huge span freed is handed out again at once (%p, %p)", (void *)h1, (void *)h2);
  TAP_OK(!mia_block_marked_free(h2), "and its start does not carry the mark of what was there before");
  before = atomic_load(&errors);
  h2[0] = 0x5555;   /* the program's data, the second word left as it came */
  void *moved = mi_realloc(h2, 100000);
  TAP_OK(moved != NULL && !mia_block_marked_free(moved),
         "realloc of it to a page block gives a block without the mark");
  mi_free(moved);
  TAP_OK(atomic_load(&errors) == before, "and that block is freed without a report (%d)",
         atomic_load(&errors) - before);

  enum { PLACED = 64 };
  uintptr_t *placed[PLACED], *was[PLACED];
  for (int i = 0; i < PLACED; i++) was[i] = mi_malloc_aligned_at(200, 64, 16);
  for (int i = 0; i < PLACED; i++) mi_free(was[i]);
  /* a former block's mark where each will be placed again (inside a free
   * block, away from its own link and mark) */
  for (int i = 0; i < PLACED; i++)
    if (!starts_block(was[i])) was[i][1] = mia_free_mark;
  int again = 0, kept_mark = 0;
  for (int i = 0; i < PLACED; i++) {
    placed[i] = mi_malloc_aligned_at(200, 64, 16);
    for (int j = 0; j < PLACED; j++) again += placed[i] == was[j] && !starts_block(was[j]);
    kept_mark += mia_block_marked_free(placed[i]);
  }
  TAP_OK(again > 0 && kept_mark == 0, "aligned blocks placed inside bigger ones again do not carry the mark of what "
         "was there before (%d placed again, %d marked)", again, kept_mark);
  for (int i = 0; i < PLACED; i++) mi_free(placed[i]);
  mi_option_set(mi_option_purge_delay, purge_delay);
#endif

  /* free(NULL) is never an error */
  before = atomic_load(&errors);
  mi_free(NULL);
  mi_free(NULL);
  TAP_OK(atomic_load(&errors) == before, "free(NULL) twice is not an error");
  return tap_done();
}

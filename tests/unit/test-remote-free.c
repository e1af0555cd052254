/* test-remote-free.c -- blocks freed by other threads come back to their
 * page's owner with the right count: the list of remote frees carries its
 * length in the page's thread_free word, so the owner takes it without a
 * walk (or splices it in front of the owner's own frees). */
#include "internal.h"
#include "../tap.h"

#include <pthread.h>

#define BLOCKS 100

static void *blocks[BLOCKS];

typedef struct { int from, to; } range_t;

static void *free_range(void *arg) {
  range_t *r = arg;
  for (int i = r->from; i < r->to; i++) mi_free(blocks[i]);
  return NULL;
}

static void free_in_other_thread(int from, int to) {
  range_t r = {from, to};
  pthread_t t;
  if (pthread_create(&t, NULL, free_range, &r) == 0) pthread_join(t, NULL);
}

static uint32_t remote_count(mia_page_t *page) {
  return mia_tf_count(atomic_load_explicit(&page->thread_free, memory_order_acquire));
}

int main(void) {
  mi_heap_t *h = mi_heap_new();
  mia_page_t *page = NULL;
  /* BLOCKS blocks of one page (guarded sampling may place one elsewhere) */
  int n = 0;
  while (n < BLOCKS) {
    void *p = mi_heap_malloc(h, 48);
    mia_page_t *pg = mia_page_of(p);
    if (page == NULL && !pg->is_guarded) page = pg;
    if (pg == page) blocks[n++] = p;
  }
  uint32_t used0 = page->used;
  TAP_OK(used0 >= BLOCKS, "the page has the %d blocks out (%u)", BLOCKS, used0);

  /* another thread frees 60 while the owner has freed none: taken
   * without a walk */
  free_in_other_thread(0, 60);
  TAP_OK(remote_count(page) == 60, "the thread_free word counts the 60 remote frees (%u)", remote_count(page));
  mia_page_collect(page);
  TAP_OK(remote_count(page) == 0 && page->used == used0 - 60,
         "taken in: %u out, %u expected", page->used, used0 - 60);

  /* the owner frees 10 (its local list is not empty now), another
   * thread the other 30: spliced in front of the owner's */
  for (int i = 60; i < 70; i++) mi_free(blocks[i]);
  free_in_other_thread(70, BLOCKS);
  TAP_OK(remote_count(page) == BLOCKS - 70, "then %d more (%u)", BLOCKS - 70, remote_count(page));
  mia_page_collect(page);
  TAP_OK(page->used == used0 - BLOCKS, "all %d back: %u out, %u expected", BLOCKS, page->used, used0 - BLOCKS);

  /* every block is on a free list exactly once */
  uint64_t map[(8192 + 63) / 64];
  size_t nfree = mia_page_free_map(page, map, true);
  TAP_OK(nfree == page->capacity - page->used, "the free lists hold every free block once (%zu of %u)", nfree,
         page->capacity - page->used);
  bool all = true;
  for (int i = 0; i < BLOCKS; i++) {
    size_t idx = (size_t)((uint8_t *)mia_page_block_start(page, blocks[i]) - page->start) / page->block_size;
    all = all && ((map[idx / 64] >> (idx % 64)) & 1);
  }
  TAP_OK(all, "each of the freed blocks among them");
  mi_heap_destroy(h);
  return tap_done();
}

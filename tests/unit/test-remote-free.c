/* test-remote-free.c -- blocks freed by other threads come back to their
 * page's owner with the right count: the list of remote frees carries its
 * length in the page's thread_free word, so the owner takes it without a
 * walk.  At a refill the remote list becomes the free list as it is;
 * otherwise it is joined to the owner's own frees (by walking it when it
 * is short, else both lists at once), and every free block stays on a
 * list exactly once.  What a remote free reads and writes of the page
 * shares no cache line with what the owner writes on every malloc and
 * free. */
#include "internal.h"
#include "../tap.h"

#include <pthread.h>
#include <stddef.h>

#define BLOCKS 400

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

static void *drained[8192];

#define LINE_OF(field) (offsetof(mia_page_t, field) / 64)

/* A remote free reads free_key, flags and block_size and pushes onto
 * thread_free; the owner writes free, used and local_free on every call.
 * Sharing a line would make each remote free steal the owner's line. */
static void check_page_layout(void) {
  size_t owner[] = {LINE_OF(free), LINE_OF(used), LINE_OF(local_free)};
  size_t remote[] = {LINE_OF(free_key), LINE_OF(flags), LINE_OF(block_size), LINE_OF(is_huge),
                     LINE_OF(is_guarded), LINE_OF(thread_free), LINE_OF(theap)};
  bool apart = true;
  for (size_t i = 0; i < sizeof owner / sizeof owner[0]; i++)
    for (size_t j = 0; j < sizeof remote / sizeof remote[0]; j++) apart = apart && owner[i] != remote[j];
  TAP_OK(apart, "the owner's per-call page fields share no cache line with what remote frees touch");
  TAP_OK(_Alignof(mia_page_t) >= 64 && sizeof(mia_page_t) % 64 == 0,
         "page records are whole cache lines (size %zu, alignment %zu)", sizeof(mia_page_t),
         (size_t)_Alignof(mia_page_t));
}

/* Every free block is on a free list exactly once, the first `freed` of
 * blocks[] among them. */
static void check_free_lists(mia_page_t *page, int freed) {
  static uint64_t map[(8192 + 63) / 64];
  size_t nfree = mia_page_free_map(page, map, true);
  TAP_OK(nfree == page->capacity - page->used, "the free lists hold every free block once (%zu of %u)", nfree,
         page->capacity - page->used);
  bool all = true;
  for (int i = 0; i < freed; i++) {
    size_t idx = (size_t)((uint8_t *)mia_page_block_start(page, blocks[i]) - page->start) / page->block_size;
    all = all && ((map[idx / 64] >> (idx % 64)) & 1);
  }
  TAP_OK(all, "the %d freed blocks among them", freed);
}

int main(void) {
  check_page_layout();
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
   * thread 30: a short remote list, walked to join the owner's */
  for (int i = 60; i < 70; i++) mi_free(blocks[i]);
  free_in_other_thread(70, 100);
  TAP_OK(remote_count(page) == 30, "then 30 more (%u)", remote_count(page));
  mia_page_collect(page);
  TAP_OK(page->used == used0 - 100, "100 back: %u out, %u expected", page->used, used0 - 100);
  check_free_lists(page, 100);

  /* long remote lists: both lists walked at once; first the owner's
   * ends first (110 against 120), then the remote one (240 against 70) */
  for (int i = 100; i < 110; i++) mi_free(blocks[i]);
  free_in_other_thread(110, 230);
  mia_page_collect(page);
  TAP_OK(page->used == used0 - 230, "230 back: %u out, %u expected", page->used, used0 - 230);
  check_free_lists(page, 230);
  for (int i = 230; i < 240; i++) mi_free(blocks[i]);
  free_in_other_thread(240, 310);
  mia_page_collect(page);
  TAP_OK(page->used == used0 - 310, "310 back: %u out, %u expected", page->used, used0 - 310);
  check_free_lists(page, 310);

  /* a refill: with the free list empty, the remote list becomes the free
   * list as it is (its last push first) and the owner's frees wait */
  size_t ndrained = 0;
  while (page->free != NULL && ndrained < sizeof drained / sizeof drained[0])
    drained[ndrained++] = mi_heap_malloc(h, 48);
  TAP_OK(page->free == NULL && page->sample_rest == NULL, "the free list is drained (%zu blocks)", ndrained);
  for (int i = 310; i < 320; i++) mi_free(blocks[i]);
  mia_block_t *local_before = page->local_free;
  free_in_other_thread(320, BLOCKS);
  uint32_t used_before = page->used;
  mia_page_collect(page);
  TAP_OK(page->free == (mia_block_t *)blocks[BLOCKS - 1] && page->local_free == local_before && local_before != NULL,
         "the remote list is the free list, local_free is kept (free %p, expected %p; local_free %p, was %p)",
         (void *)page->free, blocks[BLOCKS - 1], (void *)page->local_free, (void *)local_before);
  TAP_OK(page->used == used_before - (BLOCKS - 320), "%d back: %u out, %u expected", BLOCKS - 320, page->used,
         used_before - (BLOCKS - 320));
  for (size_t i = 0; i < ndrained; i++) mi_free(drained[i]);
  check_free_lists(page, BLOCKS);
  mi_heap_destroy(h);
  return tap_done();
}

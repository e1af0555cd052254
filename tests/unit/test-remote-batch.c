/* test-remote-batch.c -- a thread batches its frees of other threads'
 * small main-heap blocks per page and pushes a page's batch in one go
 * (release builds; the others push each free at once): at 16 blocks, when
 * it collects and when it exits.  Blocks of a first-class heap are pushed
 * at once (the heap may be destroyed), and so are blocks of a page whose
 * owner has exited (a waiting batch would keep its segment from
 * emptying).  The owner's second free of a batched block is reported as a
 * double free and no block is handed out twice.  The freeing thread runs
 * one step at a time, so the page can be looked at while a batch waits. */
#include "internal.h"
#include "../tap.h"
#include "../errors.h"
#include "../handout.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>

#define BLOCKS 64
#define SIZE 48

static void *blocks[BLOCKS];
static void *heap_blocks[4];
static void *orphan_blocks[4];

typedef enum { FREE_RANGE, FREE_HEAP_BLOCKS, FREE_ORPHANS, COLLECT, EXIT } action_t;

static struct {
  action_t action;
  int from, to;
} step;
static sem_t go, done;

static void *freer(void *arg) {
  (void)arg;
  mi_free(mi_malloc(16));   /* a theap of its own, as a real thread has */
  for (;;) {
    sem_wait(&go);
    action_t action = step.action;
    if (action == FREE_RANGE)
      for (int i = step.from; i < step.to; i++) mi_free(blocks[i]);
    else if (action == FREE_HEAP_BLOCKS)
      for (int i = 0; i < 4; i++) mi_free(heap_blocks[i]);
    else if (action == FREE_ORPHANS)
      for (int i = 0; i < 3; i++) mi_free(orphan_blocks[i]);
    else if (action == COLLECT)
      mi_collect(false);
    sem_post(&done);
    if (action == EXIT) return NULL;
  }
}

static void in_freer(action_t action, int from, int to) {
  step.action = action;
  step.from = from;
  step.to = to;
  sem_post(&go);
  sem_wait(&done);
}

static uint32_t remote_count(mia_page_t *page) {
  return mia_tf_count(atomic_load_explicit(&page->thread_free, memory_order_acquire));
}

/* a thread that leaves 4 live blocks behind when it exits */
static void *orphan_maker(void *arg) {
  (void)arg;
  for (int i = 0; i < 4; i++) orphan_blocks[i] = mi_malloc(SIZE);
  return NULL;
}

/* BLOCKS blocks of one page of the main heap (guarded sampling is off) */
static mia_page_t *fill_blocks(void) {
  mia_page_t *page = NULL;
  int n = 0;
  while (n < BLOCKS) {
    void *p = mi_malloc(SIZE);
    if (page == NULL) page = mia_page_of(p);
    if (mia_page_of(p) == page) blocks[n++] = p;
  }
  return page;
}

int main(void) {
  mi_option_set(mi_option_guarded_sample_rate, 0);
  mi_register_error(on_error, NULL);
  const bool batched = MIA_REMOTE_BATCH > 0;
  tap_diag("remote frees are %s in this build", batched ? "batched" : "pushed at once");
  sem_init(&go, 0, 0);
  sem_init(&done, 0, 0);
  mia_page_t *page = fill_blocks();
  uint32_t used0 = page->used;
  pthread_t t;
  if (pthread_create(&t, NULL, freer, NULL) != 0) abort();

  in_freer(FREE_RANGE, 0, 5);
  uint32_t expect = batched ? 0 : 5;
  TAP_OK(remote_count(page) == expect, "5 remote frees: %u on the page's remote list, %u expected",
         remote_count(page), expect);
  in_freer(FREE_RANGE, 5, 16);
  TAP_OK(remote_count(page) == 16, "the 16th pushes them in one go: %u on the remote list", remote_count(page));
  in_freer(FREE_RANGE, 16, 20);
  expect = batched ? 16 : 20;
  TAP_OK(remote_count(page) == expect, "4 more: %u on the remote list, %u expected", remote_count(page), expect);

  /* the owner frees one of the 4 again: a double free whether the block
   * waits in the batch or is on the remote list */
  int before = atomic_load(&errors);
  mi_free(blocks[18]);
  TAP_OK(atomic_load(&errors) == before + 1 && atomic_load(&last_error) == EAGAIN,
         "the owner's second free of a block freed by the other thread is reported (%d errors)",
         atomic_load(&errors) - before);

  in_freer(COLLECT, 0, 0);
  TAP_OK(remote_count(page) == 20, "mi_collect pushes the thread's batches: %u on the remote list",
         remote_count(page));
  mia_page_collect(page);
  TAP_OK(page->used == used0 - 20, "the owner takes the 20 in: %u out, %u expected", page->used, used0 - 20);

  /* a first-class heap's blocks are pushed at once */
  mi_heap_t *h = mi_heap_new();
  for (int i = 0; i < 4; i++) heap_blocks[i] = mi_heap_malloc(h, SIZE);
  mia_page_t *hpage = mia_page_of(heap_blocks[0]);
  bool one_page = true;
  for (int i = 1; i < 4; i++) one_page = one_page && mia_page_of(heap_blocks[i]) == hpage;
  in_freer(FREE_HEAP_BLOCKS, 0, 0);
  TAP_OK(one_page && remote_count(hpage) == 4, "a first-class heap's 4 blocks are on its page's remote list (%u)",
         remote_count(hpage));
  mi_heap_destroy(h);

  /* blocks of a page whose owner has exited are pushed at once */
  pthread_t maker;
  if (pthread_create(&maker, NULL, orphan_maker, NULL) != 0) abort();
  pthread_join(maker, NULL);
  mia_page_t *opage = mia_page_of(orphan_blocks[0]);
  one_page = true;
  for (int i = 1; i < 4; i++) one_page = one_page && mia_page_of(orphan_blocks[i]) == opage;
  uintptr_t okey = __atomic_load_n(&opage->free_key, __ATOMIC_ACQUIRE) & ~(uintptr_t)MIA_PAGE_FLAG_MASK;
  in_freer(FREE_ORPHANS, 0, 0);
  TAP_OK(one_page && okey == 0 && remote_count(opage) == 3,
         "3 blocks of an exited thread's page are on its remote list (%u; owner %#lx)", remote_count(opage),
         (unsigned long)okey);
  mi_free(orphan_blocks[3]);

  /* the thread's exit pushes its batches */
  in_freer(FREE_RANGE, 20, 23);
  expect = batched ? 0 : 3;
  TAP_OK(remote_count(page) == expect, "3 more: %u on the remote list, %u expected", remote_count(page), expect);
  in_freer(EXIT, 0, 0);
  pthread_join(t, NULL);
  TAP_OK(remote_count(page) == 3, "the thread's exit pushes them: %u on the remote list", remote_count(page));
  for (int i = 23; i < BLOCKS; i++) mi_free(blocks[i]);
  TAP_OK(handed_out_once(SIZE), "no block is handed out twice afterwards");
  TAP_OK(atomic_load(&errors) == before + 1, "and nothing else was reported (%d errors in all)",
         atomic_load(&errors));
  return tap_done();
}

/* test-batch-orphan.c -- a batch of remote frees that waited while the
 * blocks' owner exited goes onto the page once.
 *
 * A thread frees two blocks of another thread's page; in release builds
 * they wait in its batch (MIA_REMOTE_BATCH).  The owner and three more
 * threads exit, each leaving a segment with live blocks behind, so that
 * the first push into a page nobody owns starts the purge thread for the
 * scan it schedules (16 MiB left behind, mia_purge_poke_orphans).  The
 * freeing thread then sets up a page, which pushes its batches.  Starting
 * the purge thread allocates on that thread, and that allocation, which
 * sets up a page of its own, pushed the batches again: the same two blocks
 * went onto the page twice, its count of blocks in use wrapped and its list
 * looped (a test after mimalloc-bench's mstress hung or crashed in 5 of 50
 * runs with MIALLOC_PURGE_DELAY=1).  Builds without batches push each free at
 * once, and the owner takes the two in when it exits.
 *
 * The binary exports the malloc it links (Makefile.am), so that the C
 * library's own allocations, pthread_create's among them, are mialloc's;
 * its call of malloc in main is what links that part in.  (Not in
 * ThreadSanitizer builds, whose runtime keeps malloc: there the test runs
 * without the nested allocation.) */
#include "internal.h"
#include "../tap.h"
#include "../handout.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <string.h>

#define SIZE 48
#define OWN 8        /* blocks the owner allocates on one page */
#define LEAVERS 4    /* threads that exit leaving a segment behind */

static void *owned[OWN];
static void *left_behind[LEAVERS];
static sem_t ready, leave, go, done;
static int freer_action;   /* 1: free two of the owner's blocks, 2: set up a page, 3: exit */
static void *fresh;

static _Atomic(int) purge_started;
static void capture(const char *msg, void *arg) {
  (void)arg;
  if (strstr(msg, "started the background purge thread") != NULL) atomic_store(&purge_started, 1);
}

static void *leaver(void *arg) {
  intptr_t id = (intptr_t)arg;
  if (id == 0) {
    mia_page_t *page = NULL;
    for (int n = 0; n < OWN;) {
      void *p = mi_malloc(SIZE);
      if (page == NULL) page = mia_page_of(p);
      if (mia_page_of(p) == page) owned[n++] = p;
    }
  }
  left_behind[id] = mi_malloc(SIZE);   /* the segment stays when the thread exits */
  sem_post(&ready);
  sem_wait(&leave);
  return NULL;
}

static void *freer(void *arg) {
  (void)arg;
  mi_free(mi_malloc(16));   /* a theap of its own, as a real thread has */
  for (;;) {
    sem_wait(&go);
    int action = freer_action;
    if (action == 1) {
      mi_free(owned[0]);
      mi_free(owned[1]);
    } else if (action == 2) {
      fresh = mi_malloc(1000);   /* a size it has no page for */
    }
    sem_post(&done);
    if (action == 3) return NULL;
  }
}

static void in_freer(int action) {
  freer_action = action;
  sem_post(&go);
  sem_wait(&done);
}

static uint32_t remote_count(mia_page_t *page) {
  return mia_tf_count(atomic_load_explicit(&page->thread_free, memory_order_acquire));
}

/* The length of the page's remote list, walking at most capacity links:
 * a list that loops reads as capacity + 1. */
static uint32_t remote_length(mia_page_t *page) {
  mia_block_t *b = mia_tf_head(atomic_load_explicit(&page->thread_free, memory_order_acquire));
  uint32_t n = 0;
  while (b != NULL && n <= page->capacity) {
    n++;
    b = mia_block_next(page, b);
  }
  return n;
}

int main(void) {
  free(malloc(16));   /* links the binary's malloc in (see above) */
  mi_option_set(mi_option_guarded_sample_rate, 0);
  mi_register_output(capture, NULL);
  mi_option_set(mi_option_verbose, 1);
  const bool batched = MIA_REMOTE_BATCH > 0;
  tap_diag("remote frees are %s in this build", batched ? "batched" : "pushed at once");
  sem_init(&ready, 0, 0);
  sem_init(&leave, 0, 0);
  sem_init(&go, 0, 0);
  sem_init(&done, 0, 0);

  pthread_t leavers[LEAVERS], f;
  for (intptr_t i = 0; i < LEAVERS; i++) {
    if (pthread_create(&leavers[i], NULL, leaver, (void *)i) != 0) abort();
    sem_wait(&ready);
  }
  if (pthread_create(&f, NULL, freer, NULL) != 0) abort();
  mia_page_t *page = mia_page_of(owned[0]);

  in_freer(1);
  uint32_t expect = batched ? 0 : 2;
  TAP_OK(remote_count(page) == expect, "the other thread's two frees: %u on the page's remote list, %u expected",
         remote_count(page), expect);

  for (int i = 0; i < LEAVERS; i++) sem_post(&leave);
  for (int i = 0; i < LEAVERS; i++) pthread_join(leavers[i], NULL);
  uintptr_t owner = __atomic_load_n(&page->free_key, __ATOMIC_ACQUIRE) & ~(uintptr_t)MIA_PAGE_FLAG_MASK;
  TAP_OK(owner == 0, "the owner has exited: the page has none (%#lx)", (unsigned long)owner);

  /* unbatched, the owner took the two in when it exited */
  in_freer(2);
  expect = batched ? 2 : 0;
  if (batched)
    TAP_OK(atomic_load(&purge_started), "pushing the batch into the ownerless page started the purge thread");
  TAP_OK(remote_count(page) == expect, "the two blocks are counted once on the remote list: %u, %u expected",
         remote_count(page), expect);
  TAP_OK(remote_length(page) == expect, "and the list holds them once, without a loop: %u links", remote_length(page));

  mi_option_set(mi_option_verbose, 0);
  mi_register_output(NULL, NULL);
  in_freer(3);
  pthread_join(f, NULL);
  mi_free(fresh);
  for (int i = 2; i < OWN; i++) mi_free(owned[i]);
  for (int i = 0; i < LEAVERS; i++) mi_free(left_behind[i]);
  mi_collect(true);
  TAP_OK(handed_out_once(SIZE), "no block of that size is handed out twice afterwards");
  return tap_done();
}

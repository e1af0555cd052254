/* test-full-notify.c -- how a page parked in its owner's full list hears of
 * remote frees.  The state rides in the page's thread_free word, next to
 * the list of remote frees: the owner arms it (FULL) when it parks a page,
 * and the first remote push turns it into a claim (QUEUED) in the same
 * compare-and-swap, then puts the page on the owner's remote list, once.
 * While the claim stands the owner does not free the page; processing its
 * list clears the claim, and a page that is still full is armed again. */
#include "internal.h"
#include "../tap.h"

#include <pthread.h>

#define SIZE 48

static uintptr_t word_of(mia_page_t *page) {
  return atomic_load_explicit(&page->thread_free, memory_order_acquire);
}

static void *free_one(void *p) {
  mi_free(p);
  return NULL;
}

/* A free from another thread (its batch goes out when the thread ends). */
static void free_in_other_thread(void *p) {
  pthread_t t;
  if (pthread_create(&t, NULL, free_one, p) == 0) pthread_join(t, NULL);
}

static size_t list_length(mia_page_t *head) {
  size_t n = 0;
  for (; head != NULL && n < 1000; head = head->remote_next) n++;
  return n;
}

static void *blocks[8192];

/* Allocate from h until a page fills and the next block comes from another
 * page; its blocks are left in blocks[], their number in *n. */
static mia_page_t *fill_a_page(mi_heap_t *h, size_t *n) {
  mia_page_t *page = NULL;
  *n = 0;
  for (;;) {
    void *p = mi_heap_malloc(h, SIZE);
    mia_page_t *pg = mia_page_of(p);
    if (page == NULL) page = pg;
    if (pg != page) return page;   /* p stays allocated: the heap goes at the end */
    if (*n < sizeof blocks / sizeof blocks[0]) blocks[(*n)++] = p;
  }
}

int main(void) {
  /* no block in a guarded slot: every block of the size from one page */
  mi_option_set(mi_option_guarded_sample_rate, 0);
  mi_heap_t *h = mi_heap_new();
  size_t n;
  mia_page_t *page = fill_a_page(h, &n);
  mia_theap_t *theap = atomic_load_explicit(&page->theap, memory_order_acquire);
  TAP_OK(n == page->capacity && page->used == n, "a page filled: %zu blocks, %u out", n, page->used);
  TAP_OK((page->flags & MIA_PAGE_IN_FULL) && word_of(page) == MIA_TF_FULL,
         "parked in the full list, armed, nothing pushed (word %#lx)", (unsigned long)word_of(page));
  TAP_OK(!mia_page_queued(page), "no claim yet");

  free_in_other_thread(blocks[0]);
  uintptr_t w = word_of(page);
  TAP_OK((w & MIA_TF_STATE) == MIA_TF_QUEUED && mia_tf_count(w) == 1 && mia_tf_head(w) == blocks[0],
         "the first remote free pushed its block and turned FULL into QUEUED in one word (%#lx)",
         (unsigned long)w);
  mia_page_t *listed = atomic_load_explicit(&theap->remote_pages, memory_order_acquire);
  TAP_OK(listed == page && list_length(listed) == 1, "and put the page on the owner's remote list");

  free_in_other_thread(blocks[1]);
  w = word_of(page);
  listed = atomic_load_explicit(&theap->remote_pages, memory_order_acquire);
  TAP_OK((w & MIA_TF_STATE) == MIA_TF_QUEUED && mia_tf_count(w) == 2 && listed == page &&
             list_length(listed) == 1,
         "a second remote free only pushes: the page is listed once (count %u, list %zu)", mia_tf_count(w),
         list_length(listed));

  /* the owner takes the blocks in by itself (a refill) and the free list
   * runs dry again before the list is processed: here the list is set
   * aside, as if the two blocks were handed out, and put back later */
  mia_page_collect(page);
  TAP_OK(word_of(page) == MIA_TF_QUEUED && page->used == n - 2 && page->free != NULL,
         "collected by the owner: the list is taken, the claim kept (word %#lx, %u out)",
         (unsigned long)word_of(page), page->used);
  mia_block_t *aside = page->free;
  page->free = NULL;
  page->used += 2;

  /* processing the list clears the claim; with nothing to take in, the
   * page stays parked, and armed again */
  mia_theap_process_remote(theap);
  TAP_OK((page->flags & MIA_PAGE_IN_FULL) && word_of(page) == MIA_TF_FULL &&
             atomic_load_explicit(&theap->remote_pages, memory_order_acquire) == NULL,
         "processed with nothing to take: still parked and armed again (word %#lx)",
         (unsigned long)word_of(page));

  /* so the next remote free is heard again */
  free_in_other_thread(blocks[2]);
  listed = atomic_load_explicit(&theap->remote_pages, memory_order_acquire);
  TAP_OK(word_of(page) == (MIA_TF_QUEUED | (uintptr_t)blocks[2] | (uintptr_t)1 << MIA_TF_COUNT_SHIFT) &&
             listed == page,
         "the next remote free claims and lists it again (word %#lx)", (unsigned long)word_of(page));
  page->free = aside;
  page->used -= 2;

  /* the owner frees every other block: its first free takes the page out
   * of the full list; the last one finds the claim, processes the list
   * (clearing it) and gives the page back to its segment */
  mi_free(blocks[3]);
  TAP_OK(!(page->flags & MIA_PAGE_IN_FULL) && (word_of(page) & MIA_TF_STATE) == MIA_TF_QUEUED,
         "a local free took the page out of the full list; the claim stands (word %#lx)",
         (unsigned long)word_of(page));
  for (size_t i = 4; i < n; i++) mi_free(blocks[i]);
  TAP_OK(page->block_size == 0 && atomic_load_explicit(&theap->remote_pages, memory_order_acquire) == NULL,
         "the last free processed the list and gave the page back (block size %zu)", page->block_size);
  mi_heap_destroy(h);
  return tap_done();
}

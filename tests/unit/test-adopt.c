/* test-adopt.c -- a thread that adopts the segment a finished thread left
 * keeps an empty page of it as its bin's current page where it has none
 * for that size yet, as the page's last owner would have kept it: the
 * page keeps its carved blocks, and no fresh page is set up for the size.
 * A second empty page of the same size goes back to the segment, and a
 * first-class heap that adopts emptied segments to give their memory back
 * keeps none.
 *
 * The first thread fills two pages of 64-byte blocks and hands every
 * block to the main thread, which frees them after the thread is gone (so
 * its segment was abandoned with both pages in use); a second thread then
 * allocates one block of that size. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"

#include <pthread.h>

#define SIZE 64
#define COUNT 1400   /* more than one 64 KiB page holds (1,024) */

static void *blocks[COUNT];
static mia_page_t *first_page, *second_page;
static uint32_t first_capacity;

static void *fill(void *arg) {
  (void)arg;
  for (size_t i = 0; i < COUNT; i++) blocks[i] = mi_malloc(SIZE);
  first_page = mia_page_of(blocks[0]);
  second_page = mia_page_of(blocks[COUNT - 1]);
  first_capacity = first_page != NULL ? first_page->capacity : 0;
  return NULL;
}

static void *adopt(void *arg) {
  (void)arg;
  void *p = mi_malloc(SIZE);
  mia_page_t *page = mia_page_of(p);
  mia_page_queue_t *pq = &mia_theap_get()->pages[page != NULL ? page->bin : 0];
  TAP_OK(p != NULL && (page == first_page || page == second_page),
         "the new thread's first %d-byte block comes from a page it adopted", SIZE);
  TAP_OK(page != NULL && page->capacity >= first_capacity && page->capacity > COUNT / 4,
         "the page kept its carved blocks (capacity %u, was %u)", page != NULL ? page->capacity : 0, first_capacity);
  TAP_OK(pq->first == page && pq->last == page, "it is the bin's only page");
  mia_page_t *other = page == first_page ? second_page : first_page;
  TAP_OK(other->block_size == 0, "the other empty page went back to its segment");
  /* the kept page hands out each of its blocks once */
  size_t n = page != NULL ? page->reserved : 0, distinct = 1;
  void **got = mi_malloc(n * sizeof *got);
  got[0] = p;
  for (size_t i = 1; i < n; i++) {
    got[i] = mi_malloc(SIZE);
    distinct += mia_page_of(got[i]) == page;
    memset(got[i], 0x5a, SIZE);
  }
  bool unique = true;
  for (size_t i = 1; i < n && unique; i++)
    for (size_t j = 0; j < i && unique; j++) unique = got[i] != got[j];
  TAP_OK(unique && distinct == n, "all %zu blocks of it handed out once (%zu from it)", n, distinct);
  for (size_t i = 0; i < n; i++) mi_free(got[i]);
  mi_free(got);
  return NULL;
}

/* A first-class heap's mi_collect(true) adopts segments whose blocks have
 * all been freed, to give their memory back: it keeps no empty page. */
static void *collect_in_heap(void *arg) {
  uint8_t bin = *(uint8_t *)arg;
  mi_heap_t *heap = mi_heap_new();
  mi_heap_t *old = mi_heap_set_default(heap);
  mi_collect(true);
  mia_theap_t *theap = mia_theap_get();
  TAP_OK(heap != NULL && theap->pages[bin].first == NULL && theap->full.first == NULL,
         "a first-class heap collecting emptied segments keeps none of their pages");
  mi_heap_set_default(old);
  mi_heap_delete(heap);
  return NULL;
}

int main(void) {
  mi_option_set(mi_option_purge_delay, -1);   /* nothing purged while it looks */
  /* nor any block placed in a guarded slot (secure builds sample 1 in
   * 4096): the checks count where each block of the size lands.  With
   * sampling on, a page's countdown travels with it: when the adopted
   * page's collected list (about 1,000 blocks) holds the next sample point,
   * the sample moves to the list's first block (prof.c, mia_guard_account),
   * so the adopting thread's first block is the sample, from a guarded
   * slot -- in about one run in five at the default rate */
  mi_option_set(mi_option_guarded_sample_rate, 0);
  pthread_t t;
  bool ran = pthread_create(&t, NULL, fill, NULL) == 0 && pthread_join(t, NULL) == 0;
  TAP_OK(ran && first_page != NULL && second_page != NULL && first_page != second_page,
         "a thread filled two pages of %d-byte blocks", SIZE);
  if (!ran || first_page == second_page) return tap_done();
  TAP_OK(first_capacity > COUNT / 4, "the first one carved %u blocks", first_capacity);
  for (size_t i = 0; i < COUNT; i++) mi_free(blocks[i]);
  mi_collect(false);   /* push this thread's batches of them */
  ran = pthread_create(&t, NULL, adopt, NULL) == 0 && pthread_join(t, NULL) == 0;
  TAP_OK(ran, "a second thread ran");

  /* again, and this time a thread of a first-class heap collects */
  ran = pthread_create(&t, NULL, fill, NULL) == 0 && pthread_join(t, NULL) == 0;
  uint8_t bin = ran && first_page != NULL ? first_page->bin : 0;
  for (size_t i = 0; i < COUNT; i++) mi_free(blocks[i]);
  mi_collect(false);
  ran = ran && pthread_create(&t, NULL, collect_in_heap, &bin) == 0 && pthread_join(t, NULL) == 0;
  TAP_OK(ran, "a third and a fourth thread ran");
  return tap_done();
}

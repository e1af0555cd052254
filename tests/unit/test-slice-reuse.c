/* test-slice-reuse.c -- a new page takes slices still dirty from a freed
 * page, even in another of the thread's segments, before clean ones, and
 * of those runs the shortest that holds it: the dirty slices are resident
 * already, so the page costs no page faults, the freed run is not purged
 * only to be faulted back in, and a long run stays whole for a long page.
 * Runs in a thread of its own, whose segments are all its own. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"

#include <pthread.h>

#define PAGE_SLICES 8
#define MAX_PAGES 16

static mia_page_t *pages[MAX_PAGES];
static size_t page_count;

static mia_page_t *new_page(mia_tld_t *tld) {
  mia_page_t *page = mia_segment_page_alloc(tld, PAGE_SLICES);
  if (page != NULL) mia_stat_page(page, 1);   /* as mia_page_fresh counts it */
  return page;
}

static void *run(void *arg) {
  (void)arg;
  mi_free(mi_malloc(16));   /* sets up this thread's theap */
  mia_tld_t *tld = mia_theap_get()->tld;

  /* 8-slice pages until one lands in a second segment: the first one keeps
   * 7 clean slices free (63 usable / 8), the new one is first in the list */
  mia_segment_t *first = NULL;
  while (page_count < MAX_PAGES) {
    mia_page_t *page = new_page(tld);
    if (page == NULL) break;
    pages[page_count++] = page;
    if (first == NULL) first = mia_segment_of_page(page);
    if (mia_segment_of_page(page) != first) break;
  }
  mia_segment_t *second = mia_segment_of_page(pages[page_count - 1]);
  TAP_OK(second != first, "a second segment after %zu pages", page_count);
  TAP_OK(tld->segments == second, "the newer segment comes first in the thread's list");

  /* free a page of the older segment: its slices are now free and dirty,
   * while the newer segment still has clean room first in the list */
  mia_page_t *freed = pages[2];
  uint8_t *freed_start = freed->start;
  TAP_OK(mia_segment_of_page(freed) == first, "the freed page is in the older segment");
  mia_segment_page_free(freed);
  pages[2] = NULL;

  mia_page_t *page = new_page(tld);
  TAP_OK(page != NULL && page->start == freed_start, "the next page reuses the freed dirty slices (%p, freed %p)",
         page != NULL ? (void *)page->start : NULL, (void *)freed_start);
  TAP_OK(page != NULL && !page->is_zero_init, "and knows they are not zero");
  pages[2] = page;

  /* with nothing dirty free, a page takes clean room in the first segment */
  mia_page_t *second_a = new_page(tld), *second_b = new_page(tld);
  TAP_OK(second_a != NULL && mia_segment_of_page(second_a) == second && second_a->is_zero_init,
         "with no dirty run free, the first segment's clean slices");
  TAP_OK(second_b != NULL && mia_segment_of_page(second_b) == second, "and again");

  /* best fit across segments: a 16-slice dirty run first in the list, an
   * 8-slice one in the older segment; the 8-slice page takes the latter,
   * leaving the long run whole */
  mia_page_t *exact = pages[4];
  uint8_t *exact_start = exact->start;
  mia_segment_page_free(pages[page_count - 1]);   /* the newer segment's slices 1-8 */
  mia_segment_page_free(second_a);                /* and 9-16: one 16-slice run */
  mia_segment_page_free(exact);
  pages[4] = NULL;
  pages[--page_count] = NULL;
  page = new_page(tld);
  TAP_OK(page != NULL && page->start == exact_start, "an 8-slice page takes the 8-slice run, not the 16-slice one");
  pages[4] = page;
  page = new_page(tld);
  TAP_OK(page != NULL && mia_segment_of_page(page) == second && !page->is_zero_init,
         "the next one takes the long run's dirty slices");
  if (page_count < MAX_PAGES) pages[page_count++] = page;
  if (page_count < MAX_PAGES) pages[page_count++] = second_b;

  for (size_t i = 0; i < page_count; i++)
    if (pages[i] != NULL) mia_segment_page_free(pages[i]);
  return NULL;
}

int main(void) {
  /* nothing is purged while the test looks: the freed run stays dirty */
  mi_option_set(mi_option_purge_delay, -1);
  pthread_t t;
  int rc = pthread_create(&t, NULL, run, NULL);
  if (rc == 0) pthread_join(t, NULL);
  TAP_OK(rc == 0, "thread ran");
  return tap_done();
}

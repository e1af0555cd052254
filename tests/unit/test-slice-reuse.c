/* test-slice-reuse.c -- a new page takes slices still dirty from a freed
 * page, even in another of the thread's segments, before clean ones, and
 * of those runs the shortest that holds it: the dirty slices are resident
 * already, so the page costs no page faults, the freed run is not purged
 * only to be faulted back in, and a long run stays whole for a long page.
 * A page freed with blocks carved from only its first slice leaves the
 * rest of its slices clean where they were clean before, and the next
 * page of its length starts on that first slice -- but in builds whose
 * pages end with a guard (secure), where a page stays dirty whole so that
 * the next page of its shape finds its guard in place.  Runs in a thread
 * of its own, whose segments are all its own. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"

#include <pthread.h>

#define PAGE_SLICES 8
#define MAX_PAGES 24

static mia_page_t *pages[MAX_PAGES];
static size_t page_count;

/* A page as if its blocks had all been carved (written): one freed with
 * less carved gives back the slices it never wrote as clean. */
static mia_page_t *new_page(mia_tld_t *tld) {
  mia_page_t *page = mia_segment_page_alloc(tld, PAGE_SLICES);
  if (page == NULL) return NULL;
  mia_stat_page(page, 1);   /* as mia_page_fresh counts it */
  page->block_size = MIA_SLICE_SIZE;
  page->capacity = PAGE_SLICES;
  return page;
}

static uint64_t slices_of(const mia_page_t *page) {
  size_t idx = (size_t)(page->start - (uint8_t *)mia_segment_of_page(page)) / MIA_SLICE_SIZE;
  return (((uint64_t)1 << page->slice_count) - 1) << idx;
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

  /* three pages cut one after another from clean slices (the dirty ones
   * free are used up first).  The middle one is freed with nothing carved:
   * an 8-slice hole, clean again.  The last one carved blocks from its
   * first slice only: that slice stays dirty, the rest clean again. */
  while ((page = new_page(tld)) != NULL && !page->is_zero_init && page_count < MAX_PAGES) pages[page_count++] = page;
  mia_page_t *p1 = page, *p2 = new_page(tld), *p3 = new_page(tld);
  bool in_a_row = p1 != NULL && p2 != NULL && p3 != NULL && p2->start == p1->start + PAGE_SLICES * MIA_SLICE_SIZE &&
                  p3->start == p2->start + PAGE_SLICES * MIA_SLICE_SIZE;
  TAP_OK(in_a_row && p3->is_zero_init, "three pages in a row from clean slices");
  if (!in_a_row) return NULL;
  if (page_count < MAX_PAGES) pages[page_count++] = p1;
  mia_segment_t *seg = mia_segment_of_page(p3);
  uint64_t hole = slices_of(p2), bits = slices_of(p3), first_bit = bits & -bits;
  uint8_t *hole_start = p2->start, *start = p3->start;
  p2->capacity = 0;
  mia_segment_page_free(p2);
  p3->capacity = 1;   /* one 64 KiB block */
  mia_segment_page_free(p3);
  if (mia_page_guard_size() == 0) {
    TAP_OK((seg->dirty_mask & hole) == 0, "a page freed with nothing carved leaves its slices clean");
    TAP_OK((seg->dirty_mask & bits) == first_bit, "one that carved one slice leaves that one dirty, %d clean",
           PAGE_SLICES - 1);
    page = new_page(tld);
    TAP_OK(page != NULL && page->start == start && !page->is_zero_init,
           "the next page starts on that dirty slice, not in the clean hole that fits it exactly (%p: dirty %p, "
           "hole %p)", page != NULL ? (void *)page->start : NULL, (void *)start, (void *)hole_start);
  } else {
    TAP_OK((seg->dirty_mask & hole) == hole, "with guards, a page freed with nothing carved stays dirty whole");
    TAP_OK((seg->dirty_mask & bits) == bits, "and so does one that carved one slice");
    uint64_t guards_before = seg->guard_mask;
    page = new_page(tld);
    TAP_OK(page != NULL && (page->start == start || page->start == hole_start) && seg->guard_mask == guards_before,
           "the next page takes one of the two, where its guard stands (%p: %p or %p)",
           page != NULL ? (void *)page->start : NULL, (void *)start, (void *)hole_start);
  }
  if (page_count < MAX_PAGES) pages[page_count++] = page;

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

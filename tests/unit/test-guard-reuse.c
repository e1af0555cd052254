/* test-guard-reuse.c -- secure builds end every page and huge span with a
 * guard page, and each guard set or lifted is a system call.  So memory
 * is reused, where the choice costs nothing else, where its guards already
 * stand:
 *   - a new page takes, among the free dirty runs as short as the best
 *     fit, one whose guard is set at its last slice and nowhere inside;
 *   - a one-segment claim from an arena takes a dirty segment whose guards
 *     it can keep (a huge span's end guard; a thread segment's metadata
 *     guard) before the lowest dirty one.
 * Builds without guards keep plain best fit and lowest-first: the checks
 * say which applies.  Runs in a thread of its own, whose segments are all
 * its own; nothing is purged while it looks. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"

#include <pthread.h>

static bool guards;   /* does this build set page guards? */

/* A page as if its blocks had all been carved (written): one freed with
 * less carved gives back the slices it never wrote as clean. */
static mia_page_t *new_page(mia_tld_t *tld, size_t slices) {
  mia_page_t *page = mia_segment_page_alloc(tld, slices);
  if (page == NULL) return NULL;
  mia_stat_page(page, 1);   /* as mia_page_fresh counts it */
  page->block_size = MIA_SLICE_SIZE;
  page->capacity = (uint32_t)slices;
  return page;
}

static size_t slice_of(const mia_page_t *page) {
  return (size_t)(page->start - (uint8_t *)mia_segment_of_page(page)) / MIA_SLICE_SIZE;
}

/* Two free dirty runs of two slices: the lower one left by two one-slice
 * pages (a guard at each slice), the upper one by a two-slice page (a guard
 * at its last slice only).  A two-slice page fits either exactly. */
static void *check_pages(void *arg) {
  (void)arg;
  mi_free(mi_malloc(16));   /* sets up this thread's theap */
  mia_tld_t *tld = mia_theap_get()->tld;
  mia_page_t *one_a = new_page(tld, 1), *one_b = new_page(tld, 1), *sep_a = new_page(tld, 1);
  mia_page_t *two = new_page(tld, 2), *sep_b = new_page(tld, 1);
  bool made = one_a && one_b && sep_a && two && sep_b;
  TAP_OK(made, "five pages");
  if (!made) return NULL;
  mia_segment_t *seg = mia_segment_of_page(one_a);
  bool layout = mia_segment_of_page(sep_b) == seg && slice_of(one_b) == slice_of(one_a) + 1 &&
                slice_of(sep_a) == slice_of(one_a) + 2 && slice_of(two) == slice_of(one_a) + 3 &&
                slice_of(sep_b) == slice_of(one_a) + 5;
  TAP_OK(layout, "they lie side by side in one segment (slices %zu %zu %zu %zu-%zu %zu)", slice_of(one_a),
         slice_of(one_b), slice_of(sep_a), slice_of(two), slice_of(two) + 1, slice_of(sep_b));
  if (!layout) return NULL;
  uint8_t *low = one_a->start, *high = two->start;
  size_t low_slice = slice_of(one_a);
  mia_segment_page_free(one_a);
  mia_segment_page_free(one_b);
  mia_segment_page_free(two);
  uint64_t before = seg->guard_mask;
  if (guards)
    TAP_OK(((before >> low_slice) & 3) == 3 && ((before >> (low_slice + 3)) & 3) == 2,
           "the freed pages left their guards (mask %#llx)", (unsigned long long)before);
  else
    TAP_OK(before == 0, "no guards in this build (mask %#llx)", (unsigned long long)before);

  mia_page_t *page = new_page(tld, 2);
  if (guards) {
    TAP_OK(page != NULL && page->start == high, "a two-slice page takes the run whose guard stands (%p, wanted %p)",
           page != NULL ? (void *)page->start : NULL, (void *)high);
    TAP_OK(seg->guard_mask == before, "no guard set or lifted (mask %#llx, was %#llx)",
           (unsigned long long)seg->guard_mask, (unsigned long long)before);
  } else {
    TAP_OK(page != NULL && page->start == low, "a two-slice page takes the lowest exact run (%p, wanted %p)",
           page != NULL ? (void *)page->start : NULL, (void *)low);
    TAP_OK(seg->guard_mask == 0, "and sets no guard");
  }
  /* the other run costs its guards */
  mia_page_t *other = new_page(tld, 2);
  TAP_OK(other != NULL && other->start == (guards ? low : high), "the next one takes the other run");
  if (guards && other != NULL)
    TAP_OK(((seg->guard_mask >> low_slice) & 3) == 2, "with its guard moved to its last slice (mask %#llx)",
           (unsigned long long)seg->guard_mask);
  mia_segment_page_free(sep_a);
  mia_segment_page_free(sep_b);
  if (page) mia_segment_page_free(page);
  if (other) mia_segment_page_free(other);
  return NULL;
}

/* Two dirty free segments, the lower one a thread segment's (metadata guard
 * and a page guard), the upper one a huge span's (its end guard). */
static void check_arena(void) {
  mia_subproc_t *sp = &mia_subproc_main;
  bool zero;
  uint64_t kept = 0;
  uint8_t *a = (uint8_t *)mia_arena_alloc_segments(sp, NULL, 1, &zero, ~(uint64_t)0, &kept);
  uint8_t *b = (uint8_t *)mia_arena_alloc_segments(sp, NULL, 1, &zero, ~(uint64_t)0, &kept);
  TAP_OK(a != NULL && b != NULL && a < b, "two segments, %p below %p", (void *)a, (void *)b);
  if (a == NULL || b == NULL || a > b) return;
  /* set the guards the masks record, as their users would have */
  uint64_t thread_guards = guards ? 1 | (uint64_t)1 << 5 : 0, span_guard = guards ? MIA_GUARD_LAST_SLICE : 0;
  size_t g = mia_page_guard_size();
  if (guards) {
    mia_prim_guard_on(a + MIA_SLICE_SIZE - g, g);
    mia_prim_guard_on(a + 6 * MIA_SLICE_SIZE - g, g);
    mia_prim_guard_on(b + MIA_SEGMENT_SIZE - g, g);
  }
  mia_arena_free_segments(sp, a, 1, thread_guards);
  mia_arena_free_segments(sp, b, 1, span_guard);

  uint8_t *span = (uint8_t *)mia_arena_alloc_segments(sp, NULL, 1, &zero, MIA_GUARD_LAST_SLICE, &kept);
  if (guards)
    TAP_OK(span == b && kept == span_guard && !zero,
           "a huge span takes the dirty segment whose end guard stands (%p, kept %#llx)", (void *)span,
           (unsigned long long)kept);
  else
    TAP_OK(span == a && kept == 0 && !zero, "a huge span takes the lowest dirty segment (%p)", (void *)span);
  uint8_t *seg = (uint8_t *)mia_arena_alloc_segments(sp, NULL, 1, &zero, ~(uint64_t)0, &kept);
  TAP_OK(seg == (guards ? a : b) && kept == (guards ? thread_guards : 0) && !zero,
         "a thread segment takes the other one, with its guards (%p, kept %#llx)", (void *)seg,
         (unsigned long long)kept);
  /* both stay claimed, so the thread below starts in a clean segment */
}

int main(void) {
  mi_option_set(mi_option_purge_delay, -1);   /* freed memory stays dirty */
  guards = mia_page_guard_size() != 0;
  tap_diag("this build %s page guards", guards ? "sets" : "sets no");
  check_arena();   /* first: no segment has been freed yet */
  pthread_t t;
  int rc = pthread_create(&t, NULL, check_pages, NULL);
  if (rc == 0) pthread_join(t, NULL);
  TAP_OK(rc == 0, "thread ran");
  return tap_done();
}

/* test-size-groups.c -- in the process's first theap, the sizes from 33
 * bytes to 8 KiB share the page of their power of two until that page is
 * full; then each size of the group gets its own bin, and the shared page
 * serves its power of two only.  16 and 32 bytes, and sizes above 8 KiB,
 * always have their own bins, and so does every size in the theaps of
 * other threads and of heaps made with mi_heap_new.
 *
 * The main thread's theap is the process's first: nothing here allocates
 * before main, and main's first malloc is of 16 bytes.  Builds with
 * padding records (debug) group no sizes.
 */
#include "internal.h"
#include "tls.h"
#include "../tap.h"

#include <pthread.h>

/* what a malloc of size asks its page for (checked builds add a record) */
static size_t request(size_t size) { return mia_padded() ? mia_padded_request(size) : size; }

/* the power-of-two bin of size's group (release and secure builds) */
static uint8_t group_bin(size_t size) {
  uint8_t bin = mia_bin_of(size);
  return bin <= 2 || bin > 32 ? bin : (uint8_t)((bin + 3) & ~3);
}

/* One block of each of 18 sizes (those `sleep` asks for) comes from one
 * page per group: 9 pages, not 18. */
static void first_blocks(void) {
  static const size_t sizes[] = {5, 26, 40, 48, 56, 72, 96, 104, 160, 184, 208, 424, 472, 792, 1328, 1600, 2048, 4096};
  enum { N = sizeof sizes / sizeof sizes[0] };
  void *p[N];
  mia_page_t *pages[N];
  size_t distinct = 0;
  bool bins_ok = true;
  for (size_t i = 0; i < N; i++) {
    p[i] = mi_malloc(sizes[i]);
    mia_page_t *page = mia_page_of(p[i]);
    if (page == NULL || page->bin != group_bin(sizes[i])) {
      tap_diag("%zu bytes: bin %d, its group's is %d", sizes[i], page ? page->bin : -1, group_bin(sizes[i]));
      bins_ok = false;
    }
    bool seen = false;
    for (size_t j = 0; j < distinct; j++) seen |= pages[j] == page;
    if (!seen) pages[distinct++] = page;
  }
  TAP_OK(bins_ok, "the first theap's first blocks come from the bins of their groups' powers of two");
  size_t groups = 0;
  for (size_t i = 0; i < N; i++) groups += i == 0 || group_bin(sizes[i]) != group_bin(sizes[i - 1]);
  TAP_OK(distinct == groups, "18 sizes took %zu pages, one per group (%zu)", distinct, groups);
  bool usable = true;
  for (size_t i = 0; i < N; i++) usable &= mi_usable_size(p[i]) >= sizes[i];
  TAP_OK(usable, "each block is at least as large as asked");
  TAP_OK(mi_good_size(72) == mia_bin_size[group_bin(72)],
         "mi_good_size(72) names the group's block size (%zu)", mi_good_size(72));
  for (size_t i = 0; i < N; i++) mi_free(p[i]);
}

/* Fill the shared page of the group of 128 with blocks of 70 and 100
 * bytes: the group splits, and 70, 100 and 128 bytes then come from their
 * own bins. */
static void split(void) {
  void *first = mi_malloc(100);
  mia_page_t *shared = mia_page_of(first);
  TAP_OK(shared != NULL && shared->bin == group_bin(100), "100 bytes come from the group's page (bin %d)",
         shared ? shared->bin : -1);
  size_t n = shared->reserved - shared->used + 1;
  void **blocks = mi_malloc(n * sizeof *blocks);
  blocks[0] = first;
  bool same = true;
  for (size_t i = 1; i < n; i++) {
    blocks[i] = mi_malloc(i % 2 ? 70 : 100);
    same &= mia_page_of(blocks[i]) == shared;
  }
  TAP_OK(same && shared->used == shared->reserved, "70 and 100 bytes share it until its %u blocks are all in use",
         shared->reserved);

  /* the malloc that needs a second page still gets the size
   * mi_good_size named, from a new page of the group's bin */
  size_t good = mi_good_size(70);
  void *s2 = mi_malloc(70);
  mia_page_t *second = mia_page_of(s2);
  TAP_OK(second != shared && second->bin == shared->bin && mi_usable_size(s2) == good,
         "the next 70 bytes get the %zu bytes mi_good_size named, from a second page of the group's bin", good);
  void *a = mi_malloc(70), *b = mi_malloc(100), *c = mi_malloc(128);
  mia_page_t *pa = mia_page_of(a), *pb = mia_page_of(b), *pc = mia_page_of(c);
  TAP_OK(pa->bin == mia_bin_of(70) && pb->bin == mia_bin_of(100) && pa != shared && pb != shared,
         "then 70 and 100 bytes have their own bins (%d, %d)", pa->bin, pb->bin);
  TAP_OK(pc == second, "and 128 bytes the group's second page");
  mia_theap_t *theap = mia_theap_get();
  TAP_OK(theap->pages_direct[mia_wsize(70)] == pa && theap->pages_direct[mia_wsize(100)] == pb,
         "the direct table points 70 and 100 bytes at their own pages");
  TAP_OK(mi_good_size(70) == mia_bin_size[mia_bin_of(70)],
         "mi_good_size(70) names its own block size now (%zu)", mi_good_size(70));
  mi_free(c);
  /* the shared page's blocks of either size free into it */
  size_t used = shared->used;
  for (size_t i = 0; i < n; i += 2) mi_free(blocks[i]);
  TAP_OK(shared->used == used - (n + 1) / 2, "freed blocks of both sizes went back to the shared page (%u in use)",
         shared->used);
  void *e = mi_malloc(70);
  TAP_OK(mia_page_of(e) == pa, "70 bytes stay on their own page");
  mi_free(e);
  mi_free(s2);
  mi_free(a);
  mi_free(b);
  for (size_t i = 1; i < n; i += 2) mi_free(blocks[i]);
  mi_free(blocks);
}

/* Blocks of sizes all over the groups, kept, so that most groups split on
 * the way: before every malloc, mi_good_size names the usable size the
 * block gets. */
static void good_size_predicts(void) {
  enum { N = 2000 };
  void **blocks = mi_malloc(N * sizeof *blocks);
  size_t wrong = 0, split_before = (size_t)__builtin_popcount(mia_theap_get()->groups_split);
  for (size_t i = 0; i < N; i++) {
    size_t n = 33 + (i * 7919) % 8160;
    size_t good = mi_good_size(n);
    blocks[i] = mi_malloc(n);
    if (mi_usable_size(blocks[i]) != good && wrong++ == 0)
      tap_diag("mi_good_size(%zu) = %zu, then mi_usable_size(mi_malloc(%zu)) = %zu", n, good, n, mi_usable_size(blocks[i]));
  }
  size_t split_after = (size_t)__builtin_popcount(mia_theap_get()->groups_split);
  TAP_OK(wrong == 0 && split_after > split_before + 2,
         "mi_good_size(n) == mi_usable_size(mi_malloc(n)) for %d sizes, while %zu groups split", N,
         split_after - split_before);
  for (size_t i = 0; i < N; i++) mi_free(blocks[i]);
  mi_free(blocks);
}

/* 16 and 32 bytes, and sizes above 8 KiB, are not grouped. */
static void ungrouped(void) {
  static const size_t sizes[] = {1, 8, 16, 24, 32, 9000, 20000, 70000};
  bool ok = true;
  size_t checked = 0;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    uint8_t own = mia_bin_of(request(sizes[i]));
    if (own > 2 && own <= 32) continue;   /* checked builds: 24 and 32 bytes ask for 40 and 48 */
    void *p = mi_malloc(sizes[i]);
    mia_page_t *page = mia_page_of(p);
    if (page == NULL || page->bin != own) {
      tap_diag("%zu bytes: bin %d, not %d", sizes[i], page ? page->bin : -1, own);
      ok = false;
    }
    checked++;
    mi_free(p);
  }
  TAP_OK(ok && checked >= 6, "16, 32 bytes and sizes above 8 KiB come from their own bins (%zu sizes)", checked);
}

/* 72 bytes (a group not used yet) from h, or from this thread's heap */
static bool own_bin_from_start(mi_heap_t *h) {
  void *p = h != NULL ? mi_heap_malloc(h, 72) : mi_malloc(72);
  mia_page_t *page = mia_page_of(p);
  bool own = page != NULL && page->bin == mia_bin_of(request(72));
  mi_free(p);
  return own;
}

/* Before its first malloc, a thread's mi_good_size already answers for
 * the theap it will get. */
static void *other_thread(void *arg) {
  (void)arg;
  size_t good = mi_good_size(72);
  void *p = mi_malloc(72);
  bool same = mi_usable_size(p) == good;
  if (!same) tap_diag("a new thread: mi_good_size(72) %zu, mi_usable_size %zu", good, mi_usable_size(p));
  mi_free(p);
  return same && own_bin_from_start(NULL) ? (void *)1 : NULL;
}

int main(void) {
  mi_option_set(mi_option_guarded_sample_rate, 0);   /* secure builds sample by default */
  mi_free(mi_malloc(16));
  mia_theap_t *theap = mia_theap_get();
  if (mia_padded()) {
    /* debug builds: reports name a block's size, the class asked for */
    void *p = mi_malloc(72);
    TAP_OK(mia_page_of(p)->bin == mia_bin_of(request(72)), "builds with padding records do not group sizes");
    mi_free(p);
  } else {
    TAP_OK(theap->groups_split == 0, "the main thread's theap shares pages between the sizes of a group");
    first_blocks();
    split();
    good_size_predicts();
  }
  ungrouped();
  pthread_t t;
  void *own = NULL;
  TAP_OK(pthread_create(&t, NULL, other_thread, NULL) == 0 && pthread_join(t, &own) == 0 && own != NULL,
         "another thread's sizes have their own bins from the start, as its first mi_good_size says");
  mi_heap_t *h = mi_heap_new();
  TAP_OK(own_bin_from_start(h), "so do a new heap's");
  mi_heap_delete(h);
  return tap_done();
}

/* test-compat.c -- the names code written for the reference allocator
 * calls besides the core API: the u-family, the CRT-style names, typed
 * allocation macros, the deprecated option names, abandoned-block
 * visiting, per-heap guarded sampling and the compatibility hints.
 */
#define _GNU_SOURCE
#include <mialloc.h>

#include <errno.h>
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "config.h"
#include "../tap.h"

/* volatile: the compiler must not see (and warn about) the overflow */
static volatile size_t huge_count = SIZE_MAX / 2;

static bool all_bytes(const void *p, size_t n, unsigned char v) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return false;
  return true;
}

static void test_u_family(void) {
  size_t bs = 12345;
  void *p = mi_umalloc(100, &bs);
  TAP_OK(p != NULL && bs == mi_usable_size(p) && bs >= 100, "mi_umalloc reports the usable size (%zu)", bs);
  memset(p, 0x5a, bs);   /* all of it is usable */
  size_t pre = 0, post = 0;
  void *q = mi_urealloc(p, 5000, &pre, &post);
  TAP_OK(q != NULL && pre == bs && post == mi_usable_size(q) && post >= 5000 && all_bytes(q, 100, 0x5a),
         "mi_urealloc reports both sizes and keeps the contents (%zu -> %zu)", pre, post);
  size_t freed = 0;
  mi_ufree(q, &freed);
  TAP_OK(freed == post, "mi_ufree reports the size it freed");
  pre = post = 7;
  q = mi_urealloc(NULL, 64, &pre, &post);
  TAP_OK(q != NULL && pre == 0 && post >= 64, "mi_urealloc of NULL allocates (pre 0)");
  mi_ufree(q, NULL);
  freed = 9;
  mi_ufree(NULL, &freed);
  TAP_OK(freed == 0, "mi_ufree(NULL) reports 0");

  unsigned char *z = mi_ucalloc(10, 30, &bs);
  TAP_OK(z != NULL && bs >= 300 && all_bytes(z, bs, 0), "mi_ucalloc: zeroed, size reported");
  mi_free(z);
  bs = 1;
  TAP_OK(mi_ucalloc(huge_count, 4, &bs) == NULL && bs == 0, "mi_ucalloc overflow: NULL, size 0");
  z = mi_uzalloc_aligned(200, 256, &bs);
  TAP_OK(z != NULL && (uintptr_t)z % 256 == 0 && bs >= 200 && all_bytes(z, 200, 0), "mi_uzalloc_aligned");
  mi_free(z);
  z = mi_umalloc_aligned(64, 4096, &bs);
  TAP_OK(z != NULL && (uintptr_t)z % 4096 == 0 && bs >= 64, "mi_umalloc_aligned");
  mi_free_small(z);
  z = mi_uzalloc_small(MI_SMALL_SIZE_MAX, &bs);
  TAP_OK(z != NULL && bs >= MI_SMALL_SIZE_MAX && all_bytes(z, MI_SMALL_SIZE_MAX, 0),
         "mi_uzalloc_small up to MI_SMALL_SIZE_MAX (%zu)", (size_t)MI_SMALL_SIZE_MAX);
  mi_free(z);
  z = mi_umalloc_small(8, &bs);
  TAP_OK(z != NULL && bs >= 8, "mi_umalloc_small");
  mi_free(z);
  TAP_OK(mi_malloc_good_size(100) == mi_good_size(100) && mi_malloc_good_size(100) >= 100, "mi_malloc_good_size");
}

static void test_crt_names(void) {
  void *p = mi_malloc(100);
  size_t us = mi_usable_size(p);
  TAP_OK(mi__expand(p, us) == p && mi__expand(p, us + 100000) == NULL && mi_usable_size(p) == us,
         "mi__expand: in place within the block, NULL beyond, block unchanged");
  mi_free(p);

  unsigned char *r = mi_aligned_recalloc(NULL, 10, 10, 64);
  TAP_OK(r != NULL && (uintptr_t)r % 64 == 0 && all_bytes(r, 100, 0), "mi_aligned_recalloc from NULL");
  memset(r, 1, 100);
  r = mi_aligned_recalloc(r, 50, 10, 64);
  TAP_OK(r != NULL && (uintptr_t)r % 64 == 0 && all_bytes(r, 100, 1) && all_bytes(r + 100, 400, 0),
         "mi_aligned_recalloc grows: old bytes kept, new ones zero");
  mi_free(r);
  r = mi_aligned_offset_recalloc(NULL, 4, 25, 128, 16);
  TAP_OK(r != NULL && ((uintptr_t)r + 16) % 128 == 0 && all_bytes(r, 100, 0), "mi_aligned_offset_recalloc");
  mi_free(r);

  setenv("MIA_TEST_DUPENV", "some value", 1);
  char *buf = (char *)1;
  size_t size = 0;
  int err = mi_dupenv_s(&buf, &size, "MIA_TEST_DUPENV");
  TAP_OK(err == 0 && buf != NULL && strcmp(buf, "some value") == 0 && size == 11,
         "mi_dupenv_s copies a set variable (size counts the NUL)");
  mi_free(buf);
  buf = (char *)1;
  size = 5;
  err = mi_dupenv_s(&buf, &size, "MIA_TEST_NOT_SET_ANYWHERE");
  TAP_OK(err == 0 && buf == NULL && size == 0, "mi_dupenv_s of an unset variable: 0, NULL");
  TAP_OK(mi_dupenv_s(NULL, &size, "HOME") == EINVAL && mi_dupenv_s(&buf, &size, NULL) == EINVAL,
         "mi_dupenv_s: EINVAL for NULL arguments");
  wchar_t *wbuf = (wchar_t *)1;
  TAP_OK(mi_wdupenv_s(&wbuf, &size, L"HOME") == EINVAL && wbuf == NULL && size == 0,
         "mi_wdupenv_s: EINVAL on Linux, NULL buffer");

  wchar_t *w = mi_wcsdup(L"wide text");
  TAP_OK(w != NULL && wcscmp(w, L"wide text") == 0 && mi_usable_size(w) >= 10 * sizeof(wchar_t), "mi_wcsdup");
  mi_free(w);
  unsigned char *m = mi_mbsdup((const unsigned char *)"bytes");
  TAP_OK(m != NULL && strcmp((char *)m, "bytes") == 0, "mi_mbsdup");
  mi_free(m);
  TAP_OK(mi_wcsdup(NULL) == NULL && mi_mbsdup(NULL) == NULL, "mi_wcsdup/mi_mbsdup of NULL: NULL");
}

typedef struct point_s {
  double x, y, z;
} point_t;

static void test_typed_macros(void) {
  point_t *p = mi_zalloc_tp(point_t);
  TAP_OK(p != NULL && p->x == 0 && p->z == 0 && mi_usable_size(p) >= sizeof *p, "mi_zalloc_tp");
  mi_free(p);
  p = mi_calloc_tp(point_t, 10);
  TAP_OK(p != NULL && all_bytes(p, 10 * sizeof *p, 0), "mi_calloc_tp");
  p[9].y = 3;
  p = mi_reallocn_tp(p, point_t, 20);
  TAP_OK(p != NULL && p[9].y == 3 && mi_usable_size(p) >= 20 * sizeof *p, "mi_reallocn_tp keeps the contents");
  p = mi_recalloc_tp(p, point_t, 40);
  TAP_OK(p != NULL && p[9].y == 3 && all_bytes(&p[20], 20 * sizeof *p, 0), "mi_recalloc_tp zeroes the new part");
  mi_free(p);
  TAP_OK(mi_mallocn_tp(point_t, huge_count) == NULL, "mi_mallocn_tp overflow: NULL");
  mi_heap_t *h = mi_heap_new();
  point_t *hp = mi_heap_malloc_tp(h, point_t);
  point_t *hz = mi_heap_calloc_tp(h, point_t, 3);
  TAP_OK(hp != NULL && hz != NULL && mi_heap_contains_block(h, hp) && mi_heap_contains_block(h, hz) &&
             all_bytes(hz, 3 * sizeof *hz, 0),
         "mi_heap_malloc_tp/mi_heap_calloc_tp allocate from the heap");
  mi_heap_destroy(h);
}

static void test_option_names(void) {
  /* older names reach the option of the same meaning */
  long saved = mi_option_get(mi_option_purge_delay);
  mi_option_set(mi_option_decommit_delay, 77);
  TAP_OK(mi_option_get(mi_option_purge_delay) == 77 && mi_option_get(mi_option_reset_delay) == 77,
         "mi_option_decommit_delay is purge_delay");
  mi_option_set(mi_option_purge_delay, saved);
  TAP_OK(mi_option_abandoned_page_decommit == mi_option_abandoned_page_purge &&
             mi_option_allow_decommit == mi_option_purge_decommits &&
             mi_option_page_reset == mi_option_deprecated_page_reset,
         "the other deprecated names alias their options");
  /* new compatibility options exist, with their documented defaults */
  TAP_OK(mi_option_is_enabled(mi_option_visit_abandoned) && mi_option_get(mi_option_generic_collect) == 10000 &&
             mi_option_visit_abandoned < _mi_option_last && mi_option_allow_thp < _mi_option_last,
         "visit_abandoned, generic_collect and allow_thp are options");
}

/* Is the byte at a readable?  Asked of the kernel, which answers EFAULT
 * instead of raising a signal. */
static bool readable(const void *a) {
  char c;
  struct iovec local = {&c, 1}, remote = {(void *)a, 1};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1;
}

/* A guarded block lies in one 4 KiB page followed by an inaccessible
 * one, its slot's guard page, and preceded by the previous slot's guard
 * page -- or, for the first slot of a slot segment, by the segment's
 * metadata (slot data starts 64 KiB into the 4 MiB-aligned segment).
 * (Secure builds end ordinary pages with a guard page too, but never
 * start one after it.  The block ends at its guard page, except in debug
 * builds, where the bytes past the size asked for are checked at free.) */
static bool is_guarded(const unsigned char *p) {
  uintptr_t page = (uintptr_t)p & ~(uintptr_t)4095;
  bool first_slot = (page & ((4u << 20) - 1)) == (64u << 10);
  return !readable((const void *)(page + 4096)) && (first_slot || !readable((const void *)(page - 1)));
}

/* ---- abandoned memory ---- */

#define N_LEFT 500
static void *left_behind[N_LEFT];

static void *leave_blocks(void *arg) {
  (void)arg;
  for (int i = 0; i < N_LEFT; i++) {
    left_behind[i] = mi_malloc(24 + (size_t)(i % 7) * 40);
    memset(left_behind[i], 0x33, 24);
  }
  return NULL;   /* exits with the blocks live: they are abandoned */
}

typedef struct count_s {
  size_t found, blocks, areas;
  const mi_heap_t *heap;
  bool heap_ok;
  int stop_after;
} count_t;

static bool count_visit(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t bsize, void *arg) {
  count_t *c = arg;
  if (heap != c->heap) c->heap_ok = false;
  if (block == NULL) {
    c->areas++;
    return area != NULL;
  }
  c->blocks++;
  (void)bsize;
  for (int i = 0; i < N_LEFT; i++)
    if (left_behind[i] == block) {
      c->found++;
      break;
    }
  /* the visitor may allocate: the walk does not hold the list's lock */
  free(mi_malloc(16));
  return c->stop_after <= 0 || (int)c->blocks < c->stop_after;
}

static void test_abandoned_visit(void) {
  pthread_t t;
  pthread_create(&t, NULL, leave_blocks, NULL);
  pthread_join(t, NULL);
  /* guarded samples (secure builds sample by default) belong to no
   * thread, so they are never abandoned: mi_heap_visit_blocks shows them */
  size_t guarded = 0;
  for (int i = 0; i < N_LEFT; i++) guarded += is_guarded(left_behind[i]);
  count_t c = {.heap = mi_heap_main(), .heap_ok = true};
  bool ok = mi_abandoned_visit_blocks(mi_subproc_main(), 0, true, count_visit, &c);
  TAP_OK(ok && c.found == N_LEFT - guarded && c.heap_ok && c.areas > 0,
         "mi_abandoned_visit_blocks finds the blocks an exited thread left (%zu of %d; %zu guarded; %zu areas)",
         c.found, N_LEFT, guarded, c.areas);
  count_t whole = {.heap = mi_heap_main(), .heap_ok = true};
  ok = mi_heap_visit_blocks(mi_heap_main(), true, count_visit, &whole);
  TAP_OK(ok && whole.found == N_LEFT && whole.heap_ok,
         "mi_heap_visit_blocks of the main heap sees all %d, guarded ones included (%zu)", N_LEFT, whole.found);
  count_t areas_only = {.heap = mi_heap_main(), .heap_ok = true};
  ok = mi_abandoned_visit_blocks(mi_subproc_main(), 0, false, count_visit, &areas_only);
  TAP_OK(ok && areas_only.blocks == 0 && areas_only.areas == c.areas, "visit_blocks false: areas only");
  count_t other_tag = {.heap = mi_heap_main(), .heap_ok = true};
  ok = mi_abandoned_visit_blocks(mi_subproc_main(), 7, true, count_visit, &other_tag);
  TAP_OK(ok && other_tag.blocks == 0 && other_tag.areas == 0, "another heap tag: nothing visited");
  count_t any_tag = {.heap = mi_heap_main(), .heap_ok = true};
  ok = mi_abandoned_visit_blocks(mi_subproc_main(), -1, true, count_visit, &any_tag);
  TAP_OK(ok && any_tag.found == c.found && any_tag.areas == c.areas,
         "a negative heap tag visits every heap's, as mimalloc's does (%zu blocks)", any_tag.found);
  count_t stop = {.heap = mi_heap_main(), .heap_ok = true, .stop_after = 3};
  ok = mi_abandoned_visit_blocks(mi_subproc_main(), 0, true, count_visit, &stop);
  TAP_OK(!ok && stop.blocks == 3, "a visitor returning false stops the walk (false)");
  /* the list went back: a second full walk sees the blocks again, and they
   * are still valid and freeable */
  count_t again = {.heap = mi_heap_main(), .heap_ok = true};
  mi_abandoned_visit_blocks(mi_subproc_main(), 0, true, count_visit, &again);
  bool intact = true;
  for (int i = 0; i < N_LEFT; i++) intact = intact && all_bytes(left_behind[i], 24, 0x33);
  TAP_OK(again.found == N_LEFT - guarded && intact, "after visiting, the abandoned blocks are all still there");
  for (int i = 0; i < N_LEFT; i++) mi_free(left_behind[i]);
  count_t bad = {.heap = mi_heap_main(), .heap_ok = true};
  TAP_OK(!mi_abandoned_visit_blocks((mi_subproc_id_t)&bad, 0, true, count_visit, &bad),
         "an unknown sub-process: false");
}

/* ---- guarded sampling per heap ---- */

/* Settings reach a page when its free list refills: the first blocks may
 * still come from a list cut before, so only the second half counts. */
static size_t count_guarded(mi_heap_t *heap, size_t n, size_t size) {
  unsigned char **b = malloc(n * sizeof *b);
  size_t trapped = 0;
  for (size_t i = 0; i < n; i++) {
    b[i] = heap == NULL ? mi_malloc(size) : mi_heap_malloc(heap, size);
    if (i >= n / 2 && b[i] != NULL && is_guarded(b[i])) trapped++;
  }
  for (size_t i = 0; i < n; i++) mi_free(b[i]);
  free(b);
  return trapped;
}

static void test_guarded_per_heap(void) {
#if MIALLOC_GUARDED
  mi_heap_guarded_set_size_bound(mi_heap_main(), 64, 128);
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 1, 42);
  size_t g = count_guarded(NULL, 2000, 100);
  TAP_OK(g >= 990, "rate 1 on the main heap: %zu of the last 1000 blocks of 100 bytes end at a guard page", g);
  size_t s = count_guarded(NULL, 2000, 32);
  TAP_OK(s == 0, "a size outside the bound is not guarded (%zu of 1000)", s);
  mi_heap_t *h = mi_heap_new();
  mi_heap_guarded_set_sample_rate(h, 1, 0);   /* no effect there */
  size_t hg = count_guarded(h, 500, 100);
  TAP_OK(hg == 0, "first-class heaps take no guarded samples (%zu of 250)", hg);
  mi_heap_destroy(h);
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 0, 0);
  size_t off = count_guarded(NULL, 2000, 100);
  TAP_OK(off == 0, "rate 0 turns it off again (%zu of 1000)", off);
  mi_heap_guarded_set_size_bound(mi_heap_main(), 0, 4080);
#else
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 1, 0);
  size_t g = count_guarded(NULL, 200, 100);
  TAP_OK(g == 0, "builds without guarded sampling accept the call and guard nothing");
#endif
}

/* The guarded options set while the program runs apply at once, as the
 * heap calls do (they were read at start-up only). */
static void test_guarded_options(void) {
#if MIALLOC_GUARDED
  long rate = mi_option_get(mi_option_guarded_sample_rate);
  long min = mi_option_get(mi_option_guarded_min), max = mi_option_get(mi_option_guarded_max);
  mi_option_set(mi_option_guarded_min, 64);
  mi_option_set(mi_option_guarded_max, 128);
  mi_option_set(mi_option_guarded_sample_rate, 1);
  size_t g = count_guarded(NULL, 2000, 100);
  TAP_OK(g >= 990, "mi_option_set of rate 1 and a window: %zu of the last 1000 blocks of 100 bytes end at a guard page", g);
  size_t s = count_guarded(NULL, 2000, 200);
  TAP_OK(s == 0, "a size outside the window set is not guarded (%zu of 1000)", s);
  mi_option_set(mi_option_guarded_sample_rate, 0);
  size_t off = count_guarded(NULL, 2000, 100);
  TAP_OK(off == 0, "mi_option_set of rate 0 turns it off at once (%zu of 1000)", off);
  mi_option_set(mi_option_guarded_min, min);
  mi_option_set(mi_option_guarded_max, max);
  mi_option_set(mi_option_guarded_sample_rate, rate);
#endif
}

static void test_hints(void) {
  mi_thread_set_in_threadpool();
  void *p = mi_malloc(1 << 20);
  mi_free(p);
  mi_collect_reduce(0);
  void *q = mi_malloc(100);
  TAP_OK(q != NULL, "mi_thread_set_in_threadpool and mi_collect_reduce leave the allocator working");
  mi_free(q);
  size_t reserved = 99;
  int err = mi_reserve_huge_os_pages(0, 1.0, &reserved);
  TAP_OK(err == 0 && reserved == 0, "mi_reserve_huge_os_pages of 0 pages: 0, none reserved");
  mi_arena_id_t id = 5;
  err = mi_reserve_huge_os_pages_at_ex(0, -1, 0, true, &id);
  TAP_OK(err == 0 && id == 0, "mi_reserve_huge_os_pages_at_ex of 0 pages: no arena");
}

int main(void) {
  test_u_family();
  test_crt_names();
  test_typed_macros();
  test_option_names();
  test_abandoned_visit();
  test_guarded_per_heap();
  test_guarded_options();
  test_hints();
  return tap_done();
}

/* test-limits.c -- sizes no allocation can have: every entry point that
 * takes a size returns NULL with errno ENOMEM for sizes near SIZE_MAX and
 * near PTRDIFF_MAX, for every offset below them up to a few pages, and
 * for sizes around the largest one mialloc accepts (PTRDIFF_MAX / 2).
 *
 * Why a sweep and not one size: an allocator rounds a size up (to a size
 * class, an alignment, a page, room for a header) before it checks it, and
 * a rounding that wraps turns a huge request into a tiny block.  That only
 * happens for the few sizes within one rounding step of the top, so each
 * function is tried at every offset in [0, 3 pages] (odd steps further on,
 * to 2 MiB) below each limit, with small and large alignments.  A reallocation that
 * fails must leave its block as it was.
 */
#define _GNU_SOURCE
#include <mialloc.h>
#include "../tap.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define LIMITS 2
static size_t limit[LIMITS];
static const char *const limit_name[LIMITS] = {"SIZE_MAX", "PTRDIFF_MAX"};
static size_t page_size;
static volatile size_t v_size_max = SIZE_MAX;   /* no compile-time size warnings */

/* The offsets below a limit that are tried: every one up to three pages,
 * then every 97th up to 2 MiB (twice the largest alignment tried, whose
 * rounding can wrap from 1 MiB below a limit). */
static bool next_offset(size_t *k) {
  *k += *k < 3 * page_size ? 1 : 97;
  return *k <= ((size_t)2 << 20);
}

typedef void *(*alloc_fn)(size_t n);

static bool reallocating;   /* fn grows the live block (below): a block it returns is that one */

/* fn(n) for every size n tried: the first size that did not get NULL and
 * ENOMEM, or 0 when all did. */
static size_t first_bad_size(alloc_fn fn) {
  for (int l = 0; l < LIMITS; l++) {
    size_t k = 0;
    do {
      size_t n = limit[l] - k;
      errno = 0;
      void *p = fn(n);
      int e = errno;
      if (p != NULL || e != ENOMEM) {
        if (!reallocating) free(p);
        return n;
      }
    } while (next_offset(&k));
  }
  return 0;
}

static size_t align_now;   /* the alignment the aligned wrappers use */

static void *w_malloc(size_t n) { return malloc(n); }
static void *w_calloc_n1(size_t n) { return calloc(n, 1); }
static void *w_calloc_1n(size_t n) { return calloc(1, n); }
static void *w_valloc(size_t n) { return valloc(n); }
static void *w_pvalloc(size_t n) { return pvalloc(n); }
static void *w_memalign(size_t n) { return memalign(align_now, n); }
static void *w_aligned_alloc(size_t n) { return aligned_alloc(align_now, n); }
static void *w_posix_memalign(size_t n) {
  void *r = &r;
  int e = posix_memalign(&r, align_now, n);
  if (e == 0) return r;
  errno = r == &r ? e : 0;   /* a failure must leave r as it was */
  return NULL;
}
static void *w_mi_malloc(size_t n) { return mi_malloc(n); }
static void *w_mi_zalloc(size_t n) { return mi_zalloc(n); }
static void *w_mi_mallocn(size_t n) { return mi_mallocn(n, 1); }
static void *w_mi_malloc_aligned(size_t n) { return mi_malloc_aligned(n, align_now); }
static void *w_mi_malloc_aligned_at(size_t n) { return mi_malloc_aligned_at(n, align_now, 8); }
static void *w_mi_zalloc_aligned(size_t n) { return mi_zalloc_aligned(n, align_now); }
static void *w_mi_calloc_aligned(size_t n) { return mi_calloc_aligned(1, n, align_now); }
static void *w_mi_heap_malloc(size_t n) { return mi_heap_malloc(mi_heap_get_default(), n); }
static void *w_mi_heap_malloc_aligned(size_t n) { return mi_heap_malloc_aligned(mi_heap_get_default(), n, align_now); }
static void *w_mi_umalloc(size_t n) {
  size_t bsize = 1;
  return mi_umalloc(n, &bsize);
}

/* A live block the reallocation wrappers grow; it must survive each failure. */
#define LIVE_SIZE 200
static unsigned char *live;
static bool live_intact = true;

/* After a reallocation: a failure must have left the block as it was; a
 * success (a failed check) moved it, and the test goes on with the moved
 * block, whose first LIVE_SIZE bytes a realloc kept. */
static void *check_live(void *p) {
  if (p != NULL) return live = p;
  for (size_t i = 0; i < LIVE_SIZE; i++)
    if (live[i] != (unsigned char)(i * 13 + 5)) live_intact = false;
  return NULL;
}
static void *w_realloc(size_t n) { return check_live(realloc(live, n)); }
static void *w_reallocarray(size_t n) { return check_live(reallocarray(live, n, 1)); }
static void *w_mi_realloc(size_t n) { return check_live(mi_realloc(live, n)); }
static void *w_mi_reallocn(size_t n) { return check_live(mi_reallocn(live, n, 1)); }
static void *w_mi_rezalloc(size_t n) { return check_live(mi_rezalloc(live, n)); }
static void *w_mi_recalloc(size_t n) { return check_live(mi_recalloc(live, 1, n)); }
static void *w_mi_realloc_aligned(size_t n) { return check_live(mi_realloc_aligned(live, n, align_now)); }
static void *w_mi_heap_realloc(size_t n) { return check_live(mi_heap_realloc(mi_heap_get_default(), live, n)); }

typedef struct {
  const char *name;
  alloc_fn fn;
  bool aligned;   /* tried with each of the alignments */
} entry_t;

static const entry_t entries[] = {
    {"malloc", w_malloc, false},
    {"calloc(n, 1)", w_calloc_n1, false},
    {"calloc(1, n)", w_calloc_1n, false},
    {"valloc", w_valloc, false},
    {"pvalloc", w_pvalloc, false},
    {"memalign", w_memalign, true},
    {"aligned_alloc", w_aligned_alloc, true},
    {"posix_memalign (its pointer untouched)", w_posix_memalign, true},
    {"mi_malloc", w_mi_malloc, false},
    {"mi_zalloc", w_mi_zalloc, false},
    {"mi_mallocn", w_mi_mallocn, false},
    {"mi_malloc_aligned", w_mi_malloc_aligned, true},
    {"mi_malloc_aligned_at", w_mi_malloc_aligned_at, true},
    {"mi_zalloc_aligned", w_mi_zalloc_aligned, true},
    {"mi_calloc_aligned", w_mi_calloc_aligned, true},
    {"mi_heap_malloc", w_mi_heap_malloc, false},
    {"mi_heap_malloc_aligned", w_mi_heap_malloc_aligned, true},
    {"mi_umalloc", w_mi_umalloc, false},
};

static const entry_t reallocs[] = {
    {"realloc", w_realloc, false},
    {"reallocarray", w_reallocarray, false},
    {"mi_realloc", w_mi_realloc, false},
    {"mi_reallocn", w_mi_reallocn, false},
    {"mi_rezalloc", w_mi_rezalloc, false},
    {"mi_recalloc", w_mi_recalloc, false},
    {"mi_realloc_aligned", w_mi_realloc_aligned, true},
    {"mi_heap_realloc", w_mi_heap_realloc, false},
};

/* 16 (within a size class), a page, and 1 MiB (above what a page serves). */
static const size_t aligns[] = {16, 0 /* the page size */, (size_t)1 << 20};
#define NALIGNS (sizeof aligns / sizeof aligns[0])

static void try_entry(const entry_t *e) {
  for (size_t a = 0; a < (e->aligned ? NALIGNS : 1); a++) {
    align_now = aligns[a] ? aligns[a] : page_size;
    size_t bad = first_bad_size(e->fn);
    char what[160] = "";
    if (bad != 0) {   /* name the size as an offset below its limit */
      int l = 0;
      while (l < LIMITS - 1 && bad < limit[l] - ((size_t)2 << 20)) l++;
      snprintf(what, sizeof what, " (not for %s - %zu)", limit_name[l], limit[l] - bad);
    }
    if (e->aligned)
      TAP_OK(bad == 0, "%s, alignment %zu: NULL and ENOMEM for every size tried%s", e->name, align_now, what);
    else
      TAP_OK(bad == 0, "%s: NULL and ENOMEM for every size tried%s", e->name, what);
  }
}

int main(void) {
  page_size = (size_t)sysconf(_SC_PAGESIZE);
  limit[0] = SIZE_MAX;
  limit[1] = PTRDIFF_MAX;
  for (size_t i = 0; i < sizeof entries / sizeof entries[0]; i++) try_entry(&entries[i]);

  /* Around mialloc's own cutoff: above it refused at once, below it by the
   * check that the system could back the block (4 EiB: none can).  A few
   * sizes only, as each of the latter reads /proc/meminfo again. */
  bool cutoff_ok = true;
  for (size_t n = (size_t)PTRDIFF_MAX / 2 - page_size; n <= (size_t)PTRDIFF_MAX / 2 + page_size; n += page_size / 2) {
    errno = 0;
    void *p = malloc(n);
    if (p != NULL || errno != ENOMEM) cutoff_ok = false;
    free(p);
    for (size_t a = 0; a < NALIGNS; a++) {
      align_now = aligns[a] ? aligns[a] : page_size;
      errno = 0;
      p = w_mi_malloc_aligned(n);
      if (p != NULL || errno != ENOMEM) cutoff_ok = false;
      free(p);
    }
  }
  TAP_OK(cutoff_ok, "malloc and mi_malloc_aligned around PTRDIFF_MAX / 2: NULL and ENOMEM");

  live = malloc(LIVE_SIZE);
  for (size_t i = 0; i < LIVE_SIZE; i++) live[i] = (unsigned char)(i * 13 + 5);
  reallocating = true;
  for (size_t i = 0; i < sizeof reallocs / sizeof reallocs[0]; i++) try_entry(&reallocs[i]);
  TAP_OK(live_intact, "every failed reallocation left its block's contents as they were");
  /* the block is still live and usable after all of them */
  unsigned char *grown = realloc(live, 2 * LIVE_SIZE);
  bool kept = grown != NULL;
  for (size_t i = 0; kept && i < LIVE_SIZE; i++) kept = grown[i] == (unsigned char)(i * 13 + 5);
  TAP_OK(kept, "and it still reallocates to a size that fits, keeping its contents");
  free(grown);

  /* mi_reallocf frees its block when it fails: the block is gone, and NULL */
  void *p = malloc(64);
  errno = 0;
  void *q = mi_reallocf(p, v_size_max - 8);
  TAP_OK(q == NULL && errno == ENOMEM, "mi_reallocf(p, SIZE_MAX - 8): NULL and ENOMEM (p is freed)");

  /* mi_expand never grows a block past the limits either */
  p = malloc(64);
  TAP_OK(mi_expand(p, v_size_max - 8) == NULL && mi_expand(p, (size_t)PTRDIFF_MAX) == NULL,
         "mi_expand to SIZE_MAX - 8 or PTRDIFF_MAX: NULL");
  free(p);
  return tap_done();
}

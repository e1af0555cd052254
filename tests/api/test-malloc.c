/* test-malloc.c -- the standard allocation entry points and the mi_
 * allocation family, linked against libmialloc.so so that malloc, calloc,
 * realloc and free are mialloc's.
 *
 * Sizes that must not be known to the compiler (impossible sizes, zero)
 * go through volatile variables: otherwise gcc may fold the call or warn
 * about it, and the test would not exercise the library.
 */
#define _GNU_SOURCE
#include <mialloc.h>
#include "config.h"
#include "../tap.h"

#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

/* Opaque to the optimiser: keeps malloc/free pairs from being elided. */
static void *volatile sink;
static void escape(void *p) { sink = p; }
/* The same pointer, but gcc cannot see that it is: lets a test use a block
 * after a realloc that failed (valid C) without -Wuse-after-free noise. */
static void *launder(void *p) {
  sink = p;
  return sink;
}

/* ---- small deterministic PRNG ---------------------------------------- */
static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
  uint64_t x = rng_state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  rng_state = x;
  return x;
}

/* ---- byte patterns ---------------------------------------------------- */
static inline uint8_t pat(size_t i, unsigned seed) {
  return (uint8_t)(seed * 37u + (unsigned)i * 131u + (unsigned)(i >> 8) * 7u + 1u);
}

static void fill(void *p, size_t n, unsigned seed) {
  uint8_t *b = p;
  for (size_t i = 0; i < n; i++) b[i] = pat(i, seed);
}

/* index of the first byte that differs from the pattern, or SIZE_MAX */
static size_t verify(const void *p, size_t n, unsigned seed) {
  const uint8_t *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed)) return i;
  return SIZE_MAX;
}

/* index of the first byte in [from, to) that is not c, or SIZE_MAX */
static size_t first_not(const void *p, size_t from, size_t to, uint8_t c) {
  const uint8_t *b = p;
  for (size_t i = from; i < to; i++)
    if (b[i] != c) return i;
  return SIZE_MAX;
}

static int cmp_uptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : (x > y ? 1 : 0);
}

static size_t count_distinct(uintptr_t *v, size_t n) {
  if (n == 0) return 0;
  qsort(v, n, sizeof v[0], cmp_uptr);
  size_t d = 1;
  for (size_t i = 1; i < n; i++)
    if (v[i] != v[i - 1]) d++;
  return d;
}

static bool is_aligned(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* Impossible sizes, hidden from the compiler. */
static volatile size_t v_size_max = SIZE_MAX;
static volatile size_t v_ptrdiff_max = PTRDIFF_MAX;
static volatile size_t v_half = SIZE_MAX / 2;
static volatile size_t v_zero = 0;

static int a_static_variable = 42;

/* glibc no longer declares cfree; mialloc exports it. */
extern void cfree(void *p);

/* ======================================================================= */

static void test_identity(void) {
  TAP_OK(mi_version() == MI_MALLOC_VERSION, "mi_version() == MI_MALLOC_VERSION (%d, got %d)",
         MI_MALLOC_VERSION, mi_version());
  /* the header's own version macros follow configure's version */
  char own[32];
  snprintf(own, sizeof own, "%d.%d.%d", MIALLOC_VERSION_MAJOR, MIALLOC_VERSION_MINOR, MIALLOC_VERSION_PATCH);
  TAP_OK(strcmp(own, PACKAGE_VERSION) == 0, "MIALLOC_VERSION_* say %s, the package is %s", own, PACKAGE_VERSION);
  TAP_OK(mi_is_redirected(), "mi_is_redirected(): malloc of this program is mialloc's");

  void *p = malloc(100);
  int stack_var = 1;
  escape(&stack_var);
  TAP_OK(p != NULL && mi_is_in_heap_region(p), "malloc(100) block is in mialloc's heap region");
  TAP_OK(p != NULL && mi_check_owned(p), "mi_check_owned(malloc(100)) is true");
  TAP_OK(!mi_is_in_heap_region(&stack_var), "mi_is_in_heap_region(stack address) is false");
  TAP_OK(!mi_check_owned(&stack_var), "mi_check_owned(stack address) is false");
  TAP_OK(!mi_is_in_heap_region(&a_static_variable), "mi_is_in_heap_region(static variable) is false");
  TAP_OK(!mi_check_owned(&a_static_variable), "mi_check_owned(static variable) is false");
  TAP_OK(!mi_is_in_heap_region(NULL), "mi_is_in_heap_region(NULL) is false");
  free(p);
}

static void test_basic_std(void) {
  /* malloc */
  char *p = malloc(100);
  bool ok = p != NULL && malloc_usable_size(p) >= 100;
  if (p) {
    fill(p, 100, 1);
    ok = ok && verify(p, 100, 1) == SIZE_MAX;
  }
  TAP_OK(ok, "malloc(100): non-NULL, usable >= 100, content kept");
  free(p);

  /* free(NULL) */
  errno = EDOM;
  free(NULL);
  TAP_OK(errno == EDOM, "free(NULL) does nothing (errno untouched)");
  mi_free(NULL);
  mi_cfree(NULL);
  mi_free_size(NULL, 0);
  TAP_OK(errno == EDOM, "mi_free/mi_cfree/mi_free_size(NULL) do nothing (errno untouched)");

  /* malloc(0) */
  void *z1 = malloc(v_zero), *z2 = malloc(v_zero);
  TAP_OK(z1 != NULL && z2 != NULL, "malloc(0) returns non-NULL (%p, %p)", z1, z2);
  TAP_OK(z1 != z2, "malloc(0) twice gives two distinct pointers");
  TAP_OK(z1 != NULL && mi_is_in_heap_region(z1), "malloc(0) block belongs to mialloc");
  free(z1);
  free(z2);
  void *mz = mi_malloc(v_zero);
  TAP_OK(mz != NULL, "mi_malloc(0) returns non-NULL");
  mi_free(mz);

  /* impossible sizes */
  errno = 0;
  void *h = malloc(v_size_max);
  TAP_OK(h == NULL && errno == ENOMEM, "malloc(SIZE_MAX) == NULL, errno ENOMEM (got %p, errno %d)", h, errno);
  errno = 0;
  h = malloc(v_ptrdiff_max);
  TAP_OK(h == NULL && errno == ENOMEM, "malloc(PTRDIFF_MAX) == NULL, errno ENOMEM (got %p, errno %d)", h, errno);
  errno = 0;
  h = mi_malloc(v_size_max);
  TAP_OK(h == NULL && errno == ENOMEM, "mi_malloc(SIZE_MAX) == NULL, errno ENOMEM (errno %d)", errno);
  errno = 0;
  h = mi_zalloc(v_ptrdiff_max);
  TAP_OK(h == NULL && errno == ENOMEM, "mi_zalloc(PTRDIFF_MAX) == NULL, errno ENOMEM (errno %d)", errno);
  errno = 0;
  h = calloc(v_half, 3);
  TAP_OK(h == NULL && errno == ENOMEM, "calloc(SIZE_MAX/2, 3) overflow == NULL, errno ENOMEM (errno %d)", errno);
  errno = 0;
  h = mi_calloc(3, v_half);
  TAP_OK(h == NULL && errno == ENOMEM, "mi_calloc(3, SIZE_MAX/2) overflow == NULL, errno ENOMEM (errno %d)", errno);
  errno = 0;
  h = calloc(1, v_size_max);
  TAP_OK(h == NULL && errno == ENOMEM, "calloc(1, SIZE_MAX) == NULL, errno ENOMEM (errno %d)", errno);

  /* reallocarray overflow leaves p alone */
  char *r = malloc(64);
  if (r) fill(r, 64, 3);
  size_t us_before = r ? malloc_usable_size(r) : 0;
  char *r_old = launder(r);
  errno = 0;
  void *r2 = reallocarray(r, v_half, 3);
  r = r_old;
  TAP_OK(r2 == NULL && errno == ENOMEM, "reallocarray(p, SIZE_MAX/2, 3) == NULL, errno ENOMEM (errno %d)", errno);
  TAP_OK(r != NULL && verify(r, 64, 3) == SIZE_MAX && malloc_usable_size(r) == us_before &&
             mi_is_in_heap_region(r),
         "reallocarray overflow: p still valid and unchanged");
  /* p must still be usable by realloc afterwards */
  char *r3 = r ? realloc(r, 200) : NULL;
  TAP_OK(r3 != NULL && verify(r3, 64, 3) == SIZE_MAX, "p usable by realloc after failed reallocarray");
  free(r3);

  /* realloc(p, 0): glibc frees and returns NULL */
  void *q = malloc(50);
  escape(q);
  void *q0 = realloc(q, v_zero);
  TAP_OK(q0 == NULL, "realloc(p, 0) frees p and returns NULL (got %p)", q0);

  /* realloc(NULL, n) == malloc(n) */
  char *rn = realloc(NULL, 300);
  ok = rn != NULL && mi_is_in_heap_region(rn) && malloc_usable_size(rn) >= 300;
  if (rn) {
    fill(rn, 300, 4);
    ok = ok && verify(rn, 300, 4) == SIZE_MAX;
  }
  TAP_OK(ok, "realloc(NULL, 300) acts as malloc(300)");
  free(rn);

  /* realloc failure leaves the block intact */
  char *rf = malloc(128);
  if (rf) fill(rf, 128, 5);
  char *rf_old = launder(rf);
  errno = 0;
  void *rf2 = realloc(rf, v_size_max);
  rf = rf_old;
  TAP_OK(rf2 == NULL && errno == ENOMEM, "realloc(p, SIZE_MAX) == NULL, errno ENOMEM (errno %d)", errno);
  TAP_OK(rf != NULL && verify(rf, 128, 5) == SIZE_MAX, "realloc(p, SIZE_MAX) failure leaves p intact");
  free(rf);
}

/* Growth from 1 byte to 8 MiB and back, content preserved at each step. */
static void test_realloc_content(void) {
  size_t sizes[128];
  size_t n = 0;
  for (size_t s = 1; s <= 8 * MiB && n < 127; s = s * 3 / 2 + 7) sizes[n++] = s;
  sizes[n++] = 8 * MiB;

  char *p = NULL;
  size_t cur = 0;
  bool ok = true;
  for (size_t i = 0; i < n && ok; i++) {
    char *q = realloc(p, sizes[i]);
    if (q == NULL) {
      tap_diag("realloc grow to %zu returned NULL", sizes[i]);
      ok = false;
      break;
    }
    p = q;
    size_t bad = verify(p, cur, 7);
    if (bad != SIZE_MAX) {
      tap_diag("realloc grow %zu -> %zu: byte %zu lost", cur, sizes[i], bad);
      ok = false;
    }
    if (malloc_usable_size(p) < sizes[i]) {
      tap_diag("realloc grow to %zu: usable %zu", sizes[i], malloc_usable_size(p));
      ok = false;
    }
    fill(p, sizes[i], 7);
    cur = sizes[i];
  }
  TAP_OK(ok, "realloc growth 1 B -> 8 MiB in %zu steps preserves content", n);

  bool ok2 = ok;
  for (size_t i = n; i-- > 0 && ok2;) {
    char *q = realloc(p, sizes[i]);
    if (q == NULL) {
      tap_diag("realloc shrink to %zu returned NULL", sizes[i]);
      ok2 = false;
      break;
    }
    p = q;
    size_t bad = verify(p, sizes[i], 7);
    if (bad != SIZE_MAX) {
      tap_diag("realloc shrink to %zu: byte %zu lost", sizes[i], bad);
      ok2 = false;
    }
    if (malloc_usable_size(p) < sizes[i]) ok2 = false;
  }
  TAP_OK(ok2, "realloc shrink 8 MiB -> 1 B preserves content");
  free(p);

  /* mi_realloc, with other blocks in between so it must move */
  ok = true;
  char *m = mi_malloc(10);
  if (m == NULL) ok = false;
  else fill(m, 10, 9);
  size_t msz = 10;
  void *others[32];
  for (int i = 0; i < 32; i++) others[i] = mi_malloc(10 + (size_t)i * 40);
  for (size_t s = 20; s <= 2 * MiB && ok; s = s * 2 + 3) {
    char *q = mi_realloc(m, s);
    if (q == NULL || verify(q, msz, 9) != SIZE_MAX || mi_usable_size(q) < s) {
      tap_diag("mi_realloc %zu -> %zu failed or lost content", msz, s);
      ok = false;
      if (q != NULL) m = q;
      break;
    }
    m = q;
    fill(m, s, 9);
    msz = s;
  }
  TAP_OK(ok, "mi_realloc growth preserves content");
  char *ms = m ? mi_realloc(m, 5) : NULL;
  TAP_OK(ms != NULL && verify(ms, 5, 9) == SIZE_MAX, "mi_realloc shrink to 5 preserves content");
  mi_free(ms);
  for (int i = 0; i < 32; i++) mi_free(others[i]);
}

/* realloc keeps a block whose class the new size fits and fills at least
 * half of (growing a string a few bytes at a time moves it only when it
 * outgrows its class), and moves one shrunk below half, so that its
 * memory serves other sizes.  Tools builds move every block: the tool
 * must see each size.  Blocks of 40 B, 20 KiB (medium pages) and 200 KiB
 * (large pages), through realloc and mi_realloc. */
static void test_realloc_in_place(void) {
  static const size_t sizes[] = {40, 20 * KiB, 200 * KiB};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    for (int api = 0; api < 2; api++) {
      void *(*re)(void *, size_t) = api == 0 ? realloc : mi_realloc;
      char *p = malloc(sizes[k]);
      if (p == NULL) {
        TAP_OK(false, "malloc(%zu)", sizes[k]);
        continue;
      }
      size_t usable = malloc_usable_size(p);
      fill(p, sizes[k], 11);
      bool kept = true;
      char *q = p;
      /* up to the usable size, then down to half of it */
      for (size_t n = sizes[k]; n <= usable && kept; n += 1 + n / 64) kept = (q = re(q, n)) == p;
      if (kept) kept = (q = re(q, usable)) == p && (q = re(q, usable / 2 + 1)) == p;
      bool content = q != NULL && verify(q, usable / 2 + 1 < sizes[k] ? usable / 2 + 1 : sizes[k], 11) == SIZE_MAX;
#if MIALLOC_VALGRIND || MIALLOC_ASAN
      bool expected = !kept;
      const char *how = "moves it (a tools build)";
#else
      bool expected = kept;
      const char *how = "keeps it in place";
#endif
      TAP_OK(expected && content, "%s of a %zu-byte block (usable %zu) to sizes from half its usable size up to it "
             "%s, with its content", api == 0 ? "realloc" : "mi_realloc", sizes[k], usable, how);
      size_t small = usable / 4;
      char *r = q != NULL ? re(q, small) : NULL;
      bool moved = r != NULL && r != p && verify(r, small, 11) == SIZE_MAX && malloc_usable_size(r) < usable;
      TAP_OK(moved, "%s to a quarter of the usable size moves it to a smaller block, with its content",
             api == 0 ? "realloc" : "mi_realloc");
      free(r != NULL ? r : q);
    }
  }
}

/* calloc zeroes even reused dirty memory. */
static void test_calloc_zero(void) {
  static const size_t sizes[] = {16, 20 * KiB, 300 * KiB, 5 * MiB};
  static const char *const names[] = {"small 16 B", "medium 20 KiB", "large 300 KiB", "huge 5 MiB"};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t sz = sizes[k];
    int rounds = sz >= MiB ? 20 : 200;
    bool ok = true;
    for (int r = 0; r < rounds && ok; r++) {
      /* a few dirty blocks freed in a row so calloc can land on any */
      void *d[4];
      for (int i = 0; i < 4; i++) {
        d[i] = malloc(sz);
        if (d[i]) memset(d[i], 0xAB, malloc_usable_size(d[i]));
      }
      for (int i = 0; i < 4; i++) free(d[i]);
      unsigned char *c = calloc(1, sz);
      if (c == NULL) {
        tap_diag("calloc(1, %zu) returned NULL", sz);
        ok = false;
        break;
      }
      size_t bad = first_not(c, 0, sz, 0);
      if (bad != SIZE_MAX) {
        tap_diag("calloc(1, %zu) round %d: byte %zu is 0x%02x", sz, r, bad, c[bad]);
        ok = false;
      }
      free(c);
    }
    TAP_OK(ok, "calloc returns zeroed memory when reusing dirty blocks (%s)", names[k]);
  }

  /* the mi_ zeroing family on dirty memory */
  static const size_t zs[] = {8, 16, 100, 1000, 20 * KiB, 300 * KiB, 5 * MiB};
  bool okc = true, okz = true, okzs = true;
  for (size_t k = 0; k < sizeof zs / sizeof zs[0]; k++) {
    size_t sz = zs[k];
    for (int r = 0; r < 30; r++) {
      void *d[3];
      for (int i = 0; i < 3; i++) {
        d[i] = mi_malloc(sz);
        if (d[i]) memset(d[i], 0xCD, mi_usable_size(d[i]));
      }
      for (int i = 0; i < 3; i++) mi_free(d[i]);
      unsigned char *c = mi_calloc(sz / 4 + 1, 4);
      if (c == NULL || first_not(c, 0, (sz / 4 + 1) * 4, 0) != SIZE_MAX) {
        if (okc) tap_diag("mi_calloc(%zu, 4) not zeroed", sz / 4 + 1);
        okc = false;
      }
      mi_free(c);
      for (int i = 0; i < 3; i++) {
        d[i] = mi_malloc(sz);
        if (d[i]) memset(d[i], 0xCD, mi_usable_size(d[i]));
      }
      for (int i = 0; i < 3; i++) mi_free(d[i]);
      unsigned char *z = mi_zalloc(sz);
      if (z == NULL || first_not(z, 0, sz, 0) != SIZE_MAX) {
        if (okz) tap_diag("mi_zalloc(%zu) not zeroed", sz);
        okz = false;
      }
      mi_free(z);
      if (sz <= 1024) {
        for (int i = 0; i < 3; i++) {
          d[i] = mi_malloc_small(sz);
          if (d[i]) memset(d[i], 0xCD, mi_usable_size(d[i]));
        }
        for (int i = 0; i < 3; i++) mi_free(d[i]);
        unsigned char *zs2 = mi_zalloc_small(sz);
        if (zs2 == NULL || first_not(zs2, 0, sz, 0) != SIZE_MAX) {
          if (okzs) tap_diag("mi_zalloc_small(%zu) not zeroed", sz);
          okzs = false;
        }
        mi_free(zs2);
      }
    }
  }
  TAP_OK(okc, "mi_calloc zeroes reused dirty memory (8 B .. 5 MiB)");
  TAP_OK(okz, "mi_zalloc zeroes reused dirty memory (8 B .. 5 MiB)");
  TAP_OK(okzs, "mi_zalloc_small zeroes reused dirty memory (8 B .. 1 KiB)");
}

/* Usable size is really usable: fill every usable byte of many neighbouring
 * blocks, then verify nobody's pattern was overwritten. */
/* Leave blocks of n bytes, written all over, for the next allocation. */
static void dirty_heap(size_t n) {
  void *d[3];
  for (int i = 0; i < 3; i++) {
    d[i] = mi_malloc(n);
    if (d[i]) memset(d[i], 0xCD, mi_usable_size(d[i]));
  }
  for (int i = 0; i < 3; i++) mi_free(d[i]);
}

/* Zeroing allocations are zero up to the usable size, and mi_rezalloc and
 * mi_recalloc zero the bytes past the old size, on a heap whose free
 * memory is dirty.  Huge blocks (above 512 KiB) are the case to watch:
 * their span may run most of a segment past the size asked for, holding
 * what a former block left there. */
static void test_rezalloc_dirty(void) {
  static const size_t zs[] = {100, 3000, 40 * KiB, 600 * KiB, 3 * MiB, 9 * MiB};
  bool ok_alloc = true, ok_grow = true, ok_shrink = true, ok_keep = true;
  for (size_t k = 0; k < sizeof zs / sizeof zs[0]; k++) {
    size_t sz = zs[k];
    for (int kind = 0; kind < 4; kind++) {
      static const char *const names[] = {"mi_zalloc", "mi_calloc", "mi_zalloc_aligned(4096)",
                                          "mi_zalloc_aligned(1 MiB)"};
      size_t align = kind == 2 ? 4096 : MiB;
      dirty_heap(3 * sz);
      unsigned char *z = kind == 0   ? mi_zalloc(sz)
                         : kind == 1 ? mi_calloc(sz, 1)
                                     : mi_zalloc_aligned(sz, align);
      if (z == NULL) { ok_grow = false; continue; }
      size_t us = mi_usable_size(z);
      size_t bad = first_not(z, 0, us, 0);
      if (bad != SIZE_MAX) {
        if (ok_alloc) tap_diag("%s(%zu): byte %zu of usable %zu not zero", names[kind], sz, bad, us);
        ok_alloc = false;
      }
      fill(z, sz, 7);
      dirty_heap(3 * sz);
      /* the grown part sits in the block's slack, in place, or is copied */
      unsigned char *g = kind < 2 ? mi_rezalloc(z, sz + sz / 3) : mi_rezalloc_aligned(z, sz + sz / 3, align);
      if (g != NULL) g = kind < 2 ? mi_rezalloc(g, 3 * sz) : mi_rezalloc_aligned(g, 3 * sz, align);
      if (g == NULL) { ok_grow = false; continue; }
      if (verify(g, sz, 7) != SIZE_MAX) ok_keep = false;
      bad = first_not(g, sz, 3 * sz, 0);
      if (bad != SIZE_MAX) {
        if (ok_grow) tap_diag("%s(%zu), then rezalloc to %zu and %zu: byte %zu not zero", names[kind], sz,
                              sz + sz / 3, 3 * sz, bad);
        ok_grow = false;
      }
      /* written all over, shrunk to about a third, grown again */
      memset(g, 0x77, 3 * sz);
      unsigned char *s = mi_recalloc(g, sz + 1, 1);
      if (s == NULL) { mi_free(g); ok_shrink = false; continue; }
      unsigned char *t = mi_recalloc(s, 2 * sz, 1);
      if (t == NULL) { mi_free(s); ok_shrink = false; continue; }
      if (first_not(t, 0, sz + 1, 0x77) != SIZE_MAX) ok_keep = false;
      bad = first_not(t, sz + 1, 2 * sz, 0);
      if (bad != SIZE_MAX) {
        if (ok_shrink) tap_diag("recalloc %zu -> %zu -> %zu: byte %zu not zero", 3 * sz, sz + 1, 2 * sz, bad);
        ok_shrink = false;
      }
      mi_free(t);
    }
  }
  /* a huge block from plain malloc: the bytes past the size asked are zero too */
  dirty_heap(6 * MiB);
  unsigned char *m = mi_malloc(2 * MiB);
  bool ok_plain = m != NULL;
  if (m != NULL) {
    fill(m, 2 * MiB, 9);
    unsigned char *r = mi_rezalloc(m, 5 * MiB);
    ok_plain = r != NULL && verify(r, 2 * MiB, 9) == SIZE_MAX && first_not(r, 2 * MiB, 5 * MiB, 0) == SIZE_MAX;
    mi_free(r != NULL ? r : m);
  }
  TAP_OK(ok_alloc, "zeroing allocations are zero up to the usable size (100 B .. 9 MiB, dirty heap)");
  TAP_OK(ok_grow, "mi_rezalloc of a zeroed block: the grown part is zero (100 B .. 9 MiB, dirty heap)");
  TAP_OK(ok_shrink, "mi_recalloc shrinking, then growing: the bytes past the smaller size are zero");
  TAP_OK(ok_keep, "mi_rezalloc/mi_recalloc keep the bytes below the new size");
  TAP_OK(ok_plain, "mi_rezalloc of a huge block from mi_malloc zeroes past the size asked");
}

static void test_usable_size_neighbours(void) {
  enum { PER = 24 };
  static const size_t sizes[] = {1,    3,    8,    13,   16,    24,    31,    48,     64,     100,
                                 127,  200,  500,  1000, 1024,  1500,  4000,  8192,   10000,  33000,
                                 65536, 100000, 200000, 520000, 600000, 1500000, 3 * MiB + 5};
  bool ok_us = true, ok_nb = true;
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    size_t sz = sizes[k];
    int per = sz > 200000 ? 4 : PER;
    unsigned char *b[PER];
    size_t us[PER];
    for (int i = 0; i < per; i++) {
      b[i] = malloc(sz);
      us[i] = b[i] ? malloc_usable_size(b[i]) : 0;
      if (b[i] == NULL || us[i] < sz) {
        if (ok_us) tap_diag("malloc(%zu): %p usable %zu", sz, (void *)b[i], us[i]);
        ok_us = false;
      }
      if (b[i]) fill(b[i], us[i], (unsigned)(k * 100 + (size_t)i));
    }
    for (int i = 0; i < per; i++) {
      if (!b[i]) continue;
      size_t bad = verify(b[i], us[i], (unsigned)(k * 100 + (size_t)i));
      if (bad != SIZE_MAX) {
        if (ok_nb) tap_diag("size %zu block %d (%p, usable %zu): byte %zu overwritten", sz, i, (void *)b[i], us[i], bad);
        ok_nb = false;
      }
    }
    for (int i = 0; i < per; i++) free(b[i]);
  }
  TAP_OK(ok_us, "malloc_usable_size(p) >= requested for sizes 1 B .. 3 MiB");
  TAP_OK(ok_nb, "writing all usable bytes does not corrupt neighbouring blocks");

  /* mixed sizes interleaved */
  enum { MIX = 3000 };
  unsigned char **m = malloc(MIX * sizeof *m);
  size_t *mu = malloc(MIX * sizeof *mu);
  bool ok = m != NULL && mu != NULL;
  if (ok) {
    for (int i = 0; i < MIX; i++) {
      size_t sz = 1 + rnd() % ((i % 10 == 0) ? 40000 : 600);
      m[i] = malloc(sz);
      mu[i] = m[i] ? malloc_usable_size(m[i]) : 0;
      if (m[i] == NULL || mu[i] < sz) ok = false;
      if (m[i]) fill(m[i], mu[i], (unsigned)i);
    }
    for (int i = 0; i < MIX; i += 2) {
      free(m[i]);
      m[i] = NULL;
    }
    for (int i = 0; i < MIX; i += 2) {
      size_t sz = 1 + rnd() % 900;
      m[i] = malloc(sz);
      mu[i] = m[i] ? malloc_usable_size(m[i]) : 0;
      if (m[i] == NULL || mu[i] < sz) ok = false;
      if (m[i]) fill(m[i], mu[i], (unsigned)i);
    }
    for (int i = 0; i < MIX; i++) {
      if (m[i] && verify(m[i], mu[i], (unsigned)i) != SIZE_MAX) {
        if (ok) tap_diag("mixed block %d (%p, usable %zu) corrupted", i, (void *)m[i], mu[i]);
        ok = false;
      }
    }
    for (int i = 0; i < MIX; i++) free(m[i]);
  }
  TAP_OK(ok, "mixed random sizes with frees in between: usable bytes independent");
  free(m);
  free(mu);
}

static void test_size_sweep(void) {
  bool ok = true;
  for (size_t sz = 1; sz <= 4096; sz++) {
    unsigned char *p = malloc(sz);
    if (p == NULL || malloc_usable_size(p) < sz) {
      if (ok) tap_diag("malloc(%zu) -> %p", sz, (void *)p);
      ok = false;
      free(p);
      continue;
    }
    fill(p, sz, (unsigned)sz);
    if (verify(p, sz, (unsigned)sz) != SIZE_MAX) {
      if (ok) tap_diag("malloc(%zu) content not kept", sz);
      ok = false;
    }
    free(p);
  }
  TAP_OK(ok, "every size 1..4096: allocate, fill, verify, free");

  ok = true;
  size_t count = 0;
  for (size_t sz = 4097; sz <= 64 * MiB; sz = sz + sz / 5 + 1) {
    for (int d = -1; d <= 1; d++) {
      size_t s = sz + (size_t)(long)d * 3;
      unsigned char *p = malloc(s);
      count++;
      if (p == NULL || malloc_usable_size(p) < s) {
        if (ok) tap_diag("malloc(%zu) -> %p", s, (void *)p);
        ok = false;
        free(p);
        continue;
      }
      /* small enough: the whole block; otherwise the first and last
       * 8 KiB fully and one byte in every 4 KiB in between */
      bool good;
      if (s <= 64 * KiB) {
        fill(p, s, (unsigned)s);
        good = verify(p, s, (unsigned)s) == SIZE_MAX;
      } else {
        size_t head = 8192;
        fill(p, head, (unsigned)s);
        fill(p + s - head, head, (unsigned)s + 1);
        for (size_t i = head; i < s - head; i += 4096) p[i] = (unsigned char)(i >> 12);
        good = verify(p, head, (unsigned)s) == SIZE_MAX && verify(p + s - head, head, (unsigned)s + 1) == SIZE_MAX;
        for (size_t i = head; i < s - head && good; i += 4096)
          if (p[i] != (unsigned char)(i >> 12)) good = false;
      }
      if (!good) {
        if (ok) tap_diag("malloc(%zu) content not kept", s);
        ok = false;
      }
      free(p);
    }
  }
  /* exactly 64 MiB */
  unsigned char *big = malloc(64 * MiB);
  if (big == NULL || malloc_usable_size(big) < 64 * MiB) ok = false;
  else {
    memset(big, 0x5A, 64 * MiB);
    if (first_not(big, 0, 64 * MiB, 0x5A) != SIZE_MAX) ok = false;
  }
  free(big);
  TAP_OK(ok, "sweep of %zu larger sizes 4 KiB .. 64 MiB: allocate, fill, verify, free", count + 1);
}

/* Alignment: 16 for sizes >= 16, 8 for smaller (16 B is max_align_t). */
static void test_alignment(void) {
  enum { KEEP = 5 };
  bool ok_small = true, ok_big = true;
  size_t bad_small = 0, bad_big = 0;
  size_t bad_sizes[64], nbad_sizes = 0, last_bad_size = 0;
  void *keep[KEEP];
  for (size_t sz = 1; sz <= 2048 + 15; sz++) {
    for (int i = 0; i < KEEP; i++) {
      keep[i] = malloc(sz);
      if (keep[i] == NULL) continue;
      size_t need = sz >= 16 ? 16 : 8;
      if (!is_aligned(keep[i], need)) {
        if (sz >= 16) {
          if (ok_big) tap_diag("malloc(%zu) = %p is not 16-byte aligned", sz, keep[i]);
          ok_big = false;
          if (last_bad_size != sz && nbad_sizes < 64) bad_sizes[nbad_sizes++] = sz;
          last_bad_size = sz;
          bad_big++;
        } else {
          if (ok_small) tap_diag("malloc(%zu) = %p is not 8-byte aligned", sz, keep[i]);
          ok_small = false;
          bad_small++;
        }
      }
    }
    for (int i = 0; i < KEEP; i++) free(keep[i]);
  }
  for (size_t sz = 2048; sz <= 16 * MiB; sz = sz * 5 / 4 + 8) {
    void *p = malloc(sz), *q = calloc(1, sz), *r = realloc(NULL, sz);
    if ((p && !is_aligned(p, 16)) || (q && !is_aligned(q, 16)) || (r && !is_aligned(r, 16))) {
      if (ok_big) tap_diag("size %zu: %p %p %p not all 16-byte aligned", sz, p, q, r);
      ok_big = false;
      bad_big++;
    }
    free(p);
    free(q);
    free(r);
  }
  if (!ok_big) {
    char list[64 * 8] = "";
    size_t len = 0;
    for (size_t i = 0; i < nbad_sizes && len + 8 < sizeof list; i++)
      len += (size_t)snprintf(list + len, sizeof list - len, " %zu", bad_sizes[i]);
    tap_diag("%zu misaligned results for sizes >= 16; sizes:%s", bad_big, list);
  }
  TAP_OK(ok_small, "malloc(1..15) results are 8-byte aligned");
  TAP_OK(ok_big, "malloc/calloc/realloc(n >= 16) results are 16-byte aligned");

  bool ok_mi = true;
  for (size_t sz = 16; sz <= 4096; sz += 8) {
    void *a = mi_malloc(sz), *b = mi_zalloc(sz), *c = mi_calloc(1, sz);
    if ((a && !is_aligned(a, 16)) || (b && !is_aligned(b, 16)) || (c && !is_aligned(c, 16))) {
      if (ok_mi) tap_diag("mi_ size %zu: %p %p %p not all 16-byte aligned", sz, a, b, c);
      ok_mi = false;
    }
    mi_free(a);
    mi_free(b);
    mi_free(c);
  }
  TAP_OK(ok_mi, "mi_malloc/mi_zalloc/mi_calloc(n >= 16) are 16-byte aligned");
}

/* ~20000 random-size live blocks: their usable intervals are disjoint. */
static void test_no_overlap(void) {
  enum { N = 20000 };
  struct blk { uintptr_t start; size_t usable; unsigned seed; };
  struct blk *v = mi_malloc(N * sizeof *v); /* bookkeeping also through mialloc */
  void **ptr = calloc(N, sizeof *ptr);
  bool ok = v != NULL && ptr != NULL;
  size_t n = 0;
  for (int i = 0; ok && i < N; i++) {
    uint64_t r = rnd();
    size_t sz;
    switch (r % 100) {
    case 0: sz = 1 + (r >> 8) % (2 * MiB); break;              /* large/huge */
    case 1: case 2: case 3: sz = 1 + (r >> 8) % (128 * KiB); break; /* medium */
    default: sz = 1 + (r >> 8) % 1024; break;                 /* small */
    }
    ptr[i] = (r & 1) ? malloc(sz) : mi_malloc(sz);
    if (ptr[i] == NULL) { ok = false; break; }
    v[n].start = (uintptr_t)ptr[i];
    v[n].usable = malloc_usable_size(ptr[i]);
    v[n].seed = (unsigned)i;
    if (v[n].usable < sz) ok = false;
    /* stamp head and tail of the usable area (all of it when short) */
    size_t stamp = v[n].usable < 32 ? v[n].usable : 16;
    fill(ptr[i], stamp, (unsigned)i);
    if (v[n].usable >= 32) fill((char *)ptr[i] + v[n].usable - stamp, stamp, (unsigned)i + 7);
    n++;
    /* free some along the way so blocks get reused */
    if (i % 7 == 3 && i > 10) {
      int j = (int)(rnd() % (uint64_t)i);
      if (ptr[j] != NULL) {
        free(ptr[j]);
        ptr[j] = NULL;
        /* mark as freed in v: find by index (seed == j) */
        for (size_t k = n; k-- > 0;)
          if (v[k].seed == (unsigned)j) { v[k] = v[--n]; break; }
      }
    }
  }
  if (ok) {
    qsort(v, n, sizeof v[0], cmp_uptr); /* start is the first member */
    size_t overlaps = 0;
    for (size_t i = 1; i < n; i++) {
      if (v[i - 1].start + v[i - 1].usable > v[i].start) {
        if (overlaps == 0)
          tap_diag("overlap: [%#lx, +%zu) and [%#lx, +%zu)", (unsigned long)v[i - 1].start, v[i - 1].usable,
                   (unsigned long)v[i].start, v[i].usable);
        overlaps++;
      }
    }
    TAP_OK(overlaps == 0, "%zu live random-size blocks: usable intervals disjoint (%zu overlaps)", n, overlaps);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
      const char *p = (const char *)v[i].start;
      size_t stamp = v[i].usable < 32 ? v[i].usable : 16;
      if (verify(p, stamp, v[i].seed) != SIZE_MAX ||
          (v[i].usable >= 32 && verify(p + v[i].usable - stamp, stamp, v[i].seed + 7) != SIZE_MAX)) {
        if (bad == 0) tap_diag("block %p (usable %zu, #%u) stamp damaged", (void *)p, v[i].usable, v[i].seed);
        bad++;
      }
    }
    TAP_OK(bad == 0, "head/tail stamps of all live blocks intact (%zu damaged)", bad);
  } else {
    TAP_OK(0, "allocating %d random-size blocks", N);
    TAP_OK(0, "head/tail stamps (not run)");
  }
  if (ptr)
    for (int i = 0; i < N; i++) free(ptr[i]);
  free(ptr);
  mi_free(v);
}

static void test_good_size(void) {
  bool ok_ge = true, ok_eq = true;
  for (size_t n = 1; n <= 2 * MiB; n += (n < 4096 ? 1 : n / 3)) {
    size_t g = mi_good_size(n);
    if (g < n) {
      if (ok_ge) tap_diag("mi_good_size(%zu) = %zu", n, g);
      ok_ge = false;
    }
  }
  for (size_t n = 1; n <= 8192; n++) {
    void *p = mi_malloc(n);
    size_t u = mi_usable_size(p);
    if (p == NULL || mi_good_size(n) != u) {
      if (ok_eq) tap_diag("mi_good_size(%zu) = %zu but mi_usable_size(mi_malloc(%zu)) = %zu", n, mi_good_size(n), n, u);
      ok_eq = false;
    }
    mi_free(p);
  }
  /* huge blocks: usable up to the next OS page, not to the end of a span */
  bool ok_huge = true;
  long ps = sysconf(_SC_PAGESIZE);
  for (size_t n = 512 * KiB + 1; n <= 20 * MiB; n += n / 3 + 1) {
    void *p = mi_malloc(n);
    size_t u = mi_usable_size(p);
    if (p == NULL || mi_good_size(n) != u || u < n || u - n >= (size_t)ps) {
      if (ok_huge) tap_diag("huge: mi_good_size(%zu) = %zu, mi_usable_size(mi_malloc(%zu)) = %zu", n, mi_good_size(n), n, u);
      ok_huge = false;
    }
    mi_free(p);
  }
  TAP_OK(ok_ge, "mi_good_size(n) >= n for 1 .. 2 MiB");
  TAP_OK(ok_eq, "mi_good_size(n) == mi_usable_size(mi_malloc(n)) for n in 1 .. 8 KiB");
  TAP_OK(ok_huge, "huge blocks: mi_good_size(n) == mi_usable_size(mi_malloc(n)), less than an OS page over n");
  TAP_OK(mi_usable_size(NULL) == 0, "mi_usable_size(NULL) == 0");
}

static void test_mi_family(void) {
  /* mi_malloc / mi_free */
  char *p = mi_malloc(333);
  bool ok = p != NULL && mi_usable_size(p) >= 333 && mi_is_in_heap_region(p);
  if (p) { fill(p, 333, 11); ok = ok && verify(p, 333, 11) == SIZE_MAX; }
  TAP_OK(ok, "mi_malloc(333) usable, in heap, content kept");
  mi_free(p);

  /* mi_malloc_small */
  ok = true;
  for (size_t s = 1; s <= 1024; s += 7) {
    char *q = mi_malloc_small(s);
    if (q == NULL || mi_usable_size(q) < s) { ok = false; mi_free(q); continue; }
    fill(q, s, 12);
    if (verify(q, s, 12) != SIZE_MAX) ok = false;
    mi_free(q);
  }
  TAP_OK(ok, "mi_malloc_small(1..1024) works");

  /* mi_mallocn */
  int *arr = mi_mallocn(100, sizeof(int));
  ok = arr != NULL && mi_usable_size(arr) >= 100 * sizeof(int);
  if (arr) for (int i = 0; i < 100; i++) arr[i] = i * i;
  if (arr) for (int i = 0; i < 100; i++) if (arr[i] != i * i) ok = false;
  TAP_OK(ok, "mi_mallocn(100, sizeof(int)) works");
  errno = 0;
  void *ov = mi_mallocn(v_half, 3);
  TAP_OK(ov == NULL && errno == ENOMEM, "mi_mallocn overflow == NULL, errno ENOMEM (errno %d)", errno);

  /* mi_reallocn */
  int *arr2 = arr ? mi_reallocn(arr, 5000, sizeof(int)) : NULL;
  ok = arr2 != NULL && mi_usable_size(arr2) >= 5000 * sizeof(int);
  if (arr2) for (int i = 0; i < 100; i++) if (arr2[i] != i * i) ok = false;
  TAP_OK(ok, "mi_reallocn(p, 5000, sizeof(int)) grows and keeps content");
  errno = 0;
  void *ov2 = arr2 ? mi_reallocn(arr2, v_half, 3) : NULL;
  TAP_OK(ov2 == NULL && errno == ENOMEM, "mi_reallocn overflow == NULL, errno ENOMEM (errno %d)", errno);
  ok = arr2 != NULL;
  if (arr2) for (int i = 0; i < 100; i++) if (arr2[i] != i * i) ok = false;
  TAP_OK(ok, "mi_reallocn overflow leaves the block intact");
  mi_free(arr2);

  /* mi_reallocf: success */
  char *f = mi_malloc(40);
  if (f) fill(f, 40, 13);
  char *f2 = f ? mi_reallocf(f, 4000) : NULL;
  TAP_OK(f2 != NULL && verify(f2, 40, 13) == SIZE_MAX && mi_usable_size(f2) >= 4000,
         "mi_reallocf(p, 4000) succeeds and keeps content");
  /* mi_reallocf: failure frees the old block, returns NULL + ENOMEM */
  errno = 0;
  void *f3 = f2 ? mi_reallocf(f2, v_size_max) : NULL;
  int e = errno;
  TAP_OK(f2 != NULL && f3 == NULL && e == ENOMEM, "mi_reallocf(p, SIZE_MAX) == NULL, errno ENOMEM (errno %d)", e);
  /* the old block is gone; the allocator must keep working and the freed
   * block may be handed out again. */
  bool ok_after = true;
  for (int i = 0; i < 100; i++) {
    void *t = mi_malloc(4000);
    if (t == NULL) ok_after = false;
    else memset(t, i, 4000);
    mi_free(t);
  }
  TAP_OK(ok_after, "after a failed mi_reallocf the allocator keeps working (no crash)");
  void *rf = mi_reallocf(NULL, 78);
  TAP_OK(rf != NULL && mi_usable_size(rf) >= 78, "mi_reallocf(NULL, 78) usable >= 78");
  mi_free(rf);

  /* mi_expand: in place only */
  char *x = mi_malloc(100);
  size_t xu = x ? mi_usable_size(x) : 0;
  if (x) fill(x, 100, 14);
  void *x1 = x ? mi_expand(x, xu) : NULL;
  TAP_OK(x != NULL && x1 == x, "mi_expand(p, usable_size) == p");
  void *x2 = x ? mi_expand(x, 50) : NULL;
  TAP_OK(x != NULL && x2 == x, "mi_expand(p, smaller) == p");
  void *x3 = x ? mi_expand(x, 10 * MiB) : (void *)1;
  TAP_OK(x3 == NULL, "mi_expand(p, 10 MiB) == NULL (cannot grow in place)");
  TAP_OK(x != NULL && verify(x, 100, 14) == SIZE_MAX && mi_usable_size(x) == xu,
         "mi_expand failure leaves the block intact");
  TAP_OK(mi_expand(NULL, 10) == NULL, "mi_expand(NULL, 10) == NULL");
  mi_free(x);
  /* a huge block's usable size ends with the OS page after it; its span
   * has room after that (a 600 KiB block sits in a 4 MiB segment).  Debug
   * and tools builds keep a record or annotations after the block: it
   * cannot grow there. */
  char *h = mi_malloc(600 * KiB);
  size_t hu = h ? mi_usable_size(h) : 0;
  if (h) fill(h, 600 * KiB, 15);
  void *h1 = h ? mi_expand(h, 700 * KiB) : NULL;
#if MIALLOC_DEBUG || MIALLOC_VALGRIND || MIALLOC_ASAN
  TAP_OK(h != NULL && h1 == NULL && mi_usable_size(h) == hu && verify(h, 600 * KiB, 15) == SIZE_MAX,
         "mi_expand of a 600 KiB block to 700 KiB: NULL in this build, block intact");
#else
  TAP_OK(h != NULL && h1 == h && mi_usable_size(h) >= 700 * KiB && hu < 700 * KiB && verify(h, 600 * KiB, 15) == SIZE_MAX,
         "mi_expand of a 600 KiB block to 700 KiB grows it in place (usable %zu -> %zu)", hu, h ? mi_usable_size(h) : 0);
#endif
  if (h1) memset(h + 600 * KiB, 1, 100 * KiB);
  TAP_OK(h != NULL && mi_expand(h, 64 * MiB) == NULL, "mi_expand of a huge block past its span == NULL");
  mi_free(h);

  /* mi_strdup / mi_strndup */
  static const char hello[] = "hello, mialloc";
  char *s = mi_strdup(hello);
  TAP_OK(s != NULL && s != hello && strcmp(s, hello) == 0 && mi_is_in_heap_region(s), "mi_strdup copies into the heap");
  mi_free(s);
  char *e0 = mi_strdup("");
  TAP_OK(e0 != NULL && e0[0] == 0, "mi_strdup(\"\") == \"\"");
  mi_free(e0);
  char *sn = mi_strndup(hello, 5);
  TAP_OK(sn != NULL && strcmp(sn, "hello") == 0 && mi_usable_size(sn) >= 6, "mi_strndup(s, 5) == \"hello\"");
  mi_free(sn);
  char *sn2 = mi_strndup(hello, 1000);
  TAP_OK(sn2 != NULL && strcmp(sn2, hello) == 0, "mi_strndup(s, n > strlen) copies the whole string");
  mi_free(sn2);
  char *sn0 = mi_strndup(hello, 0);
  TAP_OK(sn0 != NULL && sn0[0] == 0, "mi_strndup(s, 0) == \"\"");
  mi_free(sn0);
  /* a long string, to leave the small sizes */
  size_t L = 100000;
  char *longs = malloc(L + 1);
  if (longs) { for (size_t i = 0; i < L; i++) longs[i] = (char)('a' + i % 26); longs[L] = 0; }
  char *ld = longs ? mi_strdup(longs) : NULL;
  TAP_OK(ld != NULL && strcmp(ld, longs) == 0, "mi_strdup of a 100000-char string");
  mi_free(ld);
  free(longs);

  /* mi_realpath */
  char *rp = mi_realpath("/", NULL);
  TAP_OK(rp != NULL && strcmp(rp, "/") == 0 && mi_is_in_heap_region(rp), "mi_realpath(\"/\", NULL) == \"/\" allocated by mialloc");
  mi_free(rp);
  char cwd[4096];
  char *rp2 = mi_realpath(".", NULL);
  TAP_OK(rp2 != NULL && getcwd(cwd, sizeof cwd) != NULL && strcmp(rp2, cwd) == 0, "mi_realpath(\".\", NULL) == getcwd()");
  mi_free(rp2);
  char buf[4096];
  char *rp3 = mi_realpath("/.//", buf);
  TAP_OK(rp3 == buf && strcmp(buf, "/") == 0, "mi_realpath(path, buf) fills buf and returns it");
  errno = 0;
  char *rp4 = mi_realpath("/nonexistent-mialloc-test-dir/x", NULL);
  TAP_OK(rp4 == NULL && errno == ENOENT, "mi_realpath(missing) == NULL, errno ENOENT (errno %d)", errno);

  /* mi_rezalloc: bytes past the old size are zero; dirty memory first */
  for (int i = 0; i < 16; i++) {
    void *d = mi_malloc(5000 + (size_t)i * 300);
    if (d) memset(d, 0xEE, mi_usable_size(d));
    mi_free(d);
  }
  char *rz = mi_malloc(100);
  size_t rzu = rz ? mi_usable_size(rz) : 0;
  if (rz) { memset(rz, 0xEE, rzu); fill(rz, 100, 15); }
  char *rz2 = rz ? mi_rezalloc(rz, 8000) : NULL;
  ok = rz2 != NULL && mi_usable_size(rz2) >= 8000 && verify(rz2, 100, 15) == SIZE_MAX;
  size_t bad = rz2 ? first_not(rz2, rzu, 8000, 0) : 0;
  if (bad != SIZE_MAX && rz2) tap_diag("mi_rezalloc: byte %zu is 0x%02x (old usable %zu)", bad, (unsigned char)rz2[bad], rzu);
  TAP_OK(ok, "mi_rezalloc(p, 8000) keeps the old content");
  TAP_OK(rz2 != NULL && bad == SIZE_MAX, "mi_rezalloc(p, 8000): bytes past the old size are zero");
  /* grow again into the huge range, the block being fully dirty */
  if (rz2) memset(rz2, 0xEE, mi_usable_size(rz2));
  size_t rz2u = rz2 ? mi_usable_size(rz2) : 0;
  for (int i = 0; i < 4; i++) {
    void *d = mi_malloc(3 * MiB);
    if (d) memset(d, 0xEE, mi_usable_size(d));
    mi_free(d);
  }
  char *rz3 = rz2 ? mi_rezalloc(rz2, 3 * MiB) : NULL;
  bad = rz3 ? first_not(rz3, rz2u, 3 * MiB, 0) : 0;
  TAP_OK(rz3 != NULL && first_not(rz3, 0, rz2u, 0xEE) == SIZE_MAX && bad == SIZE_MAX,
         "mi_rezalloc(p, 3 MiB): old content kept, bytes past the old size zero (first bad %zu)", bad);
  mi_free(rz3);
  char *rzn = mi_rezalloc(NULL, 500);
  TAP_OK(rzn != NULL && first_not(rzn, 0, 500, 0) == SIZE_MAX, "mi_rezalloc(NULL, 500) is zeroed");
  mi_free(rzn);

  /* mi_recalloc */
  for (int i = 0; i < 16; i++) {
    void *d = mi_malloc(40000);
    if (d) memset(d, 0x77, mi_usable_size(d));
    mi_free(d);
  }
  int *rc = mi_recalloc(NULL, 10, sizeof(int));
  ok = rc != NULL && first_not(rc, 0, 10 * sizeof(int), 0) == SIZE_MAX;
  TAP_OK(ok, "mi_recalloc(NULL, 10, 4) is zeroed");
  size_t rcu = rc ? mi_usable_size(rc) : 0;
  if (rc) { memset(rc, 0x77, rcu); for (int i = 0; i < 10; i++) rc[i] = 1000 + i; }
  int *rc2 = rc ? mi_recalloc(rc, 10000, sizeof(int)) : NULL;
  ok = rc2 != NULL && mi_usable_size(rc2) >= 10000 * sizeof(int);
  if (rc2) for (int i = 0; i < 10; i++) if (rc2[i] != 1000 + i) ok = false;
  bad = rc2 ? first_not(rc2, rcu, 10000 * sizeof(int), 0) : 0;
  TAP_OK(ok && bad == SIZE_MAX, "mi_recalloc(p, 10000, 4): old content kept, rest zero (first bad %zu)", bad);
  errno = 0;
  void *rc3 = rc2 ? mi_recalloc(rc2, v_half, 3) : NULL;
  TAP_OK(rc3 == NULL && errno == ENOMEM, "mi_recalloc overflow == NULL, errno ENOMEM (errno %d)", errno);
  ok = rc2 != NULL;
  if (rc2) for (int i = 0; i < 10; i++) if (rc2[i] != 1000 + i) ok = false;
  TAP_OK(ok, "mi_recalloc overflow leaves the block intact");
  mi_free(rc2);

  /* mi_calloc / mi_zalloc basic */
  long *cz = mi_calloc(1000, sizeof(long));
  ok = cz != NULL && mi_usable_size(cz) >= 1000 * sizeof(long);
  if (cz) for (int i = 0; i < 1000; i++) if (cz[i] != 0) ok = false;
  TAP_OK(ok, "mi_calloc(1000, sizeof(long)) zeroed");
  mi_free(cz);
}

/* A free function really frees: repeated alloc/free cycles reuse memory
 * instead of consuming new addresses for every call. */
enum { FREE_ITERS = 20000 };
static uintptr_t free_addrs[FREE_ITERS];

static size_t reuse_distinct(size_t size, int which) {
  for (int i = 0; i < FREE_ITERS; i++) {
    void *p = which == 5 ? malloc(size) : mi_malloc(size);
    if (p == NULL) return SIZE_MAX;
    memset(p, 1, size);
    free_addrs[i] = (uintptr_t)p;
    switch (which) {
    case 0: mi_free(p); break;
    case 1: mi_free_size(p, size); break;
    case 2: mi_cfree(p); break;
    case 3: free(p); break;
    case 4: cfree(p); break;
    default: free(p); break;
    }
  }
  return count_distinct(free_addrs, FREE_ITERS);
}

static void test_free_functions(void) {
  static const char *const names[] = {"mi_free", "mi_free_size", "mi_cfree", "free (mi_malloc'd)", "cfree", "free"};
  static const size_t sizes[] = {48, 20 * KiB};
  for (int w = 0; w < 6; w++) {
    for (size_t k = 0; k < 2; k++) {
      size_t d = reuse_distinct(sizes[k], w);
      /* without reuse every iteration would give a new address */
      TAP_OK(d != SIZE_MAX && d < FREE_ITERS / 4, "%s(%zu B) returns the block for reuse (%zu distinct addresses in %d cycles)",
             names[w], sizes[k], d, FREE_ITERS);
    }
  }
  /* huge blocks: 2000 cycles of 5 MiB would need 10 GiB without reuse */
  size_t sz = 5 * MiB;
  int cycles = 2000;
  bool ok = true;
  for (int i = 0; i < cycles && ok; i++) {
    char *p = mi_malloc(sz);
    if (p == NULL) { ok = false; tap_diag("mi_malloc(5 MiB) failed at cycle %d", i); break; }
    p[0] = 1; p[sz - 1] = 2;
    if (i & 1) mi_free_size(p, sz);
    else free(p);
  }
  TAP_OK(ok, "%d cycles of 5 MiB alloc/free (free and mi_free_size) keep working", cycles);
}

static void test_new_family(void) {
  char *n1 = mi_new(100);
  TAP_OK(n1 != NULL && mi_usable_size(n1) >= 100 && mi_is_in_heap_region(n1), "mi_new(100)");
  if (n1) fill(n1, 100, 21);
  char *n2 = n1 ? mi_new_realloc(n1, 10000) : NULL;
  TAP_OK(n2 != NULL && mi_usable_size(n2) >= 10000 && verify(n2, 100, 21) == SIZE_MAX, "mi_new_realloc(p, 10000) keeps content");
  if (n2) fill(n2, 10000, 22);
  char *n3 = n2 ? mi_new_reallocn(n2, 3000, 8) : NULL;
  TAP_OK(n3 != NULL && mi_usable_size(n3) >= 24000 && verify(n3, 10000, 22) == SIZE_MAX, "mi_new_reallocn(p, 3000, 8) keeps content");
  mi_free(n3);
  char *nn = mi_new_nothrow(64);
  TAP_OK(nn != NULL && mi_usable_size(nn) >= 64, "mi_new_nothrow(64)");
  mi_free(nn);
  void *nf = mi_new_nothrow(v_size_max);
  TAP_OK(nf == NULL, "mi_new_nothrow(SIZE_MAX) == NULL");
  double *nd = mi_new_n(500, sizeof(double));
  bool ok = nd != NULL && mi_usable_size(nd) >= 500 * sizeof(double);
  if (nd) { for (int i = 0; i < 500; i++) nd[i] = i * 0.5; for (int i = 0; i < 500; i++) if (nd[i] != i * 0.5) ok = false; }
  TAP_OK(ok, "mi_new_n(500, sizeof(double))");
  mi_free(nd);
  void *na = mi_new_aligned(1000, 256);
  TAP_OK(na != NULL && is_aligned(na, 256), "mi_new_aligned(1000, 256)");
  mi_free(na);
  void *nan = mi_new_aligned_nothrow(1000, 4096);
  TAP_OK(nan != NULL && is_aligned(nan, 4096), "mi_new_aligned_nothrow(1000, 4096)");
  mi_free(nan);
  void *nanf = mi_new_aligned_nothrow(v_size_max / 4, 64);
  TAP_OK(nanf == NULL, "mi_new_aligned_nothrow(SIZE_MAX/4, 64) == NULL");
}

static void test_misc(void) {
  /* mi_collect(true) with live and freed blocks */
  void *keep = mi_malloc(1000);
  if (keep) fill(keep, 1000, 31);
  for (int i = 0; i < 1000; i++) {
    void *t = mi_malloc((size_t)i * 37 + 1);
    mi_free(t);
  }
  void *hb = mi_malloc(8 * MiB);
  mi_free(hb);
  mi_collect(true);
  mi_collect(false);
  TAP_OK(keep != NULL && verify(keep, 1000, 31) == SIZE_MAX && mi_is_in_heap_region(keep),
         "mi_collect(true) keeps live blocks intact");
  void *after = mi_malloc(12345);
  TAP_OK(after != NULL && mi_usable_size(after) >= 12345, "allocation works after mi_collect(true)");
  mi_free(after);
  mi_free(keep);
}

static void test_options(void) {
  long saved = mi_option_get(mi_option_max_warnings);
  mi_option_set(mi_option_max_warnings, 7);
  TAP_OK(mi_option_get(mi_option_max_warnings) == 7, "mi_option_set/get round trip (max_warnings = 7)");
  mi_option_set(mi_option_max_warnings, 123456);
  TAP_OK(mi_option_get(mi_option_max_warnings) == 123456, "mi_option_set/get round trip (max_warnings = 123456)");
  TAP_OK(mi_option_get_clamp(mi_option_max_warnings, 0, 100) == 100, "mi_option_get_clamp clamps to max");
  mi_option_set(mi_option_max_warnings, saved);
  TAP_OK(mi_option_get(mi_option_max_warnings) == saved, "mi_option_set restores the saved value (%ld)", saved);

  bool was = mi_option_is_enabled(mi_option_show_stats);
  mi_option_enable(mi_option_show_stats);
  bool on = mi_option_is_enabled(mi_option_show_stats);
  mi_option_disable(mi_option_show_stats);
  bool off = !mi_option_is_enabled(mi_option_show_stats);
  TAP_OK(on && off, "mi_option_enable/disable round trip (show_stats)");
  mi_option_set_enabled(mi_option_show_stats, true);
  on = mi_option_is_enabled(mi_option_show_stats) && mi_option_get(mi_option_show_stats) != 0;
  mi_option_set_enabled(mi_option_show_stats, false);
  off = !mi_option_is_enabled(mi_option_show_stats) && mi_option_get(mi_option_show_stats) == 0;
  TAP_OK(on && off, "mi_option_set_enabled round trip (show_stats)");
  mi_option_set_enabled(mi_option_show_stats, was);
  TAP_OK(mi_option_is_enabled(mi_option_show_stats) == was, "show_stats restored");

  long pd = mi_option_get(mi_option_purge_delay);
  mi_option_set(mi_option_purge_delay, 250);
  TAP_OK(mi_option_get(mi_option_purge_delay) == 250, "purge_delay set to 250");
  mi_option_set(mi_option_purge_delay, pd);
  TAP_OK(mi_option_get(mi_option_purge_delay) == pd, "purge_delay restored (%ld)", pd);

  size_t ar = mi_option_get_size(mi_option_arena_reserve);
  TAP_OK(ar > 0, "mi_option_get_size(arena_reserve) > 0 (%zu)", ar);
}

/* mi_register_deferred_free: called when the allocator needs more pages
 * (force false) and from mi_collect(true) (force true), with a heartbeat
 * that grows. */
static int deferred_calls, deferred_forced;
static unsigned long long deferred_last_beat;
static bool deferred_beats_grow = true;
static void deferred_cb(bool force, unsigned long long heartbeat, void *arg) {
  if (arg != &deferred_calls) return;
  deferred_calls++;
  if (force) deferred_forced++;
  if (heartbeat <= deferred_last_beat) deferred_beats_grow = false;
  deferred_last_beat = heartbeat;
}

static void test_deferred_free(void) {
  mi_register_deferred_free(deferred_cb, &deferred_calls);
  void *blocks[2000];
  for (int i = 0; i < 2000; i++) blocks[i] = malloc(2000 + (size_t)(i % 7) * 1000);
  for (int i = 0; i < 2000; i++) free(blocks[i]);
  int before_collect = deferred_calls;
  mi_collect(true);
  mi_register_deferred_free(NULL, NULL);
  TAP_OK(before_collect > 0, "deferred-free callback runs when new pages are needed (%d calls)", before_collect);
  TAP_OK(deferred_forced == 1, "mi_collect(true) calls it with force (%d)", deferred_forced);
  TAP_OK(deferred_beats_grow, "the heartbeat grows from call to call");
  int after = deferred_calls;
  for (int i = 0; i < 2000; i++) blocks[i] = malloc(3000);
  for (int i = 0; i < 2000; i++) free(blocks[i]);
  TAP_OK(deferred_calls == after, "no calls after unregistering");
}

int main(void) {
  test_identity();
  test_basic_std();
  test_realloc_content();
  test_realloc_in_place();
  test_calloc_zero();
  test_rezalloc_dirty();
  test_usable_size_neighbours();
  test_size_sweep();
  test_alignment();
  test_no_overlap();
  test_good_size();
  test_mi_family();
  test_free_functions();
  test_new_family();
  test_misc();
  test_options();
  test_deferred_free();
  return tap_done();
}

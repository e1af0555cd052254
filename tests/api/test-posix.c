/* test-posix.c -- the posix/glibc-style entry points: valloc, pvalloc,
 * reallocarray, mi_reallocarr, malloc_usable_size, malloc_trim, mallinfo,
 * mallinfo2, malloc_stats, malloc_info, cfree; the glibc-internal names (__libc_malloc & co.) as a
 * program finds them with dlsym; and libc functions that allocate
 * (strdup, asprintf, getline), which must now get mialloc's memory.
 */
#define _GNU_SOURCE
#include <mialloc.h>
#include "../tap.h"

#include <dlfcn.h>
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

/* glibc no longer declares cfree; mialloc exports it. */
extern void cfree(void *p);

static volatile size_t v_half = SIZE_MAX / 2;
static volatile size_t v_size_max = SIZE_MAX;
static volatile size_t v_zero = 0;
static void *volatile sink;

static size_t page_size;

static void fill(void *p, size_t n, unsigned seed) {
  unsigned char *b = p;
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(seed * 31u + (unsigned)i * 7u + (unsigned)(i >> 8));
}
static bool verify(const void *p, size_t n, unsigned seed) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != (unsigned char)(seed * 31u + (unsigned)i * 7u + (unsigned)(i >> 8))) return false;
  return true;
}
static bool all_zero(const void *p, size_t n) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != 0) return false;
  return true;
}
static bool aligned_to(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }
static size_t round_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }
/* The same pointer, hidden from gcc's -Wuse-after-free (used only after
 * a realloc that failed and so left the block alone). */
static void *launder(void *p) {
  sink = p;
  return sink;
}

static int cmp_uptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : (x > y ? 1 : 0);
}

/* Alloc/free cycles: a working free makes addresses repeat. */
enum { CYCLES = 10000 };
static uintptr_t addrs[CYCLES];
static size_t distinct_after_cycles(void *(*alloc)(size_t), void (*release)(void *), size_t size) {
  for (int i = 0; i < CYCLES; i++) {
    void *p = alloc(size);
    if (p == NULL) return SIZE_MAX;
    memset(p, 0x11, size);
    addrs[i] = (uintptr_t)p;
    release(p);
  }
  qsort(addrs, CYCLES, sizeof addrs[0], cmp_uptr);
  size_t d = 1;
  for (int i = 1; i < CYCLES; i++)
    if (addrs[i] != addrs[i - 1]) d++;
  return d;
}

/* ======================================================================= */

static void test_valloc(void) {
  static const size_t sz[] = {1, 100, 4095, 4096, 4097, 5000, 70000, 600000, 3 * MiB};
  bool ok = true;
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    unsigned char *p = valloc(sz[i]);
    if (p == NULL || !aligned_to(p, page_size) || malloc_usable_size(p) < sz[i] || !mi_is_in_heap_region(p)) {
      if (ok) tap_diag("valloc(%zu) = %p, usable %zu", sz[i], (void *)p, p ? malloc_usable_size(p) : 0);
      ok = false;
    }
    if (p) {
      fill(p, sz[i], 1);
      if (!verify(p, sz[i], 1)) ok = false;
    }
    free(p);
  }
  TAP_OK(ok, "valloc(n): page aligned (%zu), usable >= n, writable", page_size);
  void *z = valloc(v_zero);
  TAP_OK(z != NULL && aligned_to(z, page_size), "valloc(0) returns a page-aligned block (%p)", z);
  free(z);
  void *m = mi_valloc(10);
  TAP_OK(m != NULL && aligned_to(m, page_size) && mi_usable_size(m) >= 10, "mi_valloc(10) page aligned");
  mi_free(m);
  errno = 0;
  void *h = valloc(v_size_max);
  TAP_OK(h == NULL && errno == ENOMEM, "valloc(SIZE_MAX) == NULL, errno ENOMEM (errno %d)", errno);

  ok = true;
  for (size_t i = 0; i < sizeof sz / sizeof sz[0]; i++) {
    unsigned char *p = pvalloc(sz[i]);
    size_t want = round_up(sz[i], page_size);
    if (p == NULL || !aligned_to(p, page_size) || malloc_usable_size(p) < want) {
      if (ok) tap_diag("pvalloc(%zu) = %p, usable %zu, want >= %zu", sz[i], (void *)p, p ? malloc_usable_size(p) : 0, want);
      ok = false;
    }
    if (p) {
      /* the whole rounded size is ours to write */
      fill(p, want, 2);
      if (!verify(p, want, 2)) ok = false;
    }
    free(p);
  }
  TAP_OK(ok, "pvalloc(n): page aligned, usable >= n rounded up to a page, all of it writable");
  unsigned char *pz = pvalloc(v_zero);
  TAP_OK(pz != NULL && aligned_to(pz, page_size) && malloc_usable_size(pz) >= page_size,
         "pvalloc(0) returns one page (usable %zu)", pz ? malloc_usable_size(pz) : 0);
  free(pz);
  void *mp = mi_pvalloc(1);
  TAP_OK(mp != NULL && aligned_to(mp, page_size) && mi_usable_size(mp) >= page_size, "mi_pvalloc(1) gives a whole page");
  mi_free(mp);
  errno = 0;
  h = pvalloc(v_size_max);
  TAP_OK(h == NULL && errno == ENOMEM, "pvalloc(SIZE_MAX) == NULL, errno ENOMEM (errno %d)", errno);
}

static void test_reallocarray(void) {
  int *a = reallocarray(NULL, 100, sizeof(int));
  bool ok = a != NULL && malloc_usable_size(a) >= 100 * sizeof(int) && mi_is_in_heap_region(a);
  if (a) for (int i = 0; i < 100; i++) a[i] = i * 3;
  TAP_OK(ok, "reallocarray(NULL, 100, 4) acts as malloc");
  int *b = a ? reallocarray(a, 100000, sizeof(int)) : NULL;
  ok = b != NULL && malloc_usable_size(b) >= 100000 * sizeof(int);
  if (b) for (int i = 0; i < 100; i++) if (b[i] != i * 3) ok = false;
  TAP_OK(ok, "reallocarray(p, 100000, 4) grows and keeps content");
  int *b_old = launder(b);
  errno = 0;
  void *c = b ? reallocarray(b, v_half, 3) : (void *)1;
  int e = errno;
  b = b_old;
  TAP_OK(c == NULL && e == ENOMEM, "reallocarray(p, SIZE_MAX/2, 3) == NULL, errno ENOMEM (errno %d)", e);
  ok = b != NULL && malloc_usable_size(b) >= 100000 * sizeof(int);
  if (b) for (int i = 0; i < 100; i++) if (b[i] != i * 3) ok = false;
  TAP_OK(ok, "failed reallocarray leaves the block intact");
  int *d = b ? reallocarray(b, 10, sizeof(int)) : NULL;
  ok = d != NULL;
  if (d) for (int i = 0; i < 10; i++) if (d[i] != i * 3) ok = false;
  TAP_OK(ok, "reallocarray(p, 10, 4) shrinks and keeps content");
  void *z = d ? reallocarray(d, v_zero, 4) : (void *)1;
  TAP_OK(z == NULL, "reallocarray(p, 0, 4) frees p and returns NULL like realloc(p, 0) (got %p)", z);

  /* mi_reallocarray */
  char *m = mi_reallocarray(NULL, 10, 10);
  TAP_OK(m != NULL && mi_usable_size(m) >= 100, "mi_reallocarray(NULL, 10, 10)");
  if (m) fill(m, 100, 3);
  char *m2 = m ? mi_reallocarray(m, 1000, 10) : NULL;
  TAP_OK(m2 != NULL && verify(m2, 100, 3), "mi_reallocarray grows and keeps content");
  char *m2_old = launder(m2);
  errno = 0;
  void *m3 = m2 ? mi_reallocarray(m2, 3, v_half) : (void *)1;
  e = errno;
  m2 = m2_old;
  TAP_OK(m3 == NULL && e == ENOMEM, "mi_reallocarray overflow == NULL, errno ENOMEM (errno %d)", e);
  TAP_OK(m2 != NULL && verify(m2, 100, 3), "failed mi_reallocarray leaves the block intact");
  mi_free(m2);

  /* mi_reallocarr (NetBSD): returns an error number, updates *p on success */
  long *r = NULL;
  int rc = mi_reallocarr(&r, 50, sizeof(long));
  TAP_OK(rc == 0 && r != NULL && mi_usable_size(r) >= 50 * sizeof(long), "mi_reallocarr(&NULL, 50, 8) == 0 and allocates");
  if (r) for (int i = 0; i < 50; i++) r[i] = -i;
  long *r_before = r;
  rc = mi_reallocarr(&r, 5000, sizeof(long));
  ok = rc == 0 && r != NULL && mi_usable_size(r) >= 5000 * sizeof(long);
  if (ok) for (int i = 0; i < 50; i++) if (r[i] != -i) ok = false;
  TAP_OK(ok, "mi_reallocarr(&p, 5000, 8) == 0, grows and keeps content");
  (void)r_before;
  long *r_keep = r;
  errno = 4321;
  rc = mi_reallocarr(&r, v_half, 3);
  TAP_OK(rc == ENOMEM, "mi_reallocarr overflow returns ENOMEM (rc %d)", rc);
  TAP_OK(r == r_keep, "mi_reallocarr failure leaves *p unchanged");
  TAP_OK(errno == 4321, "mi_reallocarr failure leaves errno alone (errno %d)", errno);
  ok = r != NULL;
  if (r) for (int i = 0; i < 50; i++) if (r[i] != -i) ok = false;
  TAP_OK(ok, "mi_reallocarr failure leaves the block intact");
  rc = mi_reallocarr(NULL, 1, 1);
  TAP_OK(rc == EINVAL, "mi_reallocarr(NULL, ...) == EINVAL (rc %d)", rc);
  rc = mi_reallocarr(&r, 0, 8);
  TAP_OK(rc == 0 && (r == NULL || mi_is_in_heap_region(r)), "mi_reallocarr(&p, 0, 8) == 0 (p = %p)", (void *)r);
  mi_free(r);
}

static void test_misc(void) {
  TAP_OK(malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) == 0");
  TAP_OK(mi_malloc_usable_size(NULL) == 0 && mi_malloc_size(NULL) == 0, "mi_malloc_usable_size/mi_malloc_size(NULL) == 0");
  void *p = malloc(1000);
  TAP_OK(p != NULL && malloc_usable_size(p) >= 1000 && malloc_usable_size(p) == mi_malloc_usable_size(p) &&
             mi_malloc_size(p) == mi_usable_size(p),
         "malloc_usable_size, mi_malloc_usable_size, mi_malloc_size, mi_usable_size agree (%zu)",
         p ? malloc_usable_size(p) : 0);
  free(p);

  /* malloc_trim with live and freed memory around */
  char *keep = malloc(100000);
  if (keep) fill(keep, 100000, 9);
  for (int i = 0; i < 100; i++) {
    void *t = malloc((size_t)i * 1000 + 1);
    sink = t;
    free(t);
  }
  int tr = malloc_trim(0);
  TAP_OK(tr == 1, "malloc_trim(0) returns 1 (got %d)", tr);
  TAP_OK(keep != NULL && verify(keep, 100000, 9), "malloc_trim keeps live blocks intact");
  free(keep);
  TAP_OK(malloc_trim(1 * MiB) == 1, "malloc_trim(1 MiB) returns 1");

  /* cfree */
  size_t d = distinct_after_cycles(malloc, cfree, 64);
  TAP_OK(d != SIZE_MAX && d < CYCLES / 4, "cfree returns blocks for reuse (%zu distinct addresses in %d cycles)", d, CYCLES);
  errno = EDOM;
  cfree(NULL);
  TAP_OK(errno == EDOM, "cfree(NULL) does nothing");
}

/* memory no malloc handed out: mallinfo's uordblks must not count it */
static char not_heap[8 << 20];

static void test_mallinfo(void) {
  struct mallinfo2 start = mallinfo2();
  memset(not_heap, 4, sizeof not_heap);
  sink = not_heap;
  struct mallinfo2 touched = mallinfo2();
  size_t moved = touched.uordblks > start.uordblks ? touched.uordblks - start.uordblks : start.uordblks - touched.uordblks;
  TAP_OK(moved < 64 * KiB, "mallinfo2: uordblks ignores 8 MiB of static memory written (%zu -> %zu)", start.uordblks,
         touched.uordblks);
  /* a few MiB live and touched: small, medium and one huge block */
  enum { NSMALL = 2000 };
  void **small = malloc(NSMALL * sizeof *small);
  for (int i = 0; small && i < NSMALL; i++) {
    small[i] = malloc(500);
    if (small[i]) memset(small[i], 1, 500);
    sink = small[i]; /* keep gcc from eliding the malloc/memset/free */
  }
  void *medium = malloc(200 * KiB);
  if (medium) memset(medium, 2, 200 * KiB);
  sink = medium;
  struct mallinfo2 before = mallinfo2();
  size_t huge_sz = 8 * MiB;
  void *huge = malloc(huge_sz);
  if (huge) memset(huge, 3, huge_sz);
  sink = huge;
  struct mallinfo2 m = mallinfo2();
  size_t live = NSMALL * 500 + 200 * KiB + huge_sz;
  tap_diag("mallinfo2: arena %zu ordblks %zu hblks %zu hblkhd %zu uordblks %zu fordblks %zu keepcost %zu",
           m.arena, m.ordblks, m.hblks, m.hblkhd, m.uordblks, m.fordblks, m.keepcost);
  TAP_OK(m.arena > 0, "mallinfo2().arena > 0 after allocating (%zu)", m.arena);
  TAP_OK(m.arena + m.hblkhd >= live, "mallinfo2: arena + hblkhd (%zu) >= live touched bytes (%zu)", m.arena + m.hblkhd, live);
  TAP_OK(m.uordblks > 0 && m.uordblks <= m.arena + m.hblkhd, "mallinfo2: 0 < uordblks (%zu) <= arena + hblkhd (%zu)",
         m.uordblks, m.arena + m.hblkhd);
  TAP_OK(m.arena < ((size_t)1 << 46), "mallinfo2().arena is a plausible size (%zu)", m.arena);
  /* glibc's meaning: bytes handed out outside the mmapped (huge) blocks */
  size_t small_live = NSMALL * 500 + 200 * KiB;
  TAP_OK(m.uordblks >= touched.uordblks + small_live && m.uordblks <= touched.uordblks + 2 * small_live,
         "mallinfo2: uordblks grows by the %zu bytes handed out in small and medium blocks, give or take their "
         "rounding (%zu -> %zu)", small_live, touched.uordblks, m.uordblks);
  TAP_OK(m.fordblks == m.arena - m.uordblks, "mallinfo2: fordblks (%zu) = arena - uordblks", m.fordblks);
  TAP_OK(m.hblkhd >= before.hblkhd + huge_sz, "mallinfo2: hblkhd grows by the 8 MiB huge block (%zu -> %zu)",
         before.hblkhd, m.hblkhd);
  TAP_OK(m.hblks >= 1 && m.hblks == before.hblks + 1, "mallinfo2: hblks counts the huge block (%zu -> %zu)", before.hblks, m.hblks);

  /* mallinfo is deprecated in glibc, but programs still call it */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  struct mallinfo mi = mallinfo();
#pragma GCC diagnostic pop
  TAP_OK(mi.arena > 0, "mallinfo().arena > 0 (%d)", mi.arena);
  size_t a2 = m.arena > INT_MAX ? (size_t)INT_MAX : m.arena;
  size_t a1 = (size_t)mi.arena;
  size_t diff = a1 > a2 ? a1 - a2 : a2 - a1;
  TAP_OK(diff < 16 * MiB, "mallinfo().arena (%d) agrees with mallinfo2().arena (%zu)", mi.arena, m.arena);
  TAP_OK(mi.uordblks > 0 && mi.hblkhd >= 0 && mi.hblks >= 0, "mallinfo(): uordblks %d, hblkhd %d, hblks %d plausible",
         mi.uordblks, mi.hblkhd, mi.hblks);

  free(huge);
  struct mallinfo2 after = mallinfo2();
  TAP_OK(after.hblkhd + huge_sz <= m.hblkhd, "mallinfo2: hblkhd drops after freeing the huge block (%zu -> %zu)", m.hblkhd,
         after.hblkhd);
  TAP_OK(after.hblks + 1 == m.hblks, "mallinfo2: hblks (blocks currently mmapped) drops after the free (%zu -> %zu)",
         m.hblks, after.hblks);

  for (int i = 0; small && i < NSMALL; i++) free(small[i]);
  free(small);
  free(medium);
  struct mallinfo2 freed = mallinfo2();
  TAP_OK(freed.uordblks + small_live <= m.uordblks,
         "mallinfo2: uordblks drops by the small and medium blocks freed (%zu -> %zu)", m.uordblks, freed.uordblks);
}

/* The glibc-internal names, found the way a program or library finds them. */
typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void (*free_fn)(void *);
typedef void *(*memalign_fn)(size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);

static void *lookup(const char *name) {
  void *sym = dlsym(RTLD_DEFAULT, name);
  Dl_info info;
  bool in_lib = sym != NULL && dladdr(sym, &info) != 0 && info.dli_fname != NULL && strstr(info.dli_fname, "libmialloc") != NULL;
  TAP_OK(in_lib, "dlsym(RTLD_DEFAULT, \"%s\") resolves into libmialloc (%s)", name,
         sym == NULL ? "not found" : (dladdr(sym, &info) && info.dli_fname ? info.dli_fname : "?"));
  return sym;
}

static free_fn libc_free_fn;
static malloc_fn libc_malloc_fn;
static void *call_libc_malloc(size_t n) { return libc_malloc_fn(n); }
static void call_libc_free(void *p) { libc_free_fn(p); }

static void test_libc_names(void) {
  malloc_fn l_malloc;
  calloc_fn l_calloc;
  realloc_fn l_realloc;
  free_fn l_free;
  memalign_fn l_memalign;
  malloc_fn l_valloc, l_pvalloc;
  posix_memalign_fn l_posix_memalign;
  /* object-to-function pointer conversion through memcpy: no -Wpedantic noise */
  void *s;
  s = lookup("__libc_malloc");    memcpy(&l_malloc, &s, sizeof s);
  s = lookup("__libc_calloc");    memcpy(&l_calloc, &s, sizeof s);
  s = lookup("__libc_realloc");   memcpy(&l_realloc, &s, sizeof s);
  s = lookup("__libc_free");      memcpy(&l_free, &s, sizeof s);
  s = lookup("__libc_memalign");  memcpy(&l_memalign, &s, sizeof s);
  s = lookup("__libc_valloc");    memcpy(&l_valloc, &s, sizeof s);
  s = lookup("__libc_pvalloc");   memcpy(&l_pvalloc, &s, sizeof s);
  s = lookup("__posix_memalign"); memcpy(&l_posix_memalign, &s, sizeof s);
  lookup("malloc_stats");
  lookup("malloc_info");
  s = lookup("__libc_mallinfo");
  if (s) {
    struct mallinfo (*l_mallinfo)(void);
    memcpy(&l_mallinfo, &s, sizeof s);
    struct mallinfo mi = l_mallinfo();
    TAP_OK(mi.arena > 0 && mi.uordblks > 0 && mi.uordblks <= mi.arena,
           "__libc_mallinfo answers from mialloc (arena %d, uordblks %d)", mi.arena, mi.uordblks);
  }

  if (l_malloc) {
    unsigned char *p = l_malloc(777);
    TAP_OK(p != NULL && mi_is_in_heap_region(p) && mi_usable_size(p) >= 777, "__libc_malloc(777) gives a mialloc block");
    if (p) fill(p, 777, 4);
    if (l_realloc && p) {
      unsigned char *q = l_realloc(p, 50000);
      TAP_OK(q != NULL && mi_is_in_heap_region(q) && mi_usable_size(q) >= 50000 && verify(q, 777, 4),
             "__libc_realloc(p, 50000) grows a mialloc block and keeps content");
      void *z = q ? l_realloc(q, v_zero) : (void *)1;
      TAP_OK(z == NULL, "__libc_realloc(p, 0) frees and returns NULL (glibc semantics)");
    } else {
      TAP_OK(0, "__libc_realloc not available");
      TAP_OK(0, "__libc_realloc not available");
      if (l_free) l_free(p);
    }
    void *rn = l_realloc ? l_realloc(NULL, 10) : NULL;
    TAP_OK(rn != NULL && mi_is_in_heap_region(rn), "__libc_realloc(NULL, 10) allocates from mialloc");
    if (l_free) l_free(rn);
  } else {
    TAP_OK(0, "__libc_malloc not available");
  }
  if (l_calloc) {
    for (int i = 0; i < 10; i++) {
      void *d = malloc(4000);
      if (d) memset(d, 0xFF, 4000);
      free(d);
    }
    unsigned char *c = l_calloc(1000, 4);
    TAP_OK(c != NULL && mi_is_in_heap_region(c) && all_zero(c, 4000), "__libc_calloc(1000, 4) gives zeroed mialloc memory");
    if (l_free) l_free(c);
    errno = 0;
    void *co = l_calloc(v_half, 3);
    TAP_OK(co == NULL && errno == ENOMEM, "__libc_calloc overflow == NULL, errno ENOMEM (errno %d)", errno);
  }
  if (l_free && l_malloc) {
    libc_free_fn = l_free;
    libc_malloc_fn = l_malloc;
    size_t d = distinct_after_cycles(call_libc_malloc, call_libc_free, 96);
    TAP_OK(d != SIZE_MAX && d < CYCLES / 4, "__libc_free returns blocks for reuse (%zu distinct addresses in %d cycles)", d, CYCLES);
    /* cross-name: a block from malloc freed by __libc_free and vice versa */
    void *x = malloc(123);
    l_free(x);
    void *y = l_malloc(123);
    bool ok = y != NULL && mi_is_in_heap_region(y);
    free(y);
    TAP_OK(ok, "malloc/__libc_free and __libc_malloc/free mix freely");
  }
  if (l_memalign) {
    void *p = l_memalign(256, 1000);
    TAP_OK(p != NULL && aligned_to(p, 256) && mi_is_in_heap_region(p) && mi_usable_size(p) >= 1000,
           "__libc_memalign(256, 1000) gives an aligned mialloc block");
    free(p);
    p = l_memalign(1 * MiB, 100);
    TAP_OK(p != NULL && aligned_to(p, 1 * MiB) && mi_is_in_heap_region(p), "__libc_memalign(1 MiB, 100)");
    free(p);
  }
  if (l_valloc) {
    void *p = l_valloc(5000);
    TAP_OK(p != NULL && aligned_to(p, page_size) && mi_is_in_heap_region(p) && mi_usable_size(p) >= 5000,
           "__libc_valloc(5000) page aligned mialloc block");
    free(p);
  }
  if (l_pvalloc) {
    void *p = l_pvalloc(5000);
    TAP_OK(p != NULL && aligned_to(p, page_size) && mi_is_in_heap_region(p) && mi_usable_size(p) >= round_up(5000, page_size),
           "__libc_pvalloc(5000) page aligned, rounded to pages, mialloc block");
    free(p);
  }
  if (l_posix_memalign) {
    void *p = NULL;
    int rc = l_posix_memalign(&p, 128, 3000);
    TAP_OK(rc == 0 && p != NULL && aligned_to(p, 128) && mi_is_in_heap_region(p) && mi_usable_size(p) >= 3000,
           "__posix_memalign(&p, 128, 3000) == 0 with an aligned mialloc block (rc %d)", rc);
    free(p);
    int marker;
    void *out = &marker;
    rc = l_posix_memalign(&out, 3, 16);
    TAP_OK(rc == EINVAL && out == &marker, "__posix_memalign(alignment 3) == EINVAL, pointer untouched (rc %d)", rc);
  }
}

/* libc's own allocating functions now allocate from mialloc, and their
 * results are freed with free. */
static void test_libc_allocations(void) {
  char *s = strdup("mialloc");
  TAP_OK(s != NULL && strcmp(s, "mialloc") == 0 && mi_is_in_heap_region(s), "strdup() result is a mialloc block");
  free(s);
  char *a = NULL;
  int n = asprintf(&a, "%s-%d-%0500d", "x", 42, 7);
  TAP_OK(n == 505 && a != NULL && mi_is_in_heap_region(a) && mi_usable_size(a) >= 506, "asprintf() buffer is a mialloc block (n %d)", n);
  free(a);
  FILE *f = fmemopen((void *)"line one\nline two that is longer\n", 33, "r");
  char *line = NULL;
  size_t cap = 0;
  ssize_t got1 = f ? getline(&line, &cap, f) : -1;
  ssize_t got2 = f ? getline(&line, &cap, f) : -1;
  TAP_OK(got1 == 9 && got2 == 24 && line != NULL && strcmp(line, "line two that is longer\n") == 0 && mi_is_in_heap_region(line),
         "getline() buffer is a mialloc block (got %zd, %zd)", got1, got2);
  free(line);
  if (f) fclose(f);
  char *rp = realpath("/", NULL);
  TAP_OK(rp != NULL && strcmp(rp, "/") == 0 && mi_is_in_heap_region(rp), "realpath(\"/\", NULL) result is a mialloc block");
  free(rp);
}

/* Reads what f holds from the start into a NUL-terminated buffer. */
static char *slurp(FILE *f) {
  static char buf[64 * 1024];
  fflush(f);
  rewind(f);
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  return buf;
}

/* The number after "label" in text, or SIZE_MAX when it is not there. */
static size_t number_after(const char *text, const char *label) {
  const char *at = strstr(text, label);
  if (at == NULL) return SIZE_MAX;
  at += strlen(label);
  while (*at == ' ' || *at == '=' || *at == '"') at++;
  if (*at < '0' || *at > '9') return SIZE_MAX;
  return (size_t)strtoull(at, NULL, 10);
}

enum { NINFO = 1000, INFO_SIZE = 500, MAX_CLASSES = 128 };

/* The <size> lines of a malloc_info document: each class's upper bound
 * and free-block count; how many lines there were. */
static int size_lines(const char *text, size_t *to, size_t *count) {
  int n = 0;
  for (const char *line = strstr(text, "<size "); line != NULL && n < MAX_CLASSES; line = strstr(line + 1, "<size ")) {
    to[n] = number_after(line, "to=");
    count[n] = number_after(line, "count=");
    n++;
  }
  return n;
}

/* malloc_info's free-block count for the class whose bound is to (0 if none) */
static size_t free_count_of(const size_t *tos, const size_t *counts, int n, size_t to) {
  for (int i = 0; i < n; i++)
    if (tos[i] == to) return counts[i];
  return 0;
}

/* malloc_stats writes glibc's report on stderr, with mialloc's figures */
static void test_malloc_stats(size_t huge_sz) {
  FILE *out = tmpfile();
  int saved = dup(2);
  TAP_OK(out != NULL && saved >= 0, "a temporary file for stderr");
  if (out == NULL || saved < 0) return;
  fflush(stderr);
  dup2(fileno(out), 2);
  struct mallinfo2 m = mallinfo2();
  malloc_stats();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  const char *text = slurp(out);
  TAP_OK(strncmp(text, "Arena 0:\n", 9) == 0 && strstr(text, "Total (incl. mmap):\n") != NULL,
         "malloc_stats prints glibc's headings");
  size_t sys = number_after(text, "system bytes");
  size_t used = number_after(text, "in use bytes");
  TAP_OK(sys == m.arena && used == m.uordblks, "malloc_stats: arena 0's system and in-use bytes (%zu, %zu) are "
         "mallinfo2's arena and uordblks (%zu, %zu)", sys, used, m.arena, m.uordblks);
  TAP_OK(used >= NINFO / 2 * INFO_SIZE && used <= sys, "malloc_stats: %zu bytes in use cover the %d live blocks "
         "of %d bytes and fit in the %zu held", used, NINFO / 2, INFO_SIZE, sys);
  const char *total = strstr(text, "Total (incl. mmap):");
  size_t total_used = total ? number_after(total, "in use bytes") : SIZE_MAX;
  TAP_OK(total_used != SIZE_MAX && total_used >= used + huge_sz, "malloc_stats: the total in use (%zu) adds the "
         "%zu-byte huge block", total_used, huge_sz);
  size_t max_bytes = number_after(text, "max mmap bytes");
  size_t max_regions = number_after(text, "max mmap regions");
  TAP_OK(max_regions != SIZE_MAX && max_regions >= 1 && max_bytes != SIZE_MAX && max_bytes >= huge_sz,
         "malloc_stats: max mmap regions %zu, max mmap bytes %zu count the huge block", max_regions, max_bytes);
  fclose(out);
}

/* malloc_info writes glibc's XML document, with mialloc's figures */
static void test_malloc_info(const size_t *before_to, const size_t *before_count, int before_n, size_t huge_sz) {
  FILE *out = tmpfile();
  TAP_OK(out != NULL, "a temporary file for malloc_info");
  if (out == NULL) return;
  struct mallinfo2 m = mallinfo2();
  int rc = malloc_info(0, out);
  const char *text = slurp(out);
  TAP_OK(rc == 0, "malloc_info(0, f) returns 0 (got %d)", rc);
  size_t len = strlen(text);
  TAP_OK(strncmp(text, "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", 40) == 0 && len > 10 &&
             strcmp(text + len - 10, "</malloc>\n") == 0,
         "malloc_info: a <malloc version=\"1\"> document with heap 0 and its sizes");
  size_t current = number_after(text, "<system type=\"current\" size=");
  TAP_OK(current == m.arena, "malloc_info: system current (%zu) is mallinfo2's arena (%zu)", current, m.arena);
  const char *whole = strstr(text, "</heap>");
  size_t mmap_count = whole ? number_after(whole, "<total type=\"mmap\" count=") : SIZE_MAX;
  const char *mmap_at = whole ? strstr(whole, "<total type=\"mmap\"") : NULL;
  size_t mmap_size = mmap_at ? number_after(mmap_at, "size=") : SIZE_MAX;
  TAP_OK(mmap_count == m.hblks && mmap_count >= 1 && mmap_size == m.hblkhd && mmap_size >= huge_sz,
         "malloc_info: the mmap total (%zu blocks, %zu bytes) is the live huge block", mmap_count, mmap_size);
  /* the freed half of the 500-byte blocks shows in one class's free count:
   * the class that gained most since before the frees (debug builds pad
   * the blocks, so the class is not necessarily the one 500 bytes fall in) */
  size_t tos[MAX_CLASSES], counts[MAX_CLASSES];
  int n = size_lines(text, tos, counts);
  size_t best_to = 0, best_gain = 0;
  for (int i = 0; i < n; i++) {
    size_t before = free_count_of(before_to, before_count, before_n, tos[i]);
    size_t gain = counts[i] > before ? counts[i] - before : 0;
    if (gain > best_gain) {
      best_gain = gain;
      best_to = tos[i];
    }
  }
  TAP_OK(best_gain >= NINFO / 2 && best_to >= INFO_SIZE && best_to <= 2 * INFO_SIZE,
         "malloc_info: the %d blocks of %d bytes freed show in the free count of one class (up to %zu bytes: %zu more)",
         NINFO / 2, INFO_SIZE, best_to, best_gain);
  size_t max = number_after(text, "<system type=\"max\" size=");
  TAP_OK(max != SIZE_MAX && max >= current, "malloc_info: system max (%zu) >= current (%zu)", max, current);
  rc = malloc_info(1, out);
  TAP_OK(rc == EINVAL, "malloc_info(1, f) refuses the option with EINVAL, as glibc (got %d)", rc);
  fclose(out);
}

static void test_heap_reports(void) {
  void **blocks = malloc(NINFO * sizeof *blocks);
  TAP_OK(blocks != NULL, "a table of %d blocks", NINFO);
  if (blocks == NULL) return;
  for (int i = 0; i < NINFO; i++) {
    blocks[i] = malloc(INFO_SIZE);
    if (blocks[i]) memset(blocks[i], 5, INFO_SIZE);
  }
  /* each class's free blocks before half the blocks are freed */
  size_t before_to[MAX_CLASSES], before_count[MAX_CLASSES];
  int before_n = 0;
  FILE *first = tmpfile();
  if (first != NULL && malloc_info(0, first) == 0) before_n = size_lines(slurp(first), before_to, before_count);
  if (first != NULL) fclose(first);
  for (int i = 0; i < NINFO; i += 2) {
    free(blocks[i]);
    blocks[i] = NULL;
  }
  size_t huge_sz = 9 * MiB;
  void *huge = malloc(huge_sz);
  if (huge) memset(huge, 6, huge_sz);
  sink = huge;
  test_malloc_stats(huge_sz);
  test_malloc_info(before_to, before_count, before_n, huge_sz);
  free(huge);
  for (int i = 1; i < NINFO; i += 2) free(blocks[i]);
  free(blocks);
}

int main(void) {
  long ps = sysconf(_SC_PAGESIZE);
  page_size = ps > 0 ? (size_t)ps : 4096;
  test_valloc();
  test_reallocarray();
  test_misc();
  test_mallinfo();
  test_heap_reports();
  test_libc_names();
  test_libc_allocations();
  return tap_done();
}

/* test-aligned.c -- aligned allocation: the mi_*_aligned family,
 * aligned_alloc, posix_memalign and memalign, for every power-of-two
 * alignment from 1 byte to 16 MiB and sizes from 0 to 5 MiB; and the error
 * results for alignments that are not allowed.
 *
 * One TAP line per (function, alignment); the sizes are looped inside, and
 * all blocks of one line stay live together until the end, so that writing
 * one cannot go unnoticed in another.
 */
#define _GNU_SOURCE
#include <mialloc.h>
#include "../tap.h"
#include "../errors.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)

static const size_t sizes[] = {0, 1, 7, 64, 1000, 4096, 70000, 600000, 5 * MiB};
#define NSIZES (sizeof sizes / sizeof sizes[0])
static const size_t offsets[] = {0, 8, 16, 100};
#define NOFFSETS (sizeof offsets / sizeof offsets[0])
#define MAX_ALIGN_SHIFT 24 /* 16 MiB */

static volatile size_t v_huge = SIZE_MAX / 2;
static volatile size_t v_size_max = SIZE_MAX;

/* ---- patterns ----------------------------------------------------------
 * Byte i of the pattern with seed s is tab[(s + i) % 251]: a period that is
 * prime, so it never lines up with a power-of-two stride, and cheap to write
 * and compare with memcpy/memcmp even for the 5 MiB blocks. */
#define PERIOD 251
#define CHUNK (PERIOD * 16)
static uint8_t tab[CHUNK + PERIOD];

static void tab_init(void) {
  for (size_t i = 0; i < sizeof tab; i++) {
    unsigned j = (unsigned)(i % PERIOD);
    tab[i] = (uint8_t)(j * 113u + (j >> 3) * 7u + 3u);
  }
}
static void fill(void *p, size_t n, unsigned seed) {
  uint8_t *b = p;
  const uint8_t *src = tab + seed % PERIOD;
  for (size_t i = 0; i < n; i += CHUNK) memcpy(b + i, src, n - i < CHUNK ? n - i : CHUNK);
}
static size_t verify(const void *p, size_t n, unsigned seed) {
  const uint8_t *b = p;
  const uint8_t *src = tab + seed % PERIOD;
  for (size_t i = 0; i < n; i += CHUNK) {
    size_t len = n - i < CHUNK ? n - i : CHUNK;
    if (memcmp(b + i, src, len) != 0)
      for (size_t j = 0; j < len; j++)
        if (b[i + j] != src[j]) return i + j;
  }
  return SIZE_MAX;
}
static size_t first_nonzero(const void *p, size_t from, size_t to) {
  const uint8_t *b = p;
  for (size_t i = from; i < to; i++)
    if (b[i] != 0) return i;
  return SIZE_MAX;
}
static bool aligned_to(const void *p, size_t a) { return ((uintptr_t)p & (a - 1)) == 0; }

/* Leave dirty freed memory of about this shape behind, so a zeroing call
 * that reuses it must really clear it. */
static void dirty(size_t size, size_t align) {
  void *d[3];
  for (int i = 0; i < 3; i++) {
    d[i] = mi_malloc_aligned(size, align);
    /* the block and a little past it: where a similar block will land */
    size_t us = d[i] ? mi_usable_size(d[i]) : 0;
    if (d[i]) memset(d[i], 0xA5, us < size + 64 * KiB ? us : size + 64 * KiB);
  }
  for (int i = 0; i < 3; i++) mi_free(d[i]);
}

/* Free in one of the ways a program may: rotate through them. */
static unsigned free_rot;
static void free_any(void *p, size_t size, size_t align) {
  switch (free_rot++ % 5) {
  case 0: mi_free(p); break;
  case 1: free(p); break;
  case 2: mi_free_aligned(p, align); break;
  case 3: mi_free_size_aligned(p, size, align); break;
  default: mi_free_size(p, size); break;
  }
}

/* A live block of one check line. */
typedef struct {
  unsigned char *p;
  size_t size;
  unsigned seed;
} live_t;

typedef struct {
  bool ok;
  int failures;
  live_t live[NSIZES * NOFFSETS * 2];
  size_t nlive;
  size_t align;
} line_t;

static void line_begin(line_t *L, size_t align) {
  L->ok = true;
  L->failures = 0;
  L->nlive = 0;
  L->align = align;
}

static void line_fail(line_t *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line_fail(line_t *L, const char *fmt, ...) {
  L->ok = false;
  if (L->failures++ < 3) {
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    tap_diag("%s", msg);
  }
}

/* Check a fresh block: non-NULL, p+offset aligned, usable >= size, owned,
 * zeroed if asked; then stamp it and keep it live. */
static void check_block(line_t *L, const char *fn, void *vp, size_t size, size_t offset, bool zero) {
  unsigned char *p = vp;
  size_t align = L->align;
  if (p == NULL) {
    line_fail(L, "%s(size %zu, align %zu, offset %zu) returned NULL (errno %d)", fn, size, align, offset, errno);
    return;
  }
  if (!aligned_to(p + offset, align))
    line_fail(L, "%s(size %zu, align %zu, offset %zu) = %p: p+offset not aligned", fn, size, align, offset, (void *)p);
  size_t us = mi_usable_size(p);
  if (us < size) line_fail(L, "%s(size %zu, align %zu, offset %zu): usable %zu < size", fn, size, align, offset, us);
  if (malloc_usable_size(p) != us)
    line_fail(L, "%s: malloc_usable_size %zu != mi_usable_size %zu", fn, malloc_usable_size(p), us);
  if (!mi_is_in_heap_region(p)) line_fail(L, "%s(size %zu, align %zu) = %p not in mialloc's heap", fn, size, align, (void *)p);
  if (zero) {
    size_t bad = first_nonzero(p, 0, size);
    if (bad != SIZE_MAX)
      line_fail(L, "%s(size %zu, align %zu, offset %zu): byte %zu is 0x%02x, not zero", fn, size, align, offset, bad, p[bad]);
  }
  unsigned seed = (unsigned)(L->nlive * 7 + size + align);
  fill(p, size, seed);
  L->live[L->nlive].p = p;
  L->live[L->nlive].size = size;
  L->live[L->nlive].seed = seed;
  L->nlive++;
}

/* Verify every live block of the line, free them, and print the line. */
static void line_end(line_t *L, const char *fn) {
  for (size_t i = 0; i < L->nlive; i++) {
    size_t bad = verify(L->live[i].p, L->live[i].size, L->live[i].seed);
    if (bad != SIZE_MAX)
      line_fail(L, "%s: block %p (size %zu) overwritten at byte %zu", fn, (void *)L->live[i].p, L->live[i].size, bad);
  }
  for (size_t i = 0; i < L->nlive; i++) free_any(L->live[i].p, L->live[i].size, L->align);
  TAP_OK(L->ok, "%s: alignment %zu, sizes 0 .. 5 MiB", fn, L->align);
}

/* ======================================================================= */

static void test_family(size_t align) {
  line_t L;

  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) check_block(&L, "mi_malloc_aligned", mi_malloc_aligned(sizes[k], align), sizes[k], 0, false);
  line_end(&L, "mi_malloc_aligned");

  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) {
    dirty(sizes[k], align);
    check_block(&L, "mi_zalloc_aligned", mi_zalloc_aligned(sizes[k], align), sizes[k], 0, true);
  }
  line_end(&L, "mi_zalloc_aligned");

  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) {
    dirty(sizes[k], align);
    size_t n = sizes[k];
    /* both shapes: n x 1 and (n/8) x 8 (+ remainder as 1-byte count) */
    void *p = (k & 1) ? mi_calloc_aligned(n, 1, align) : mi_calloc_aligned(n / 8, 8, align);
    check_block(&L, "mi_calloc_aligned", p, (k & 1) ? n : n / 8 * 8, 0, true);
  }
  line_end(&L, "mi_calloc_aligned");

  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++)
    for (size_t o = 0; o < NOFFSETS; o++)
      check_block(&L, "mi_malloc_aligned_at", mi_malloc_aligned_at(sizes[k], align, offsets[o]), sizes[k], offsets[o], false);
  line_end(&L, "mi_malloc_aligned_at");

  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) {
    dirty(sizes[k] + 100, align);
    for (size_t o = 0; o < NOFFSETS; o++) {
      check_block(&L, "mi_zalloc_aligned_at", mi_zalloc_aligned_at(sizes[k], align, offsets[o]), sizes[k], offsets[o], true);
      check_block(&L, "mi_calloc_aligned_at", mi_calloc_aligned_at(1, sizes[k], align, offsets[o]), sizes[k], offsets[o], true);
    }
  }
  line_end(&L, "mi_zalloc_aligned_at/mi_calloc_aligned_at");

  /* realloc: grow and shrink, content kept, alignment kept */
  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) {
    size_t s = sizes[k];
    unsigned char *p = mi_malloc_aligned(s, align);
    if (p == NULL) { line_fail(&L, "mi_malloc_aligned(%zu, %zu) NULL", s, align); continue; }
    fill(p, s, 101);
    size_t grow = s * 2 + 100;
    unsigned char *q = mi_realloc_aligned(p, grow, align);
    if (q == NULL) { line_fail(&L, "mi_realloc_aligned(%zu -> %zu, %zu) NULL", s, grow, align); mi_free(p); continue; }
    if (!aligned_to(q, align)) line_fail(&L, "mi_realloc_aligned(%zu -> %zu, %zu) = %p not aligned", s, grow, align, (void *)q);
    if (mi_usable_size(q) < grow) line_fail(&L, "mi_realloc_aligned grow: usable %zu < %zu", mi_usable_size(q), grow);
    size_t bad = verify(q, s, 101);
    if (bad != SIZE_MAX) line_fail(&L, "mi_realloc_aligned(%zu -> %zu, align %zu): byte %zu lost", s, grow, align, bad);
    fill(q, grow, 102);
    size_t shrink = s / 3;
    unsigned char *r = mi_realloc_aligned(q, shrink, align);
    if (r == NULL) { line_fail(&L, "mi_realloc_aligned shrink to %zu NULL", shrink); mi_free(q); continue; }
    if (!aligned_to(r, align)) line_fail(&L, "mi_realloc_aligned(-> %zu, %zu) = %p not aligned", shrink, align, (void *)r);
    bad = verify(r, shrink, 102);
    if (bad != SIZE_MAX) line_fail(&L, "mi_realloc_aligned shrink %zu -> %zu (align %zu): byte %zu lost", grow, shrink, align, bad);
    /* realloc to a stricter alignment must move if needed */
    size_t a2 = align < 4096 ? align * 4 : align;
    unsigned char *t = mi_realloc_aligned(r, shrink + 10, a2);
    if (t == NULL) { line_fail(&L, "mi_realloc_aligned to align %zu NULL", a2); mi_free(r); continue; }
    if (!aligned_to(t, a2)) line_fail(&L, "mi_realloc_aligned to stricter align %zu = %p", a2, (void *)t);
    bad = verify(t, shrink, 102);
    if (bad != SIZE_MAX) line_fail(&L, "mi_realloc_aligned to align %zu: byte %zu lost", a2, bad);
    mi_free(t);
    /* realloc_aligned_at */
    unsigned char *u = mi_malloc_aligned_at(s, align, 16);
    if (u == NULL) { line_fail(&L, "mi_malloc_aligned_at(%zu, %zu, 16) NULL", s, align); continue; }
    fill(u, s, 103);
    unsigned char *w = mi_realloc_aligned_at(u, grow, align, 16);
    if (w == NULL) { line_fail(&L, "mi_realloc_aligned_at NULL"); mi_free(u); continue; }
    if (!aligned_to(w + 16, align)) line_fail(&L, "mi_realloc_aligned_at(%zu, %zu, 16) = %p: p+16 not aligned", grow, align, (void *)w);
    bad = verify(w, s, 103);
    if (bad != SIZE_MAX) line_fail(&L, "mi_realloc_aligned_at(%zu -> %zu, %zu, 16): byte %zu lost", s, grow, align, bad);
    free(w);
  }
  /* realloc_aligned(NULL, ...) allocates */
  check_block(&L, "mi_realloc_aligned(NULL)", mi_realloc_aligned(NULL, 333, align), 333, 0, false);
  line_end(&L, "mi_realloc_aligned/mi_realloc_aligned_at");

  /* rezalloc / recalloc: bytes past the old size are zero */
  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) {
    size_t s = sizes[k];
    unsigned char *p = mi_malloc_aligned(s, align);
    if (p == NULL) { line_fail(&L, "mi_malloc_aligned(%zu, %zu) NULL", s, align); continue; }
    size_t us = mi_usable_size(p);
    memset(p, 0xA5, us);
    fill(p, s, 104);
    size_t grow = s * 2 + 4000;
    dirty(grow, align);
    unsigned char *q = mi_rezalloc_aligned(p, grow, align);
    if (q == NULL) { line_fail(&L, "mi_rezalloc_aligned(%zu -> %zu, %zu) NULL", s, grow, align); mi_free(p); continue; }
    if (!aligned_to(q, align)) line_fail(&L, "mi_rezalloc_aligned = %p not %zu-aligned", (void *)q, align);
    if (mi_usable_size(q) < grow) line_fail(&L, "mi_rezalloc_aligned: usable %zu < %zu", mi_usable_size(q), grow);
    size_t bad = verify(q, s, 104);
    if (bad != SIZE_MAX) line_fail(&L, "mi_rezalloc_aligned(%zu -> %zu, %zu): byte %zu lost", s, grow, align, bad);
    bad = first_nonzero(q, us, grow);
    if (bad != SIZE_MAX)
      line_fail(&L, "mi_rezalloc_aligned(%zu -> %zu, %zu): byte %zu (old usable %zu) is 0x%02x", s, grow, align, bad, us, q[bad]);
    us = mi_usable_size(q);
    memset(q, 0x5A, us);
    size_t grow2 = grow + 70000;
    dirty(grow2, align);
    unsigned char *r = mi_recalloc_aligned(q, grow2 / 4, 4, align);
    if (r == NULL) { line_fail(&L, "mi_recalloc_aligned NULL"); mi_free(q); continue; }
    if (!aligned_to(r, align)) line_fail(&L, "mi_recalloc_aligned = %p not %zu-aligned", (void *)r, align);
    size_t keep = us < grow2 / 4 * 4 ? us : grow2 / 4 * 4;
    for (size_t i = 0; i < keep; i++)
      if (r[i] != 0x5A) { line_fail(&L, "mi_recalloc_aligned: old byte %zu lost", i); break; }
    bad = first_nonzero(r, us, grow2 / 4 * 4);
    if (bad != SIZE_MAX) line_fail(&L, "mi_recalloc_aligned(-> %zu, %zu): byte %zu (old usable %zu) not zero", grow2, align, bad, us);
    mi_free(r);
  }
  check_block(&L, "mi_rezalloc_aligned(NULL)", mi_rezalloc_aligned(NULL, 4000, align), 4000, 0, true);
  line_end(&L, "mi_rezalloc_aligned/mi_recalloc_aligned");

  /* aligned_alloc */
  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) check_block(&L, "aligned_alloc", aligned_alloc(align, sizes[k]), sizes[k], 0, false);
  line_end(&L, "aligned_alloc");

  /* posix_memalign: alignment must be a multiple of sizeof(void *) */
  if (align >= sizeof(void *)) {
    line_begin(&L, align);
    for (size_t k = 0; k < NSIZES; k++) {
      void *p = (void *)&L; /* sentinel */
      int rc = posix_memalign(&p, align, sizes[k]);
      if (rc != 0) {
        line_fail(&L, "posix_memalign(%zu, %zu) returned %d", align, sizes[k], rc);
        continue;
      }
      if (p == (void *)&L) { line_fail(&L, "posix_memalign returned 0 but did not set the pointer"); continue; }
      check_block(&L, "posix_memalign", p, sizes[k], 0, false);
    }
    line_end(&L, "posix_memalign");
  }

  /* memalign */
  line_begin(&L, align);
  for (size_t k = 0; k < NSIZES; k++) check_block(&L, "memalign", memalign(align, sizes[k]), sizes[k], 0, false);
  line_end(&L, "memalign");
}

/* Many small aligned blocks live at once do not overlap. */
static void test_many(void) {
  enum { N = 4000 };
  static unsigned char *p[N];
  static size_t sz[N];
  bool ok = true;
  for (int i = 0; i < N; i++) {
    size_t align = (size_t)1 << (i % 13);
    sz[i] = 1 + (size_t)(i * 37) % 3000;
    p[i] = mi_malloc_aligned(sz[i], align);
    if (p[i] == NULL || !aligned_to(p[i], align)) {
      if (ok) tap_diag("mi_malloc_aligned(%zu, %zu) = %p", sz[i], align, (void *)p[i]);
      ok = false;
      continue;
    }
    fill(p[i], sz[i], (unsigned)i);
  }
  for (int i = 0; i < N; i++) {
    if (p[i] && verify(p[i], sz[i], (unsigned)i) != SIZE_MAX) {
      if (ok) tap_diag("block %d (%p, size %zu) overwritten", i, (void *)p[i], sz[i]);
      ok = false;
    }
  }
  for (int i = 0; i < N; i++) free(p[i]);
  TAP_OK(ok, "%d live aligned blocks (align 1 .. 4096) are aligned and independent", N);
}

/* Invalid alignments reach the allocator through a volatile: a constant
 * non-power-of-two in an alloc_align argument crashes clang 14's optimizer. */
static size_t opaque(size_t v) {
  volatile size_t x = v;
  return x;
}

static void test_invalid(void) {
  errno = 0;
  void *p = aligned_alloc(opaque(3), 16);
  TAP_OK(p == NULL && errno == EINVAL, "aligned_alloc(opaque(3), 16) == NULL, errno EINVAL (got %p, errno %d)", p, errno);
  free(p);
  errno = 0;
  p = aligned_alloc(opaque(0), 16);
  TAP_OK(p == NULL && errno == EINVAL, "aligned_alloc(opaque(0), 16) == NULL, errno EINVAL (got %p, errno %d)", p, errno);
  free(p);
  errno = 0;
  p = aligned_alloc(opaque(48), 100);
  TAP_OK(p == NULL && errno == EINVAL, "aligned_alloc(opaque(48), 100) == NULL, errno EINVAL (got %p, errno %d)", p, errno);
  free(p);
  errno = 0;
  p = mi_malloc_aligned(16, opaque(3));
  TAP_OK(p == NULL && errno == EINVAL, "mi_malloc_aligned(16, opaque(3)) == NULL, errno EINVAL (got %p, errno %d)", p, errno);
  mi_free(p);
  errno = 0;
  p = mi_zalloc_aligned(16, opaque(24));
  TAP_OK(p == NULL && errno == EINVAL, "mi_zalloc_aligned(16, opaque(24)) == NULL, errno EINVAL (got %p, errno %d)", p, errno);
  mi_free(p);
  errno = 0;
  p = mi_malloc_aligned(16, opaque(0));
  TAP_OK(p == NULL && errno == EINVAL, "mi_malloc_aligned(16, opaque(0)) == NULL, errno EINVAL (got %p, errno %d)", p, errno);
  mi_free(p);

  static const size_t bad_aligns[] = {3, 4, 0, 2, 1, 12, 24};
  for (size_t i = 0; i < sizeof bad_aligns / sizeof bad_aligns[0]; i++) {
    int marker;
    void *out = &marker;
    int rc = posix_memalign(&out, bad_aligns[i], 16);
    TAP_OK(rc == EINVAL && out == &marker, "posix_memalign(alignment %zu) == EINVAL, out-pointer untouched (rc %d)",
           bad_aligns[i], rc);
  }
  int marker;
  void *out = &marker;
  int saved_errno = errno = 1234;
  int rc = posix_memalign(&out, 64, v_huge);
  TAP_OK(rc == ENOMEM && out == &marker, "posix_memalign(64, SIZE_MAX/2) == ENOMEM, out-pointer untouched (rc %d)", rc);
  TAP_OK(errno == saved_errno, "posix_memalign failure leaves errno alone (errno %d)", errno);
  out = &marker;
  rc = posix_memalign(&out, 4096, v_size_max);
  TAP_OK(rc == ENOMEM && out == &marker, "posix_memalign(4096, SIZE_MAX) == ENOMEM (rc %d)", rc);

  errno = 0;
  p = mi_malloc_aligned(v_huge, 64);
  TAP_OK(p == NULL && errno == ENOMEM, "mi_malloc_aligned(SIZE_MAX/2, 64) == NULL, errno ENOMEM (errno %d)", errno);
  errno = 0;
  p = aligned_alloc(64, v_size_max);
  TAP_OK(p == NULL && errno == ENOMEM, "aligned_alloc(64, SIZE_MAX) == NULL, errno ENOMEM (errno %d)", errno);
  errno = 0;
  p = mi_calloc_aligned(v_huge, 3, 64);
  TAP_OK(p == NULL && errno == ENOMEM, "mi_calloc_aligned overflow == NULL, errno ENOMEM (errno %d)", errno);

  /* realloc_aligned with a bad alignment leaves the block alone */
  unsigned char *b = mi_malloc_aligned(100, 64);
  if (b) fill(b, 100, 55);
  void *b_saved = b;
  errno = 0;
  void *b2 = b ? mi_realloc_aligned(b, 200, opaque(48)) : NULL;
  int e = errno;
  b = b_saved;
  TAP_OK(b != NULL && b2 == NULL && e == EINVAL, "mi_realloc_aligned(p, 200, 48) == NULL, errno EINVAL (errno %d)", e);
  TAP_OK(b != NULL && verify(b, 100, 55) == SIZE_MAX, "failed mi_realloc_aligned leaves the block intact");
  mi_free(b);

  /* memalign rounds a non-power-of-two alignment up */
  static const struct { size_t asked, expect; } ma[] = {
      {3, 4}, {24, 32}, {100, 128}, {3000, 4096}, {5000, 8192}, {70000, 131072}, {600000, 1048576}};
  for (size_t i = 0; i < sizeof ma / sizeof ma[0]; i++) {
    unsigned char *m = memalign(ma[i].asked, 1000);
    bool ok = m != NULL && aligned_to(m, ma[i].expect) && mi_usable_size(m) >= 1000;
    if (m) {
      fill(m, 1000, 77);
      ok = ok && verify(m, 1000, 77) == SIZE_MAX;
    }
    TAP_OK(ok, "memalign(%zu, 1000) = %p is %zu-aligned", ma[i].asked, (void *)m, ma[i].expect);
    free(m);
  }
  /* as glibc: 2^63 (or an alignment that rounds up to it) cannot be met,
   * ENOMEM; past it the rounding overflows, EINVAL */
  static const struct { size_t asked; int err; } mbad[] = {
      {(size_t)1 << 63, ENOMEM}, {((size_t)1 << 62) + 1, ENOMEM}, {((size_t)1 << 63) + 1, EINVAL}, {SIZE_MAX, EINVAL}};
  for (size_t i = 0; i < sizeof mbad / sizeof mbad[0]; i++) {
    errno = 0;
    void *m = memalign(opaque(mbad[i].asked), 1);
    int e = errno;
    TAP_OK(m == NULL && e == mbad[i].err, "memalign(%#zx, 1) == NULL, errno %d (%d)", mbad[i].asked, mbad[i].err, e);
  }
}

int main(void) {
  tab_init();
  mi_register_error(on_error, NULL);
  for (int sh = 0; sh <= MAX_ALIGN_SHIFT; sh++) {
    test_family((size_t)1 << sh);
    mi_collect(true); /* give the freed huge spans back: keeps the RSS of the test modest */
  }
  test_many();
  /* blocks at an offset start off a 16-byte boundary (offsets 8 and 100):
   * their frees and reallocs are no misuse, unlike those of a pointer into
   * a plain block */
  TAP_OK(atomic_load(&errors) == 0, "no error reported by the valid calls above (%d reported, the last %d)",
         atomic_load(&errors), atomic_load(&last_error));
  mi_register_error(NULL, NULL);
  test_invalid();
  return tap_done();
}

/* alloc-posix.c -- the posix/glibc-style entry points, with their error
 * conventions: posix_memalign returns the error, the others set errno. */
#include "internal.h"
#include "tls.h"

static bool mia_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

mia_export size_t mi_malloc_size(const void *p) { return mia_usable_size(p); }
mia_export size_t mi_malloc_usable_size(const void *p) { return mia_usable_size(p); }

/* POSIX: alignment must be a power of two and a multiple of sizeof(void*);
 * otherwise EINVAL, and *p is left alone. */
mia_export int mi_posix_memalign(void **p, size_t alignment, size_t size) {
  if (p == NULL) return EINVAL;
  if (alignment % sizeof(void *) != 0 || !mia_is_pow2(alignment)) return mia_alloc_error(EINVAL, 1, size, alignment);
  int saved = errno;
  void *q = mia_malloc_aligned(mia_theap_get(), size, alignment, 0, false);
  if (q == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *p = q;
  return 0;
}

/* glibc rounds a non-power-of-two alignment up instead of failing, so the
 * only invalid alignments are those that round past the largest power of
 * two; one that cannot be met (2^63) is a lack of memory, as there. */
mia_export void *mi_memalign(size_t alignment, size_t size) {
  if (alignment > ((size_t)1 << (sizeof(size_t) * 8 - 1))) {
    errno = mia_alloc_error(EINVAL, 1, size, alignment);
    return NULL;
  }
  if (alignment < sizeof(void *)) alignment = sizeof(void *);
  if (!mia_is_pow2(alignment)) alignment = (size_t)1 << (64 - __builtin_clzl(alignment));
  return mia_malloc_aligned(mia_theap_get(), size, alignment, 0, false);
}

mia_export void *mi_aligned_alloc(size_t alignment, size_t size) {
  if (!mia_is_pow2(alignment)) {
    errno = mia_alloc_error(EINVAL, 1, size, alignment);
    return NULL;
  }
  return mia_malloc_aligned(mia_theap_get(), size, alignment, 0, false);
}

mia_export void *mi_valloc(size_t size) {
  return mia_malloc_aligned(mia_theap_get(), size, mia_prim_page_size(), 0, false);
}

mia_export void *mi_pvalloc(size_t size) {
  size_t psize = mia_prim_page_size();
  size_t rounded = (size + psize - 1) & ~(psize - 1);
  if (rounded < size) {
    errno = mia_alloc_error(EOVERFLOW, 1, size, psize);
    return NULL;
  }
  return mia_malloc_aligned(mia_theap_get(), rounded == 0 ? psize : rounded, psize, 0, false);
}

mia_export void *mi_reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return mia_count_overflow(count, size);
  return mi_realloc(p, total);
}

/* NetBSD's reallocarr: p points to the pointer; returns an errno value. */
mia_export int mi_reallocarr(void *p, size_t count, size_t size) {
  if (p == NULL) return EINVAL;
  void **op = (void **)p;
  int saved = errno;
  void *newp = mi_reallocarray(*op, count, size);
  if (newp == NULL && count != 0 && size != 0) {
    int err = errno;
    errno = saved;
    return err;
  }
  *op = newp;
  return 0;
}

/* alloc.c -- the mi_ allocation family.  The fast path itself is in
 * fastpath.h; everything else -- an empty free list, a first call in a new
 * thread, a size above 1 KiB -- goes through mia_malloc_generic. */
#include "internal.h"
#include "fastpath.h"

#include <limits.h>
#include <stdlib.h>

mia_export void *mi_malloc(size_t size) { return mia_malloc_inline(size); }

mia_export void *mi_malloc_small(size_t size) {
  return mia_theap_malloc(mia_theap_get(), size, false);
}

mia_export void *mi_zalloc_small(size_t size) { return mia_theap_malloc(mia_theap_get(), size, true); }

mia_export void *mi_zalloc(size_t size) { return mia_theap_malloc(mia_theap_get(), size, true); }

void *mia_count_overflow(size_t count, size_t size) {
  errno = mia_alloc_error(EOVERFLOW, count, size, 0);
  return NULL;
}

static bool mia_mul_overflow(size_t count, size_t size, size_t *total) {
  if (mia_unlikely(__builtin_mul_overflow(count, size, total))) {
    mia_count_overflow(count, size);
    return true;
  }
  return false;
}

mia_export void *mi_calloc(size_t count, size_t size) { return mia_calloc_inline(count, size); }

mia_export void *mi_mallocn(size_t count, size_t size) {
  size_t total;
  if (mia_mul_overflow(count, size, &total)) return NULL;
  return mi_malloc(total);
}

size_t mia_usable_size(const void *p) {
  const mia_page_t *page = mia_page_of(p);
  if (page == NULL) return 0;
  if (mia_unlikely(page->is_guarded)) return mia_guarded_usable(page, p);
#if MIALLOC_PADDING
  return mia_padding_usable(page, p);
#else
  if (mia_likely((mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED)) == 0 && !page->is_huge))
    return page->block_size;
  return mia_page_usable_of(page, p);
#endif
}

mia_export size_t mi_usable_size(const void *p) { return mia_usable_size(p); }

mia_export size_t mi_good_size(size_t size) {
  /* padded builds: the usable size is exactly what was asked for */
  if (mia_padded()) return size;
  if (size <= MIA_LARGE_MAX) {
    /* the answer is the thread's heap's (theap.c): set it up as the
     * thread's first malloc would */
    mia_theap_t *theap = mia_theap_get();
    if (mia_unlikely(theap == &mia_theap_empty)) theap = mia_thread_init_slow();
    return theap != NULL ? mia_theap_block_size(theap, size) : mia_bin_size[mia_bin_of(size)];
  }
  size_t mask = mia_prim_page_size() - 1;   /* a huge block's usable size (segment.c) */
  size_t rounded = (size + mask) & ~mask;
  return rounded < size ? size : rounded;
}

/* A zeroing realloc (mi_rezalloc, mi_recalloc) keeps p, now of newsize
 * bytes: the bytes it gives up are cleared, since a later one that grows
 * within the block zeroes only from the usable size on.  A huge block's
 * usable size moves to the new end instead (segment.c), which leaves at
 * most an OS page to clear. */
void mia_realloc_in_place(mia_page_t *page, void *p, size_t newsize, size_t usable) {
  if (page->is_huge && !mia_padded()) {
    mia_huge_set_used(page, (size_t)((uint8_t *)p - page->start) + newsize);
    usable = mia_page_usable_of(page, p);
  }
  if (newsize < usable) mia_memzero((uint8_t *)p + newsize, usable - newsize);
}

/* realloc: stay in place while the new size fits and does not waste more
 * than half the block; otherwise move.  On failure p is untouched.  A p
 * that is no live block gets NULL and EINVAL, after the report a free of
 * it would make (a foreign pointer, or one freed already).  A plain block
 * that stays without zeroing never gets here (mia_realloc_stays). */
static mia_noinline void *mia_realloc_generic(mia_theap_t *theap, void *p, size_t newsize, bool zero) {
  if (p == NULL) return mia_theap_malloc(theap, newsize, zero);
  mia_page_t *page;
  if (mia_unlikely(!mia_realloc_source_ok(p, &page))) return NULL;
  size_t size = mia_usable_size(p);
  if (newsize <= size && newsize >= size / 2 && !mia_annotated()) {
    if (mia_unlikely(zero)) mia_realloc_in_place(page, p, newsize, size);
    return p;
  }
  if (page->is_huge && newsize > MIA_LARGE_MAX && !mia_padded() && !mia_annotated()) {
    /* a huge span shrinks in place, and grows over free segments after it
     * (or into its own room past the usable size) */
    if (newsize <= size) {
      mia_huge_page_shrink(page, newsize + (size_t)((uint8_t *)p - page->start));
      if (zero) mia_realloc_in_place(page, p, newsize, size);
      return p;
    }
    if (newsize <= MIA_MAX_ALLOC_SIZE && mia_huge_page_grow(page, newsize + (size_t)((uint8_t *)p - page->start))) {
      if (zero) mia_memzero((uint8_t *)p + size, mia_page_usable_of(page, p) - size);
      return p;
    }
  }
  void *newp = mia_theap_malloc(theap, newsize, zero);
  if (mia_unlikely(newp == NULL)) return NULL;
  mia_annot_accessible(p, size < newsize ? size : newsize);
  mia_memcpy(newp, p, size < newsize ? size : newsize);
  mi_free(p);
  return newp;
}

void *mia_realloc_zero(mia_theap_t *theap, void *p, size_t newsize, bool zero) {
  if (!zero && mia_realloc_stays(p, newsize)) return p;
  return mia_realloc_generic(theap, p, newsize, zero);
}

mia_export void *mi_realloc(void *p, size_t newsize) {
  if (mia_realloc_stays(p, newsize)) return p;
  return mia_realloc_generic(mia_theap_get(), p, newsize, false);
}

mia_export void *mi_expand(void *p, size_t newsize) {
  if (p == NULL) return NULL;
  if (newsize <= mia_usable_size(p)) return p;
  /* a huge block may take more of its span's room (segment.c) */
  mia_page_t *page = mia_page_of(p);
  if (page != NULL && page->is_huge && !mia_padded() && !mia_annotated() && newsize <= MIA_MAX_ALLOC_SIZE &&
      mia_huge_expand(page, (size_t)((uint8_t *)p - page->start) + newsize))
    return p;
  return NULL;
}

mia_export void *mi_reallocn(void *p, size_t count, size_t size) {
  size_t total;
  if (mia_mul_overflow(count, size, &total)) return NULL;
  return mi_realloc(p, total);
}

mia_export void *mi_reallocf(void *p, size_t newsize) {
  void *newp = mi_realloc(p, newsize);
  if (newp == NULL && p != NULL) mi_free(p);
  return newp;
}

mia_export void *mi_rezalloc(void *p, size_t newsize) { return mia_realloc_zero(mia_theap_get(), p, newsize, true); }

mia_export void *mi_recalloc(void *p, size_t count, size_t size) {
  size_t total;
  if (mia_mul_overflow(count, size, &total)) return NULL;
  return mi_rezalloc(p, total);
}

char *mia_strdup(mia_theap_t *theap, const char *s) {
  if (s == NULL) return NULL;
  size_t n = strlen(s);
  char *t = mia_theap_malloc(theap, n + 1, false);
  if (t != NULL) memcpy(t, s, n + 1);
  return t;
}

char *mia_strndup(mia_theap_t *theap, const char *s, size_t n) {
  if (s == NULL) return NULL;
  size_t len = strnlen(s, n);
  char *t = mia_theap_malloc(theap, len + 1, false);
  if (t != NULL) {
    memcpy(t, s, len);
    t[len] = 0;
  }
  return t;
}

char *mia_realpath(mia_theap_t *theap, const char *fname, char *resolved_name) {
  if (resolved_name != NULL) return realpath(fname, resolved_name);
  char buf[PATH_MAX];
  char *r = realpath(fname, buf);
  return r == NULL ? NULL : mia_strdup(theap, buf);
}

mia_export char *mi_strdup(const char *s) { return mia_strdup(mia_theap_get(), s); }
mia_export char *mi_strndup(const char *s, size_t n) { return mia_strndup(mia_theap_get(), s, n); }
mia_export char *mi_realpath(const char *fname, char *resolved_name) {
  return mia_realpath(mia_theap_get(), fname, resolved_name);
}

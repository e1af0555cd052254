/* alloc-aligned.c -- aligned allocation for any power-of-two alignment.
 *
 * Blocks of a bin start at multiples of the block size from a 64 KiB-aligned
 * page start, so a block whose size is a multiple of the alignment is
 * aligned already.  Otherwise we over-allocate and hand out an aligned
 * pointer inside the block; the page is flagged so free finds the block
 * start.  Alignments beyond a slice come from huge spans.
 */
#include "internal.h"
#include "tls.h"
#include "fastpath.h"

static bool mia_is_pow2(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

static void *mia_malloc_aligned_impl(mia_theap_t *theap, size_t size, size_t alignment, size_t offset,
                                     bool zero);

/* A sampled block's pointer sits after the profiler's header, aligned to
 * 16 only: stronger alignments are served unsampled. */
static mia_noinline void *mia_malloc_aligned_unsampled(mia_theap_t *theap, size_t size, size_t alignment,
                                                       size_t offset, bool zero) {
  if (theap == &mia_theap_empty) {
    theap = mia_thread_init_slow();
    if (theap == NULL) { errno = ENOMEM; return NULL; }
  }
  bool was = theap->in_sample;
  theap->in_sample = true;
  void *p = mia_malloc_aligned_impl(theap, size, alignment, offset, zero);
  theap->in_sample = was;
  return p;
}

static void *mia_malloc_aligned_sampling(mia_theap_t *theap, size_t size, size_t alignment, size_t offset,
                                         bool zero) {
  if (mia_unlikely(mia_sampling_on()) && (alignment > 16 || offset != 0))
    return mia_malloc_aligned_unsampled(theap, size, alignment, offset, zero);
  return mia_malloc_aligned_impl(theap, size, alignment, offset, zero);
}

void *mia_malloc_aligned(mia_theap_t *theap, size_t size, size_t alignment, size_t offset, bool zero) {
  /* tools builds zero after declaring the block (see fastpath.h) */
  bool zero_after = MIA_ANNOTATED && zero;
  if (zero_after) zero = false;
#if MIALLOC_PADDING
  /* room for the padding record after the program's bytes */
  if (mia_unlikely(size > MIA_MAX_ALLOC_SIZE)) {
    errno = mia_alloc_error(EOVERFLOW, 1, size, alignment);
    return NULL;
  }
  /* debug builds check the block's freed fill before it is zeroed */
  bool zero_here = MIALLOC_DEBUG && zero;
  void *p = mia_malloc_aligned_sampling(theap, mia_padded_request(size), alignment, offset, zero && !zero_here);
  if (p != NULL && mia_page_of(p)->is_guarded) {
    /* guarded blocks check themselves; a reused slot is not zero */
    if (zero_here) memset(p, 0, size);
  } else if (p != NULL) {
    /* a block at an alignment of 16 or less may carry a profiler header */
    if (MIALLOC_DEBUG) mia_checked_handout(p, size, zero_here, alignment > 16 || offset != 0);
    mia_padding_set(p, size);
  }
#else
  void *p = mia_malloc_aligned_sampling(theap, size, alignment, offset, zero);
#endif
  if (MIA_ANNOTATED && p != NULL) {
    mia_annot_alloc(p, size, zero);
    if (zero_after) mia_annot_zero(p, size);
  }
  return p;
}

static void *mia_malloc_aligned_impl(mia_theap_t *theap, size_t size, size_t alignment, size_t offset,
                                     bool zero) {
  if (mia_unlikely(!mia_is_pow2(alignment))) {
    errno = mia_alloc_error(EINVAL, 1, size, alignment);
    return NULL;
  }
  if (mia_unlikely(size > MIA_MAX_ALLOC_SIZE || alignment > MIA_MAX_ALLOC_SIZE)) {
    errno = mia_alloc_error(EOVERFLOW, 1, size, alignment);
    return NULL;
  }
  if (size == 0) size = 1;
  /* natural alignment: a bin whose block size is a multiple of the
   * alignment has every block aligned (pages start 64 KiB-aligned).  Take
   * the smallest such bin up to twice the size -- a power-of-two bin always
   * qualifies -- so the page needs no HAS_ALIGNED flag (which would send
   * all its frees down the slow path) and no padding is wasted. */
  if (offset == 0 && alignment <= MIA_SLICE_SIZE && size <= MIA_LARGE_MAX) {
    size_t limit = 2 * (size > alignment ? size : alignment);
    if (limit > MIA_LARGE_MAX) limit = MIA_LARGE_MAX;
    for (uint8_t bin = mia_bin_of(size); bin < MIA_BIN_HUGE && mia_bin_size[bin] <= limit; bin++) {
      if ((mia_bin_size[bin] & (alignment - 1)) == 0)
        return mia_malloc_generic(mia_bin_size[bin], theap, zero);
    }
  }
  size_t padded = size + alignment - 1;
  if (alignment <= MIA_MAX_ALIGN_IN_PAGE && padded <= MIA_LARGE_MAX) {
    uint8_t *block = mia_malloc_generic(padded, theap, zero);
    if (block == NULL) return NULL;
    uintptr_t aligned = (((uintptr_t)block + offset + alignment - 1) & ~(uintptr_t)(alignment - 1)) - offset;
    if (aligned != (uintptr_t)block) {
      mia_page_t *page = mia_page_of(block);
      if (!(mia_page_flags(page) & MIA_PAGE_HAS_ALIGNED)) mia_page_add_flag(page, MIA_PAGE_HAS_ALIGNED);
      /* only a 16-byte boundary can be a former block's start, and there
       * the word is inside this block */
      if ((aligned & 15) == 0) mia_block_forget_mark((void *)aligned);
    }
    return (void *)aligned;
  }
  /* huge: a span whose block is placed at the aligned address */
  if (theap == &mia_theap_empty) {
    theap = mia_thread_init_slow();
    if (theap == NULL) { errno = mia_alloc_error(ENOMEM, 1, size, alignment); return NULL; }
  }
  mia_page_t *page = mia_huge_page_alloc(theap->tld->heap, size + offset, alignment);
  if (page == NULL) {
    errno = mia_alloc_error(ENOMEM, 1, size, alignment);
    return NULL;
  }
  uintptr_t aligned = (((uintptr_t)page->start + offset + alignment - 1) & ~(uintptr_t)(alignment - 1)) - offset;
  /* the block does not start at page->start: frees of it are not checked
   * for interior pointers (mia_huge_interior) */
  if ((uint8_t *)aligned != page->start) mia_page_add_flag(page, MIA_PAGE_HAS_ALIGNED);
  mia_huge_set_used(page, (size_t)(aligned - (uintptr_t)page->start) + size);
  if (!page->is_zero_init && (aligned & 15) == 0) mia_block_forget_mark((void *)aligned);
  if (zero && !page->is_zero_init) mia_memzero((void *)aligned, mia_page_usable_of(page, (void *)aligned));
  return (void *)aligned;
}

mia_export void *mi_malloc_aligned_at(size_t size, size_t alignment, size_t offset) {
  return mia_malloc_aligned(mia_theap_get(), size, alignment, offset, false);
}

mia_export void *mi_malloc_aligned(size_t size, size_t alignment) {
  return mia_malloc_aligned(mia_theap_get(), size, alignment, 0, false);
}

mia_export void *mi_zalloc_aligned_at(size_t size, size_t alignment, size_t offset) {
  return mia_malloc_aligned(mia_theap_get(), size, alignment, offset, true);
}

mia_export void *mi_zalloc_aligned(size_t size, size_t alignment) {
  return mia_malloc_aligned(mia_theap_get(), size, alignment, 0, true);
}

mia_export void *mi_calloc_aligned_at(size_t count, size_t size, size_t alignment, size_t offset) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = mia_alloc_error(EOVERFLOW, count, size, alignment);
    return NULL;
  }
  return mia_malloc_aligned(mia_theap_get(), total, alignment, offset, true);
}

mia_export void *mi_calloc_aligned(size_t count, size_t size, size_t alignment) {
  return mi_calloc_aligned_at(count, size, alignment, 0);
}

void *mia_realloc_aligned(mia_theap_t *theap, void *p, size_t newsize, size_t alignment, size_t offset,
                          bool zero) {
  if (p == NULL) return mia_malloc_aligned(theap, newsize, alignment, offset, zero);
  if (!mia_is_pow2(alignment)) {
    errno = mia_alloc_error(EINVAL, 1, newsize, alignment);
    return NULL;
  }
  mia_page_t *page;
  if (mia_unlikely(!mia_realloc_source_ok(p, &page))) return NULL;
  size_t size = mia_usable_size(p);
  if (newsize <= size && newsize >= size / 2 && (((uintptr_t)p + offset) & (alignment - 1)) == 0 &&
      !mia_annotated()) {
    if (zero) mia_realloc_in_place(page, p, newsize, size);
    return p;
  }
  void *newp = mia_malloc_aligned(theap, newsize, alignment, offset, zero);
  if (newp == NULL) return NULL;
  mia_annot_accessible(p, size < newsize ? size : newsize);
  mia_memcpy(newp, p, size < newsize ? size : newsize);
  mi_free(p);
  return newp;
}

mia_export void *mi_realloc_aligned_at(void *p, size_t newsize, size_t alignment, size_t offset) {
  return mia_realloc_aligned(mia_theap_get(), p, newsize, alignment, offset, false);
}

mia_export void *mi_realloc_aligned(void *p, size_t newsize, size_t alignment) {
  return mia_realloc_aligned(mia_theap_get(), p, newsize, alignment, 0, false);
}

mia_export void *mi_rezalloc_aligned_at(void *p, size_t newsize, size_t alignment, size_t offset) {
  return mia_realloc_aligned(mia_theap_get(), p, newsize, alignment, offset, true);
}

mia_export void *mi_rezalloc_aligned(void *p, size_t newsize, size_t alignment) {
  return mia_realloc_aligned(mia_theap_get(), p, newsize, alignment, 0, true);
}

mia_export void *mi_recalloc_aligned_at(void *p, size_t count, size_t size, size_t alignment, size_t offset) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = mia_alloc_error(EOVERFLOW, count, size, alignment);
    return NULL;
  }
  return mia_realloc_aligned(mia_theap_get(), p, total, alignment, offset, true);
}

mia_export void *mi_recalloc_aligned(void *p, size_t count, size_t size, size_t alignment) {
  return mi_recalloc_aligned_at(p, count, size, alignment, 0);
}

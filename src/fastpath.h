/* fastpath.h -- the malloc and free fast paths, inline so that both the mi_
 * entry points and the overridden standard names contain them directly
 * (an alias cannot cross files, and a tail call would cost a jump).
 */
#ifndef MIALLOC_FASTPATH_H
#define MIALLOC_FASTPATH_H

#include "internal.h"
#include "tls.h"

/* Find the theap (one TLS load), index the direct table by word size, pop
 * the page's free list.  An empty list -- also the empty page every entry
 * of a new thread's table points to -- sends us to the generic path. */
static inline void *mia_theap_malloc_small(mia_theap_t *theap, size_t size, bool zero) {
  mia_page_t *page = theap->pages_direct[mia_wsize(size)];
  mia_block_t *block = page->free;
  if (mia_unlikely(block == NULL)) return mia_malloc_generic(size, theap, zero);
  return mia_page_pop(page, zero);
}

static inline void *mia_theap_malloc_raw(mia_theap_t *theap, size_t size, bool zero) {
  if (mia_likely(size <= MIA_DIRECT_SIZE_MAX)) return mia_theap_malloc_small(theap, size, zero);
  return mia_malloc_generic(size, theap, zero);
}

/* Secure and debug builds put a checked padding record after every block
 * (check.c); release builds go straight to the fast path. */
static inline void *mia_theap_malloc(mia_theap_t *theap, size_t size, bool zero) {
#if MIA_ANNOTATED
  /* tools builds: the block is declared first, then zeroed (it may still
   * be marked freed until it is declared) */
#if MIALLOC_PADDING
  void *p = mia_theap_malloc_checked(theap, size, false);
#else
  void *p = mia_theap_malloc_raw(theap, size, false);
#endif
  if (p != NULL) {
    mia_annot_alloc(p, size, false);
    if (zero) mia_annot_zero(p, size);
  }
  return p;
#elif MIALLOC_PADDING
  return mia_theap_malloc_checked(theap, size, zero);
#else
  return mia_theap_malloc_raw(theap, size, zero);
#endif
}

static inline void *mia_malloc_inline(size_t size) {
  return mia_theap_malloc(mia_theap_get(), size, false);
}

/* The fast path alone, for callers with a slow path of their own
 * (operator new's new-handler loop): NULL where malloc would go on to the
 * generic path, so the caller's fallback is a tail call and its fast path
 * keeps no frame.  Builds that check or annotate every block take the
 * whole path. */
static inline void *mia_malloc_fast_only(size_t size) {
#if MIA_ANNOTATED || MIALLOC_PADDING
  return mia_malloc_inline(size);
#else
  if (mia_unlikely(size > MIA_DIRECT_SIZE_MAX)) return NULL;
  mia_page_t *page = mia_theap_get()->pages_direct[mia_wsize(size)];
  if (mia_unlikely(page->free == NULL)) return NULL;
  return mia_page_pop(page, false);
#endif
}

/* The overflow report is a tail call, so calloc's fast path keeps no frame. */
static inline void *mia_calloc_inline(size_t count, size_t size) {
  size_t total;
  if (mia_unlikely(__builtin_mul_overflow(count, size, &total))) return mia_count_overflow(count, size);
  return mia_theap_malloc(mia_theap_get(), total, true);
}

/* A block freed by the thread that owns its page goes onto local_free. */
static inline void mia_free_local(mia_page_t *page, void *p) {
  mia_block_t *block = (mia_block_t *)p;
  mia_block_set_next(page, block, page->local_free);
  mia_block_set_free_mark(block);
  page->local_free = block;
  if (mia_unlikely(--page->used == 0)) mia_page_retire(page);
}

/* One page-map lookup and one compare: a block freed by the thread that
 * owns its page, in a page with no special flags, goes onto local_free
 * (unless it carries the free mark: a tail call checks that case). */
static inline void mia_free_raw(mia_page_t *page, void *p) {
  if (mia_likely(mia_page_free_key(page) == mia_prim_thread_id())) {
    if (mia_unlikely(mia_block_marked_free(p))) {
      mia_free_marked(p, page);
      return;
    }
    mia_free_local(page, p);
    return;
  }
  mia_free_generic(p, page);
}

#if MIALLOC_SECURE && !MIALLOC_PADDING
/* Secure builds check every free without a padding record: p must be a
 * block start below the carved part of its page, and it must not carry the
 * free mark (else it may be free already: the lists are searched, see
 * check.c).  The owner test comes first: free_key holds
 * the page's flags too, so a match also rules out huge, guarded, aligned
 * and sampled pages, which leaves the checks a plain page needs.  Every
 * other case is a tail call, so the fast path keeps no frame. */
static inline void mia_free_secure(void *p) {
  mia_page_t *page = mia_page_of(p);
  if (mia_unlikely(page == NULL)) {
    if (p != NULL) mia_free_invalid("free", p);
    return;
  }
  if (mia_unlikely(mia_page_free_key(page) != mia_prim_thread_id() || mia_block_index_exact(page, p) >= page->capacity)) {
    mia_free_secure_slow(page, p);
    return;
  }
  if (mia_unlikely(mia_block_looks_free(page, p))) {
    mia_free_secure_suspect(page, p);
    return;
  }
  mia_free_local(page, p);
}
#endif

/* A block of a plain page (no aligned, sampled or held blocks; not huge,
 * not guarded) that passes the checks the build's free makes first: no
 * padding record to consult, and it does not look free. */
static inline bool mia_realloc_plain_live(const mia_page_t *page, void *p) {
  bool plain = (mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED | MIA_PAGE_HAS_HELD)) == 0 &&
               !page->is_huge && !page->is_guarded;
#if MIALLOC_SECURE && !MIALLOC_PADDING
  return plain && mia_block_index_exact(page, p) < mia_page_capacity(page) && !mia_block_looks_free(page, p);
#elif MIA_FREE_MARK
  return plain && ((uintptr_t)p & 15) == 0 && !mia_block_marked_free(p);
#else
  (void)plain, (void)p;
  return false;
#endif
}

/* realloc's pointer: may realloc keep or move it?  Not when it is no
 * live block: what a free of it would report is reported (a foreign
 * pointer; one freed already, check.c), errno is set to EINVAL and realloc
 * leaves it alone.  The common case is decided inline. */
static inline bool mia_realloc_source_ok(void *p, mia_page_t **page_out) {
  mia_page_t *page = *page_out = mia_page_of(p);
  if (mia_unlikely(page == NULL)) {
    mia_free_invalid("realloc", p);
    errno = EINVAL;
    return false;
  }
  if (mia_likely(mia_realloc_plain_live(page, p))) return true;
  if (mia_realloc_check(page, p)) return true;
  errno = EINVAL;
  return false;
}

/* realloc's most common case: a live block of a plain page that the new
 * size fits and fills at least half of stays where it is.  Decided with
 * one page-map lookup and no frame: a loop growing a string a few bytes a
 * time (`s = realloc(s, len + n + 1)`, bench/strbuild) moves it only when
 * it outgrows its size class.  NULL, foreign and padded blocks go on to
 * the full path. */
static inline bool mia_realloc_stays(void *p, size_t newsize) {
  if (mia_padded() || mia_annotated()) return false;
  mia_page_t *page = mia_page_of(p);
  if (page == NULL) return false;
  size_t bsize = page->block_size;
  return newsize <= bsize && newsize >= bsize / 2 && mia_realloc_plain_live(page, p);
}

static inline void mia_free_inline(void *p) {
#if MIA_ANNOTATED
  mia_annot_free(p);
#endif
#if MIALLOC_PADDING
  mia_free_checked(p);
#elif MIALLOC_SECURE
  mia_free_secure(p);
#else
  /* the page map's range test, with the block-start alignment in the same
   * mask: a pointer off a 16-byte boundary costs nothing more to catch */
  if (mia_unlikely((uintptr_t)p & MIA_FREE_ODD_BITS)) {
    mia_free_odd(p);
    return;
  }
  mia_page_t *page = mia_page_of_in_range(p);
  if (mia_unlikely(page == NULL)) {
    if (p != NULL) mia_free_invalid("free", p);
    return;
  }
  mia_free_raw(page, p);
#endif
}

#endif

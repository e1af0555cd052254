/* check.c -- misuse detection: the double-free check of release builds
 * (MIA_FREE_MARK in internal.h), and the checks of secure and debug builds.
 *
 * Padded builds (--enable-debug) end every block with a
 * 16-byte padding record: a canary keyed by the block's address and the
 * process secret, and the distance from the end of the program's bytes to
 * the record.  The bytes in between are filled with a pattern.  A free
 * checks the canary and the pattern (heap overflow), whether the canary
 * says "freed" (double free), and whether the pointer is where a block
 * starts (interior or never-allocated pointers); then marks the canary
 * freed.  Debug builds also fill freed memory and check it when the block
 * is handed out again (a write after free).
 *
 * Every finding goes through mia_error: the message names the pointer and
 * the block size, the error callback gets an errno-style code, and
 * MIALLOC_ABORT_ON_ERROR decides whether the program goes on.
 */
#include "internal.h"
#include "fastpath.h"

#define MIA_PAD_FILL   0xde     /* between the program's bytes and the record */
#define MIA_FREED_FILL 0xdf     /* debug: freed memory */
#define MIA_FRESH_FILL 0xd0     /* debug: handed-out memory not asked to be zero */
#define MIA_PAD_CHECK  8        /* pattern bytes checked (and written) per block */

/* corrupted free-list links reported so far: mi_debug_check compares */
static _Atomic(size_t) mia_corruptions;
#define MIA_UAF_CHECK  1024     /* debug: freed bytes checked when reused */

typedef struct mia_padding_s {
  uint64_t canary;
  uint64_t delta;     /* bytes from the end of the program's bytes to here */
} mia_padding_t;

/* The one report of a block that is free already, in every build and
 * from every check that finds one: a second free, or a realloc (the same
 * kind of misuse, the same code) that would hand the block out twice. */
static void mia_report_freed(const char *op, size_t block_size, const void *p) {
  if (op[0] == 'r')
    mia_error(EAGAIN, "realloc: %p was freed already: a use after free (block of %zu bytes); it is left alone\n", p,
              block_size);
  else
    mia_error(EAGAIN, "free: double free of %p (block of %zu bytes)\n", p, block_size);
}

void mia_report_double_free(const mia_page_t *page, const void *p) { mia_report_freed("free", page->block_size, p); }

#if MIALLOC_PADDING

static uint8_t *mia_block_end(const mia_page_t *page, const uint8_t *block) {
  return (page->is_huge ? page->start : (uint8_t *)block) + page->block_size;
}

static mia_padding_t *mia_padding_of(const mia_page_t *page, const uint8_t *block) {
  return (mia_padding_t *)(mia_block_end(page, block) - MIA_PADDING_SIZE);
}

static uint64_t mia_canary_live(const mia_padding_t *pad) {
  return (mia_process_secret ^ (uint64_t)(uintptr_t)pad) * 0x9e3779b97f4a7c15ull | 1;
}

static uint64_t mia_canary_freed(const mia_padding_t *pad) { return ~mia_canary_live(pad); }

#define MIA_PAD_WORD 0xdedededededededeull

/* The pattern after the program's bytes: one unaligned word when there is
 * room (a 1-byte overflow changes its first byte), else byte by byte. */
static inline void mia_slack_fill(uint8_t *end, size_t delta) {
  if (mia_likely(delta >= 8)) {
    uint64_t w = MIA_PAD_WORD;
    memcpy(end, &w, 8);
  } else {
    for (size_t i = 0; i < delta; i++) end[i] = MIA_PAD_FILL;
  }
}

static inline bool mia_slack_intact(const uint8_t *end, size_t delta) {
  if (mia_likely(delta >= 8)) {
    uint64_t w;
    memcpy(&w, end, 8);
    return w == MIA_PAD_WORD;
  }
  for (size_t i = 0; i < delta; i++)
    if (end[i] != MIA_PAD_FILL) return false;
  return true;
}

/* Record the program's size for the block holding p. */
void mia_padding_set(void *p, size_t size) {
  mia_page_t *page = mia_page_of(p);
  uint8_t *block = mia_page_block_start(page, p);
  mia_padding_t *pad = mia_padding_of(page, block);
  uint8_t *end = (uint8_t *)p + size;
  size_t delta = (size_t)((uint8_t *)pad - end);
  mia_slack_fill(end, delta);
  pad->delta = delta;
  pad->canary = mia_canary_live(pad);
}

size_t mia_padding_usable(const mia_page_t *page, const void *p) {
  const uint8_t *block = mia_page_block_start(page, p);
  const mia_padding_t *pad = mia_padding_of(page, block);
  if (pad->canary != mia_canary_live(pad)) return 0;
  const uint8_t *end = (const uint8_t *)pad - pad->delta;
  return end > (const uint8_t *)p ? (size_t)(end - (const uint8_t *)p) : 0;
}

/* Fresh blocks count as freed: a free of one is a free of a block that
 * was never handed out. */
void mia_check_fresh_blocks(mia_page_t *page, uint8_t *first, size_t n) {
  for (size_t i = 0; i < n; i++) {
    uint8_t *block = first + i * page->block_size;
    mia_padding_t *pad = mia_padding_of(page, block);
#if MIALLOC_DEBUG
    memset(block + sizeof(mia_block_t), MIA_FREED_FILL,
           (size_t)((uint8_t *)pad - block) - sizeof(mia_block_t));
#endif
    pad->canary = mia_canary_freed(pad);
  }
}

/* The size messages name: what the program could use of the block. */
static size_t mia_size_class(const mia_page_t *page) {
  return page->is_huge ? page->block_size : page->block_size - MIA_PADDING_SIZE;
}

/* Is p a block mialloc handed out and has not taken back?  Reports (as
 * a problem of op, "free" or "realloc") and returns false when the call
 * must leave p alone. */
static bool mia_check_free_ptr(mia_page_t *page, void *p, uint8_t **block_out, const char *op) {
  uint8_t *block = mia_page_block_start(page, p);
  *block_out = block;
  if (!page->is_huge) {
    size_t index = (size_t)(block - page->start) / page->block_size;
    if (index >= mia_page_capacity(page)) {
      mia_error(EINVAL, "%s: pointer %p was never allocated (in a page of %zu-byte blocks)\n", op, p,
                mia_size_class(page));
      return false;
    }
    if ((uint8_t *)p != block && !(mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED))) {
      mia_error(EINVAL, "%s: pointer %p points into the middle of the %zu-byte block at %p\n", op, p,
                mia_size_class(page), (void *)block);
      return false;
    }
  } else if (mia_huge_interior(page, p)) {
    mia_report_huge_interior(op, page, p);
    return false;
  }
  mia_padding_t *pad = mia_padding_of(page, block);
  if (pad->canary == mia_canary_freed(pad)) {
    size_t asked = pad->delta <= page->block_size - MIA_PADDING_SIZE
                       ? (size_t)((uint8_t *)pad - pad->delta - (uint8_t *)p) : mia_size_class(page);
    if (op[0] == 'r') mia_report_freed(op, mia_size_class(page), p);
    else mia_error(EAGAIN, "free: double free of %p (%zu bytes; block of %zu bytes)\n", p, asked, mia_size_class(page));
    return false;
  }
  if (pad->canary != mia_canary_live(pad)) {
    mia_error(EOVERFLOW, "%s: heap overflow past block %p (block of %zu bytes): its canary was overwritten\n",
              op, p, mia_size_class(page));
    return true;   /* ours all the same: free it */
  }
  uint8_t *end = (uint8_t *)pad - pad->delta;
  if ((uint8_t *)p > end) {
    mia_error(EINVAL, "%s: pointer %p points past the end of the %zu-byte block at %p\n", op, p,
              mia_size_class(page), (void *)block);
    return false;
  }
  size_t check = pad->delta < MIA_PAD_CHECK ? pad->delta : MIA_PAD_CHECK;
  for (size_t i = 0; i < check; i++) {
    if (end[i] != MIA_PAD_FILL) {
      mia_error(EOVERFLOW, "%s: heap overflow past block %p (%zu bytes asked, block of %zu bytes): "
                "byte %zu past the end was overwritten\n", op, p, (size_t)(end - (uint8_t *)p),
                mia_size_class(page), i);
      break;
    }
  }
  return true;
}

/* The common case, without a division: p is a block start exactly when
 * the record one block size further holds a live canary for its address
 * (an interior pointer lands on bytes that cannot hold that canary). */
static inline bool mia_free_checked_fast(mia_page_t *page, void *p) {
  if (mia_unlikely((mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED)) || page->is_huge ||
                   page->is_guarded))
    return false;
  uint8_t *rec = (uint8_t *)p + page->block_size - MIA_PADDING_SIZE;
  if (mia_unlikely(rec + MIA_PADDING_SIZE > page->start + (size_t)page->slice_count * MIA_SLICE_SIZE ||
                   (uint8_t *)p < page->start))
    return false;
  mia_padding_t *pad = (mia_padding_t *)rec;
  if (mia_unlikely(pad->canary != mia_canary_live(pad) || pad->delta > page->block_size - MIA_PADDING_SIZE))
    return false;
  uint8_t *end = rec - pad->delta;
  if (mia_unlikely(!mia_slack_intact(end, pad->delta))) return false;
#if MIALLOC_DEBUG
  memset((uint8_t *)p + sizeof(mia_block_t), MIA_FREED_FILL, (size_t)(rec - (uint8_t *)p) - sizeof(mia_block_t));
#endif
  pad->canary = mia_canary_freed(pad);
  mia_free_raw(page, p);
  return true;
}

/* The checked free: validate, mark freed, then the ordinary free. */
void mia_free_checked(void *p) {
  mia_page_t *page = mia_page_of(p);
  if (page == NULL) {
    if (p != NULL) mia_free_invalid("free", p);
    return;
  }
  if (mia_likely(mia_free_checked_fast(page, p))) return;
  if (page->is_guarded) {
    mia_free_generic(p, page);
    return;
  }
  uint8_t *block;
  if (!mia_check_free_ptr(page, p, &block, "free")) return;
  mia_padding_t *pad = mia_padding_of(page, block);
  /* the profiler's header goes with the fill below: report it first (the
   * cookie is cleared, so the ordinary free does not report it again) */
  if (mia_page_flags(page) & MIA_PAGE_HAS_SAMPLED) mia_prof_free(page, block, p);
#if MIALLOC_DEBUG
  if (!page->is_huge)
    memset(block + sizeof(mia_block_t), MIA_FREED_FILL, (size_t)((uint8_t *)pad - block) - sizeof(mia_block_t));
#endif
  pad->canary = mia_canary_freed(pad);
  /* the block start: the profiler may have cleared the flag that finds it */
  mia_free_raw(page, page->is_huge ? p : block);
}

/* A block about to be handed out (debug): was it written after its free? */
static void mia_check_reused(mia_page_t *page, uint8_t *block) {
#if MIALLOC_DEBUG
  if (page->is_huge) return;
  mia_padding_t *pad = mia_padding_of(page, block);
  size_t n = (size_t)((uint8_t *)pad - block) - sizeof(mia_block_t);
  if (n > MIA_UAF_CHECK) n = MIA_UAF_CHECK;
  const uint8_t *b = block + sizeof(mia_block_t);
  for (size_t i = 0; i < n; i++) {
    if (b[i] != MIA_FREED_FILL) {
      mia_error(EFAULT, "use after free: the freed %zu-byte block %p was written to (byte %zu)\n",
                page->block_size, (void *)block, i + sizeof(mia_block_t));
      return;
    }
  }
#else
  (void)page;
  (void)block;
#endif
}

/* What checked builds do to a block about to be handed out, before its
 * padding record is set: in debug builds, report a write into it while it
 * was free, then zero it or fill it with the fresh pattern.  p may sit past
 * an alignment gap (the aligned path); `unsampled` says no profiler header
 * precedes it, so the block's freed fill is there to check. */
void mia_checked_handout(void *p, size_t size, bool zero, bool unsampled) {
  mia_page_t *page = mia_page_of(p);
  if (!page->is_huge) {
    uint8_t *block = mia_page_block_start(page, p);
    if (unsampled || (uint8_t *)p == block) mia_check_reused(page, block);
  }
  if (zero) memset(p, 0, size);
#if MIALLOC_DEBUG
  else if (!page->is_huge) memset(p, MIA_FRESH_FILL, size);
#endif
}

/* The checked malloc: room for the padding record, then set it.  Small
 * blocks are taken unzeroed so the write-after-free check sees them as
 * they were left; huge ones keep the zeroed-by-the-OS shortcut. */
void *mia_theap_malloc_checked(mia_theap_t *theap, size_t size, bool zero) {
  if (mia_unlikely(size > MIA_MAX_ALLOC_SIZE)) {
    errno = mia_alloc_error(EOVERFLOW, 1, size, 0);
    return NULL;
  }
  size_t req = mia_padded_request(size);
#if !MIALLOC_DEBUG
  /* the common case: a small block popped here, its record at a known
   * place (no page lookup, no division) */
  if (mia_likely(req <= MIA_DIRECT_SIZE_MAX)) {
    mia_page_t *page = theap->pages_direct[mia_wsize(req)];
    mia_block_t *block = page->free;
    if (mia_likely(block != NULL)) {
      page->free = mia_block_next(page, block);
      page->used++;
      uint8_t *p = (uint8_t *)block;
      if (zero) memset(p, 0, size);
      mia_padding_t *pad = (mia_padding_t *)(p + page->block_size - MIA_PADDING_SIZE);
      uint8_t *end = p + size;
      size_t delta = (size_t)((uint8_t *)pad - end);
      mia_slack_fill(end, delta);
      pad->delta = delta;
      pad->canary = mia_canary_live(pad);
      return p;
    }
  }
#endif
  bool huge = req > MIA_LARGE_MAX;
  uint8_t *p = mia_theap_malloc_raw(theap, req, zero && huge);
  if (p == NULL) return NULL;
  mia_page_t *page = mia_page_of(p);
  if (page->is_guarded) {
    /* guarded blocks check themselves; a reused slot is not zero */
    if (zero) memset(p, 0, size);
    return p;
  }
  /* a profiler-sampled block starts past its header: its fill is not checked */
  mia_checked_handout(p, size, zero && !huge, false);
  mia_padding_set(p, size);
  return p;
}

/* ---- heap walk ---- */

typedef struct mia_walk_s {
  size_t bad;
} mia_walk_t;

static bool mia_check_live_block(mia_page_t *page, void *block, void *arg) {
  mia_walk_t *w = arg;
  mia_padding_t *pad = mia_padding_of(page, block);
  if (pad->canary != mia_canary_live(pad)) {
    mia_error(EOVERFLOW, "check: heap overflow past block %p (block of %zu bytes): its canary was overwritten\n",
              block, page->block_size);
    w->bad++;
    return true;
  }
  uint8_t *end = (uint8_t *)pad - pad->delta;
  size_t check = pad->delta < MIA_PAD_CHECK ? pad->delta : MIA_PAD_CHECK;
  for (size_t i = 0; i < check; i++) {
    if (end[i] != MIA_PAD_FILL) {
      mia_error(EOVERFLOW, "check: heap overflow past block %p (block of %zu bytes)\n", block, page->block_size);
      w->bad++;
      break;
    }
  }
  return true;
}

static void mia_check_free_list(mia_page_t *page, mia_block_t *b, mia_walk_t *w) {
#if MIALLOC_DEBUG
  for (size_t guard = 0; b != NULL && guard < mia_page_capacity(page); guard++) {
    size_t before = w->bad;
    mia_padding_t *pad = mia_padding_of(page, (uint8_t *)b);
    size_t n = (size_t)((uint8_t *)pad - (uint8_t *)b) - sizeof(mia_block_t);
    if (n > MIA_UAF_CHECK) n = MIA_UAF_CHECK;
    for (size_t i = 0; i < n && w->bad == before; i++) {
      if (((uint8_t *)b)[sizeof(mia_block_t) + i] != MIA_FREED_FILL) {
        mia_error(EFAULT, "check: the freed %zu-byte block %p was written to after its free\n",
                  page->block_size, (void *)b);
        w->bad++;
      }
    }
    b = mia_block_next(page, b);
  }
#else
  (void)page;
  (void)b;
  (void)w;
#endif
}

static bool mia_check_page(mia_page_t *page, void *arg) {
  if (page->block_size == 0 || page->is_guarded) return true;
  mia_walk_t *w = arg;
  mia_page_visit_live(page, mia_check_live_block, w);
  mia_check_free_list(page, page->free, w);
  mia_check_free_list(page, page->local_free, w);
  return true;
}

static bool mia_debug_check_theap(mia_theap_t *theap) {
  mia_walk_t w = {0};
  size_t before = atomic_load(&mia_corruptions);
  bool stop = false;
  for (int l = 0; l < 2; l++)
    for (mia_segment_t *s = l ? theap->tld->segments_full : theap->tld->segments; s != NULL; s = s->next)
      mia_segment_visit_pages(s, mia_check_page, &w, &stop);
  return w.bad == 0 && atomic_load(&mia_corruptions) == before;
}

#endif

#if !MIALLOC_PADDING

/* Links are checked before they are followed: release builds do not
 * check them on use, and a write after free may have changed one. */
static bool mia_list_holds(const mia_page_t *page, const mia_block_t *b, const void *p) {
  for (size_t guard = 0; b != NULL && guard <= mia_page_capacity(page); guard++) {
    if ((const void *)b == p) return true;
    if (!mia_link_plausible(page, (uintptr_t)b)) return false;
    b = mia_block_next(page, b);
  }
  return false;
}

/* Is the block at p on one of its page's free lists?  Asked by the page's
 * owner only (no other thread may walk lists the owner changes), and only
 * when the block looks free: the secure link check or the release mark,
 * which live data practically never matches. */
static mia_unused bool mia_block_is_free(mia_page_t *page, const void *p) {
  return mia_list_holds(page, page->free, p) || mia_list_holds(page, page->local_free, p) ||
         mia_list_holds(page, page->sample_rest, p) ||
         mia_list_holds(page, mia_tf_head(atomic_load_explicit(&page->thread_free, memory_order_acquire)), p);
}

#endif

#if MIA_GENERIC_MARK

/* ---- release builds: the free mark (MIA_FREE_MARK in internal.h) ---- */

/* Does the word name a block of the page?  Every link a free block holds
 * does (release builds keep links plain), or is NULL. */
static bool mia_names_block(const mia_page_t *page, uintptr_t word) {
  const uint8_t *link = (const uint8_t *)word;
  if (link < page->start || link >= page->start + (size_t)mia_page_capacity(page) * page->block_size) return false;
  return (size_t)(link - page->start) % page->block_size == 0;
}

/* Is the marked block in another thread's batch of remote frees?  Its
 * link is tagged and names a block of the same page (internal.h).  The tag
 * bit alone is not enough: live data with an odd first word that also
 * holds the mark (copied from memory a freed block left) was taken for a
 * batched block, and its free refused as a double free. */
static bool mia_block_batched(const mia_page_t *page, const void *block) {
  uintptr_t word = ((const uintptr_t *)block)[0];
  return (word & MIA_BATCHED_LINK_TAG) && mia_names_block(page, word & ~MIA_BATCHED_LINK_TAG);
}

/* Does the marked block hold what a free block holds: a link that is NULL
 * or names a block of the page, tagged or not?  (Stricter than
 * mia_link_plausible, which takes any word of the page.) */
static bool mia_block_holds_free_link(const mia_page_t *page, const void *block) {
  uintptr_t word = ((const uintptr_t *)block)[0] & ~MIA_BATCHED_LINK_TAG;
  return word == 0 || mia_names_block(page, word);
}

/* Is a block with the free mark free indeed?  Yes, unless live data
 * matches the 64-bit mark by chance (or holds a copy of it).  The owner
 * looks on the page's lists to be sure, and at the link of a block in
 * another thread's batch (on no list yet, MIA_REMOTE_BATCH).  Another
 * thread cannot walk lists the owner is changing: it takes the mark's
 * word where the first word is a plausible link too, so live data needs
 * both to be refused. */
static bool mia_marked_block_free(mia_page_t *page, const void *block, bool owner) {
  if (!owner) return mia_block_holds_free_link(page, block);
  return (MIA_REMOTE_BATCH > 0 && mia_block_batched(page, block)) || mia_block_is_free(page, block);
}

/* A block with the free mark freed again: true when it is a double free
 * (reported, the free dropped). */
bool mia_free_is_double(mia_page_t *page, const void *block, bool owner) {
  if (!mia_marked_block_free(page, block, owner)) return false;
  mia_report_double_free(page, block);
  return true;
}

/* The fast path found the mark: check, then free as it would have (a tail
 * call, so the fast path keeps no frame). */
void mia_free_marked(void *p, mia_page_t *page) {
  if (mia_free_is_double(page, p, true)) return;
  mia_free_local(page, p);
}

#else

bool mia_free_is_double(mia_page_t *page, const void *block, bool owner) {
  (void)page, (void)block, (void)owner;
  return false;
}

void mia_free_marked(void *p, mia_page_t *page) { mia_free_generic(p, page); }

#endif

#if MIALLOC_SECURE && !MIALLOC_PADDING

/* ---- secure builds without padding: block-start, range and double-free
 * checks from the page's own data ---- */

/* The fast path found the free mark: a double free, or (all but never)
 * live data that looks like it.  Frees p in the second case, so the
 * fast path can jump here without keeping a frame for the call. */
void mia_free_secure_suspect(mia_page_t *page, void *p) {
  if (mia_block_is_free(page, p)) {
    mia_report_double_free(page, p);
    return;
  }
  mia_free_generic(p, page);
}

/* Is p a live block of its page (not a guarded one)?  Reports (as a
 * problem of op, "free" or "realloc") and returns false when the call must
 * leave p alone.  For pages with offset blocks (aligned, sampled), huge
 * blocks and pointers that are not a block start. */
static bool mia_secure_block_live(mia_page_t *page, void *p, const char *op) {
  /* huge blocks of aligned allocations start past the span's start */
  bool offsets = (mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED)) != 0 || page->is_huge;
  uint8_t *block = mia_page_block_start(page, p);
  if (!page->is_huge) {
    size_t index = (size_t)(block - page->start) / page->block_size;
    if ((uint8_t *)p < page->start || index >= mia_page_capacity(page)) {
      mia_error(EINVAL, "%s: pointer %p was never allocated (in a page of %zu-byte blocks)\n", op, p,
                page->block_size);
      return false;
    }
  }
  if ((uint8_t *)p != block && !offsets) {
    mia_error(EINVAL, "%s: pointer %p points into the middle of the %zu-byte block at %p\n", op, p,
              page->block_size, (void *)block);
    return false;
  }
  if (!page->is_huge && mia_block_looks_free(page, block) &&
      mia_block_is_free(page, block)) {
    mia_report_freed(op, page->block_size, p);
    return false;
  }
  return true;
}

static mia_noinline void mia_free_secure_special(mia_page_t *page, void *p) {
  if (page->is_guarded || mia_secure_block_live(page, p, "free")) mia_free_generic(p, page);
}

/* Everything the fast path's owner test or block-start test turned away.
 * Most are frees by other threads than the page's owner, of a block start
 * in a plain page: they get the fast path's checks, then the generic free,
 * all in tail calls so that this path keeps no frame either. */
void mia_free_secure_slow(mia_page_t *page, void *p) {
  bool plain = (mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED)) == 0 && !page->is_huge &&
               !page->is_guarded;
  if (mia_unlikely(!plain || mia_block_index_exact(page, p) >= mia_page_capacity(page))) {
    mia_free_secure_special(page, p);
    return;
  }
  if (mia_unlikely(mia_block_looks_free(page, p))) {
    mia_free_secure_suspect(page, p);
    return;
  }
  /* a plain block of another thread's page (or an abandoned one): nothing
   * the generic free would check is left, so it goes straight to the
   * page's thread_free list (secure builds never hold blocks: no thinning) */
  uintptr_t owner = mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK;
  if (mia_likely(owner != mia_prim_thread_id())) {
    mia_free_remote(page, p);
    return;
  }
  mia_free_generic(p, page);
}

#endif

#if !MIALLOC_PADDING


/* Without padding records only the free lists can be checked: secure
 * builds validate every link on the way (mia_block_next reports a bad
 * one); release builds have nothing to compare with. */
static bool mia_walk_lists(mia_page_t *page, void *arg) {
  (void)arg;
  if (page->block_size == 0 || page->is_guarded || page->is_huge) return true;
  mia_block_t *lists[3] = {page->free, page->local_free, page->sample_rest};
  for (int l = 0; l < 3; l++) {
    mia_block_t *b = lists[l];
    for (size_t guard = 0; b != NULL && guard <= mia_page_capacity(page); guard++) b = mia_block_next(page, b);
  }
  return true;
}

static bool mia_debug_check_theap(mia_theap_t *theap) {
  size_t before = atomic_load(&mia_corruptions);
  bool stop = false;
  for (int l = 0; l < 2; l++)
    for (mia_segment_t *s = l ? theap->tld->segments_full : theap->tld->segments; s != NULL; s = s->next)
      mia_segment_visit_pages(s, mia_walk_lists, NULL, &stop);
  return atomic_load(&mia_corruptions) == before;
}

#endif

/* ---- realloc's pointer ----
 * realloc must not keep or move a block that is free already: kept, the
 * program would hold a block that is on a free list too; moved, it would
 * be freed a second time.  Each build checks what its free checks. */

/* The ordinary blocks (not guarded, not a huge block's interior). */
static bool mia_realloc_block_live(mia_page_t *page, void *p) {
#if MIALLOC_PADDING
  uint8_t *block;
  return mia_check_free_ptr(page, p, &block, "realloc");
#elif MIALLOC_SECURE
  return mia_secure_block_live(page, p, "realloc");
#elif MIA_FREE_MARK
  /* as the generic free: the block start first where blocks have offsets,
   * and a block held by thinning before its mark is read */
  void *block = p;
  if ((mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED | MIA_PAGE_HAS_HELD)) && !page->is_huge) {
    block = mia_page_block_start(page, p);
    if (mia_page_block_held(page, block)) {
      mia_report_freed("realloc", page->block_size, p);
      return false;
    }
  }
  if (page->is_huge || !mia_block_marked_free(block)) return true;
  uintptr_t owner = mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK;
  if (!mia_marked_block_free(page, block, owner != 0 && owner == mia_prim_thread_id())) return true;
  mia_report_freed("realloc", page->block_size, p);
  return false;
#else
  /* tools builds: Valgrind or ASan reports the misuse */
  (void)page, (void)p;
  return true;
#endif
}

bool mia_realloc_check(mia_page_t *page, void *p) {
  if (page->is_guarded) {
    void *block = mia_guarded_block_start(page, p);
    if (mia_guarded_usable(page, block) == 0) {
      mia_error(EAGAIN, "realloc: guarded block %p was freed already: a use after free; it is left alone\n", p);
      return false;
    }
    if (block != p) {
      mia_error(EINVAL, "realloc: pointer %p points into the middle of guarded block %p\n", p, block);
      return false;
    }
    return true;
  }
  if (mia_huge_interior(page, p)) {
    mia_report_huge_interior("realloc", page, p);
    return false;
  }
  /* what the free of these builds turns away too (secure and debug
   * builds check every block start in mia_realloc_block_live) */
  if (MIA_FREE_TESTS_ODD && ((uintptr_t)p & 15) != 0 && mia_odd_interior("realloc", page, p)) return false;
  return mia_realloc_block_live(page, p);
}

void mia_free_list_corrupted(const mia_page_t *page, const mia_block_t *b, uintptr_t link) {
  atomic_fetch_add(&mia_corruptions, 1);
  mia_error(EFAULT, "corrupted free list in a page of %zu-byte blocks: the freed block %p was written to "
            "(heap overflow or use after free; its link decodes to %p); the rest of the list is dropped\n",
            page->block_size, (const void *)b, (void *)link);
}

/* Check the calling thread's part of its default heap. */
mia_export bool mi_debug_check(void) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) return true;
  return mia_debug_check_theap(theap);
}

/* ---- MIALLOC_SHOW_LEAKS: the main heap's live blocks at exit ---- */

typedef struct mia_leaks_s {
  size_t count, bytes;
} mia_leaks_t;

static bool mia_leak_visit(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t bsize,
                           void *arg) {
  (void)heap;
  (void)area;
  mia_leaks_t *l = arg;
  if (block == NULL) return true;
  size_t size = mi_usable_size(block);
  if (size == 0) size = bsize;
  if (l->count < 100) mia_message("leak: %p (%zu bytes)\n", block, size);
  l->count++;
  l->bytes += size;
  return true;
}

void mia_show_leaks(void) {
  mia_leaks_t l = {0, 0};
  mi_heap_visit_blocks(mi_heap_main(), true, mia_leak_visit, &l);
  mia_message("leaks: %zu blocks (%zu bytes) still allocated at exit%s\n", l.count, l.bytes,
              l.count > 100 ? " (first 100 listed)" : "");
}

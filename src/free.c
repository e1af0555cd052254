/* free.c -- everything a free can run into beyond the fast path in
 * fastpath.h: remote frees, flagged pages (full, aligned, sampled), huge
 * spans and pointers we do not own. */
#include "internal.h"
#include "fastpath.h"

mia_export void mi_free(void *p) { mia_free_inline(p); }

/* Whether p points into mialloc's own arenas (the main sub-process's, or
 * the calling thread's). */
static bool mia_in_own_arena(const void *p) {
  if (mia_arena_reserved(&mia_subproc_main, p)) return true;
  mia_theap_t *theap = mia_theap_get();
  return theap != &mia_theap_empty && theap->tld->subproc != &mia_subproc_main &&
         mia_arena_reserved(theap->tld->subproc, p);
}

/* A pointer the page map does not know: from another allocator (a program
 * that links its own while mialloc is preloaded), from the stack, or a
 * stale pointer into memory we gave back.  Writing to it could corrupt
 * someone else's memory, so it is reported and otherwise ignored; op is
 * the call the report names (free, realloc). */
void mia_free_invalid(const char *op, void *p) {
  /* inside our own arenas it is no other allocator's memory: a block whose
   * page (or huge span) went back when it was freed, freed again -- the
   * error it is in every build */
  if (mia_in_own_arena(p)) {
    mia_error(EFAULT, "%s: pointer %p is not an allocated block: a double free of a block whose memory was "
              "given back, or a pointer into heap memory not handed out\n", op, p);
    return;
  }
  /* printed once per process (every one with MIALLOC_VERBOSE): a program
   * that mixes allocators does it on every call; the statistics and the
   * error callback (EFAULT) see them all.  Secure and debug builds treat
   * it as the error it usually is. */
  bool first = __atomic_fetch_add(&mia_stats_global.foreign_frees, 1, __ATOMIC_RELAXED) == 0;
  int show = mia_checked_build() ? MIA_SHOW_ERROR : first ? MIA_SHOW_WARNING : MIA_SHOW_WARNING | MIA_SHOW_VERBOSE;
  mia_report(EFAULT, show,
             "%s: ignoring pointer %p that was not allocated by mialloc "
             "(another allocator's memory, a stack address, or memory already returned)\n", op, p);
}

/* p is off a 16-byte boundary.  Blocks of aligned allocations at an
 * offset start anywhere, and the generic free sorts out guarded and huge
 * blocks; in any other page p points into a block.  Freeing it would put
 * the block's tail on a free list, to be handed out while the block is
 * live, so op ("free", "realloc") reports it, and true says to ignore it. */
bool mia_odd_interior(const char *op, const mia_page_t *page, const void *p) {
  if ((mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED)) || page->is_huge || page->is_guarded)
    return false;
  mia_error(EINVAL, "%s: pointer %p points into the middle of the %zu-byte block at %p\n", op, p, page->block_size,
            mia_page_block_start(page, p));
  return true;
}

/* The release free's one test turned p away: above the page map's range,
 * or off a 16-byte boundary. */
void mia_free_odd(void *p) {
  mia_page_t *page = mia_page_of(p);
  if (page == NULL || page->block_size == 0) mia_free_invalid("free", p);
  else if (!mia_odd_interior("free", page, p)) mia_free_generic(p, page);
}

#if MIA_REMOTE_BATCH

/* A thread batches its remote frees per page and pushes a page's batch in
 * one go when it has MIA_REMOTE_BATCH_BLOCKS blocks (fewer for bigger
 * blocks), when another page takes the batch's entry, when the thread
 * needs a fresh page of its own, when it collects and when it exits.  Each
 * push is a locked instruction, and a locked instruction waits until every
 * store before it is done: on a free that is the program's stores into
 * memory it just allocated, whose lines come from other cores (in larson
 * 83 % of the remote free's samples sat on it).  The blocks are marked
 * free at once, so a second free is still caught.  Only blocks of the main
 * heap are batched: a first-class heap may be destroyed with its pages
 * while a batch waits.  Nor are blocks of unowned pages (an exited
 * thread's, a deleted heap's): no owner contends for them, and a block
 * waiting in a batch would keep its segment from ever emptying and being
 * taken back, since the freeing thread may never flush. */
#define MIA_REMOTE_BATCH_BLOCKS 16
#define MIA_REMOTE_BATCH_BYTES 16384   /* per page: a waiting batch must not keep much memory from its owner */

static inline bool mia_remote_batchable(const mia_page_t *page, uintptr_t owner) {
  const mia_segment_t *seg = mia_segment_of_page(page);
  const mi_heap_t *heap = __atomic_load_n(&seg->heap, __ATOMIC_RELAXED);
  return owner != 0 && page->block_size <= MIA_REMOTE_BATCH_BYTES / 2 && seg->subproc == &mia_subproc_main &&
         (heap == NULL || heap == &mia_subproc_main.heap_main);
}

/* Take the batch out of its slot, untag its links (their lines are this
 * thread's by now) and push it in one go.  Out of the slot first: the push
 * into a page nobody owns may start the purge thread, whose set-up
 * allocates on this thread, and an allocation that sets up a page flushes
 * every batch (mia_page_fresh).  Pushed twice, the blocks came back twice:
 * a page's count of blocks in use wrapped and its list looped. */
static inline void mia_remote_push_batch(mia_tld_t *tld, size_t i) {
  mia_remote_batch_t *batch = &tld->remote_batch[i];
  mia_page_t *page = batch->page;
  mia_block_t *first = batch->first, *last = batch->last;
  uint32_t count = batch->count;
  batch->page = NULL;
  batch->count = 0;
  tld->remote_waiting[i / 64] &= ~((uint64_t)1 << (i % 64));
  for (mia_block_t *b = first; b != last;) {
    b->next = (mia_block_t *)((uintptr_t)b->next & ~MIA_BATCHED_LINK_TAG);
    b = b->next;
  }
  mia_free_remote_list(page, first, last, count);
}

/* Empty slot i for page: push what another page's batch holds there.
 * Pushing may allocate (mia_remote_push_batch), and a free in there may
 * fill the slot again. */
static mia_noinline void mia_remote_batch_vacate(mia_tld_t *tld, size_t i, const mia_page_t *page) {
  mia_remote_batch_t *batch = &tld->remote_batch[i];
  do mia_remote_push_batch(tld, i);
  while (batch->page != NULL && batch->page != page);
}

static void mia_free_remote_batched(mia_page_t *page, mia_block_t *block, uintptr_t owner) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty || !mia_remote_batchable(page, owner)) {
    mia_free_remote(page, block);
    return;
  }
  mia_tld_t *tld = theap->tld->thread_tld;
  /* page records are 64-byte aligned; the segment's bits spread pages of
   * different segments with the same index */
  uintptr_t key = ((uintptr_t)page >> 6) ^ ((uintptr_t)page >> MIA_SEGMENT_SHIFT);
  size_t i = key % MIA_REMOTE_BATCH;
  mia_remote_batch_t *batch = &tld->remote_batch[i];
  mia_block_set_free_mark(block);
  if (mia_unlikely(batch->page != page && batch->page != NULL)) mia_remote_batch_vacate(tld, i, page);
  if (batch->page == page) {
    block->next = (mia_block_t *)((uintptr_t)batch->first | MIA_BATCHED_LINK_TAG);
    batch->first = block;
  } else {
    size_t limit = MIA_REMOTE_BATCH_BYTES / page->block_size;
    block->next = (mia_block_t *)((uintptr_t)block | MIA_BATCHED_LINK_TAG);
    batch->page = page;
    batch->first = batch->last = block;
    batch->limit = limit < MIA_REMOTE_BATCH_BLOCKS ? (uint32_t)limit : MIA_REMOTE_BATCH_BLOCKS;
    tld->remote_waiting[i / 64] |= (uint64_t)1 << (i % 64);
  }
  if (++batch->count >= batch->limit) mia_remote_push_batch(tld, i);
}

/* Every fresh page flushes, so the flush visits only the batches that hold
 * blocks: walking all 128 entries took 18 % of a loop that allocates and
 * frees 64 blocks of 8 KiB, which sets up a page every 8 of them. */
void mia_remote_flush(mia_tld_t *tld) {
  for (size_t w = 0; w < MIA_REMOTE_BATCH / 64; w++)
    while (tld->remote_waiting[w] != 0) mia_remote_push_batch(tld, w * 64 + (size_t)__builtin_ctzll(tld->remote_waiting[w]));
}

#else

static inline void mia_free_remote_batched(mia_page_t *page, mia_block_t *block, uintptr_t owner) {
  (void)owner;
  mia_free_remote(page, block);
}

void mia_remote_flush(mia_tld_t *tld) { (void)tld; }

#endif

static void mia_page_unfull(mia_page_t *page) {
  mia_theap_t *theap = atomic_load_explicit(&page->theap, memory_order_relaxed);
  /* the full page got a block back: it can serve its bin again */
  mia_theap_collect_page_from_full(theap, page);
}

/* What is left of a free once the block start is known and checked. */
static inline void mia_free_block(mia_page_t *page, void *p, mia_block_t *block) {
  /* a sampled block: the profiler hears of it, whichever thread frees it
   * (after the block start is known: this may clear the page's flag) */
  if (mia_unlikely(mia_page_flags(page) & MIA_PAGE_HAS_SAMPLED))
    mia_prof_free(page, page->is_huge ? page->start : (void *)block, p);
  if (page->is_huge) {
    mia_huge_page_free(page);
    return;
  }
  uintptr_t owner = mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK;
  if (owner != 0 && owner == mia_prim_thread_id()) {
    mia_block_set_next(page, block, page->local_free);
    mia_block_set_free_mark(block);
    page->local_free = block;
    page->used--;
    if (mia_page_flags(page) & MIA_PAGE_IN_FULL) mia_page_unfull(page);
    if (page->used == 0) mia_page_retire(page);
    return;
  }
  mia_free_remote_batched(page, block, owner);
}

/* The block carries the free mark (release builds): a double free unless
 * the check says otherwise.  Out of line, so the generic free keeps no
 * frame for it. */
static mia_noinline void mia_free_generic_marked(mia_page_t *page, void *p, mia_block_t *block) {
  uintptr_t owner = mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK;
  if (mia_free_is_double(page, block, owner != 0 && owner == mia_prim_thread_id())) return;
  mia_free_block(page, p, block);
}

void mia_report_huge_interior(const char *op, const mia_page_t *page, const void *p) {
  mia_error(EINVAL, "%s: pointer %p points into the middle of the huge block at %p (%zu bytes)\n", op, p,
            (void *)page->start, page->block_size);
}

void mia_free_generic(void *p, mia_page_t *page) {
  if (mia_unlikely(page->is_guarded)) {
    mia_guarded_free(page, p);
    return;
  }
  if (mia_unlikely(mia_huge_interior(page, p))) {
    mia_report_huge_interior("free", page, p);
    return;
  }
  mia_block_t *block = (mia_block_t *)p;
  /* one test for the flags that need the block start; a block held by
   * thinning is checked before its mark is read (its memory was purged) */
  if ((mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED | MIA_PAGE_HAS_HELD)) && !page->is_huge) {
    block = (mia_block_t *)mia_page_block_start(page, p);
    if (mia_unlikely(mia_page_block_held(page, block))) {
      mia_report_double_free(page, p);
      return;
    }
  }
  /* huge blocks carry no mark, and an aligned one's pointer may be off a
   * word boundary: the huge test first */
  if (MIA_GENERIC_MARK && !page->is_huge && mia_unlikely(mia_block_marked_free(block))) {
    mia_free_generic_marked(page, p, block);
    return;
  }
  mia_free_block(page, p, block);
}

mia_export void mi_free_size(void *p, size_t size) {
  (void)size;
  mi_free(p);
}

mia_export void mi_free_aligned(void *p, size_t alignment) {
  (void)alignment;
  mi_free(p);
}

mia_export void mi_free_size_aligned(void *p, size_t size, size_t alignment) {
  (void)size;
  (void)alignment;
  mi_free(p);
}

mia_export void mi_cfree(void *p) { mi_free(p); }

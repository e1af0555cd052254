/* theap.c -- the thread-local part of a heap: one page queue per bin, the
 * direct table for small sizes, the full list, and the allocation slow path.
 */
#include "internal.h"

static size_t mia_page_slices_for(size_t bsize) {
  if (bsize <= MIA_SMALL_MAX) return 1;
  if (bsize <= MIA_MEDIUM_MAX) return MIA_MEDIUM_PAGE_SLICES;
  /* large bins: the fewest blocks that fill whole slices exactly */
  size_t n = 1;
  while (n < 8 && (n * bsize) % MIA_SLICE_SIZE != 0) n++;
  /* and room for the guard page of secure builds */
  return (n * bsize + mia_page_guard_size() + MIA_SLICE_SIZE - 1) / MIA_SLICE_SIZE;
}

/* Size groups: in the process's first theap, until a size group has
 * filled a page, its sizes share the page of the group's power of two:
 * the group of 128 is every size from 65 to 128 bytes, and so on up to
 * 8 KiB (16 and 32 bytes keep their bins).  Each bin in use holds at least
 * an OS page, of which a small heap uses a few blocks: a process that only
 * starts up and exits (sleep, a shell) asks for 18 sizes of blocks, 8 KiB
 * in all, and with a page per bin paid 72 KiB where glibc's heap took 16.
 * A block up to twice the size wastes more of itself, at most a page's
 * worth per group.  When the group needs a second page its sizes get bins
 * of their own ("split"), and the group's pages go on serving its power
 * of two. */
#define MIA_GROUP_BIN_MAX 32   /* 8 KiB, the last bin of one-slice pages */
#define MIA_GROUPS_ALL ((uint16_t)0x1fe)   /* groups 1..8 */

void mia_theap_init(mia_theap_t *theap, mia_tld_t *tld) {
  memset(theap, 0, sizeof *theap);
  for (size_t w = 0; w <= MIA_DIRECT_WSIZE_MAX; w++) theap->pages_direct[w] = &mia_page_empty;
  for (size_t b = 1; b <= MIA_BIN_HUGE; b++) theap->pages[b].block_size = mia_bin_size[b];
  theap->tld = tld;
  theap->tid = mia_prim_thread_id();
  theap->huge_sample_left = -1;
  theap->groups_started = theap->groups_split = MIA_GROUPS_ALL;
}

/* A new theap's sizes each have their own bin; the process's first one
 * (init.c) shares pages between the sizes of a group instead, except in
 * builds with padding records, whose reports name a block's size and
 * should name the class of the size asked for.  Most
 * processes are small and have one thread: shells, coreutils.  A program
 * that starts threads does real work, and a thread's pages outlive it for
 * the threads after it to adopt, which pages shared by a group's sizes
 * would keep them from using (bench threadchurn ran 12 % longer). */
void mia_theap_share_groups(mia_theap_t *theap) {
  if (!mia_padded()) theap->groups_started = theap->groups_split = 0;
}

/* Bins 4, 8, 12 ... 32 are the powers of two; group g is bin 4g's, and
 * group 0 stands for none. */
static unsigned mia_group_of(uint8_t bin) {
  return bin <= 2 || bin > MIA_GROUP_BIN_MAX ? 0 : (unsigned)(bin + 3) >> 2;
}

/* the first bin of group g: 48 bytes' for the group of 64, else the
 * three bins below its power of two */
static uint8_t mia_group_first_bin(unsigned g) { return g == 1 ? 3 : (uint8_t)(4 * g - 3); }

static bool mia_group_shared(const mia_theap_t *theap, unsigned g) {
  return g != 0 && !(theap->groups_split & (1u << g));
}

/* The bin whose pages serve size now: one compare in a theap whose
 * groups have all split. */
static inline uint8_t mia_theap_bin(const mia_theap_t *theap, size_t size) {
  uint8_t bin = mia_bin_of(size);
  if (mia_likely(theap->groups_split == MIA_GROUPS_ALL)) return bin;
  unsigned g = mia_group_of(bin);
  return mia_group_shared(theap, g) ? (uint8_t)(4 * g) : bin;
}

/* The block size a malloc of size (up to MIA_LARGE_MAX) gets from theap
 * now: mi_good_size's answer. */
size_t mia_theap_block_size(const mia_theap_t *theap, size_t size) {
  return mia_bin_size[mia_theap_bin(theap, size)];
}

/* Keep the direct table's entries for this bin pointing at the first page
 * of the bin that serves it: its own, or its group's while shared. */
static void mia_theap_update_direct(mia_theap_t *theap, uint8_t bin) {
  uint8_t last = bin, first = bin;
  unsigned g = mia_group_of(bin);
  if (mia_group_shared(theap, g)) {
    last = (uint8_t)(4 * g);
    first = mia_group_first_bin(g);
  }
  size_t hi = mia_bin_size[last] / MIA_WORD_SIZE;
  if (hi > MIA_DIRECT_WSIZE_MAX) {
    if (first > 1 && mia_bin_size[first - 1] >= MIA_DIRECT_SIZE_MAX) return;
    hi = MIA_DIRECT_WSIZE_MAX;
  }
  size_t lo = first == 1 ? 0 : mia_bin_size[first - 1] / MIA_WORD_SIZE + 1;
  mia_page_t *page = theap->pages[last].first != NULL ? theap->pages[last].first : &mia_page_empty;
  for (size_t w = lo; w <= hi; w++) theap->pages_direct[w] = page;
}

/* Every size gets its own bin from now on, as in a theap whose groups all
 * filled a page (the unit tests that look at one size's pages start so). */
void mia_theap_split_groups(mia_theap_t *theap) {
  theap->groups_started = theap->groups_split = MIA_GROUPS_ALL;
  for (uint8_t bin = 3; bin <= MIA_GROUP_BIN_MAX; bin++) mia_theap_update_direct(theap, bin);
}

/* A shared group needs a page: its first one is set up shared; the
 * second splits the group, and from then on each size has its own bin
 * (and the direct table says so). */
static void mia_group_split_if_started(mia_theap_t *theap, unsigned g) {
  if (!(theap->groups_started & (1u << g))) {
    theap->groups_started |= (uint16_t)(1u << g);
    return;
  }
  theap->groups_split |= (uint16_t)(1u << g);
  for (uint8_t bin = mia_group_first_bin(g); bin <= 4 * g; bin++) mia_theap_update_direct(theap, bin);
}

static void queue_remove(mia_page_queue_t *pq, mia_page_t *page) {
  mia_assert(page->prev != NULL ? page->prev->next == page : pq->first == page);
  mia_assert(page->next != NULL ? page->next->prev == page : pq->last == page);
  if (page->prev) page->prev->next = page->next;
  else pq->first = page->next;
  if (page->next) page->next->prev = page->prev;
  else pq->last = page->prev;
  page->next = page->prev = NULL;
}

static void queue_push_front(mia_page_queue_t *pq, mia_page_t *page) {
  page->prev = NULL;
  page->next = pq->first;
  if (pq->first) pq->first->prev = page;
  else pq->last = page;
  pq->first = page;
}

static void queue_push_back(mia_page_queue_t *pq, mia_page_t *page) {
  page->next = NULL;
  page->prev = pq->last;
  if (pq->last) pq->last->next = page;
  else pq->first = page;
  pq->last = page;
}

void mia_page_set_flag(mia_page_t *page, uint8_t flag, bool on) {
  uint8_t flags = on ? (uint8_t)(mia_page_flags(page) | flag) : (uint8_t)(mia_page_flags(page) & ~flag);
  /* atomic, as remote frees read the flags; no ordering: the full-page
   * handshake lives in the thread_free word */
  __atomic_store_n(&page->flags, flags, __ATOMIC_RELAXED);
  mia_page_set_free_key(page, (mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK) | flags);
}

/* Ask the next remote free into a parked page to notify us: set FULL in
 * its thread_free word, unless a remote free got in first (then the page
 * has blocks to collect and must not stay parked: false).  Release: the
 * free that finds FULL reads page->theap next. */
static bool mia_page_arm_full(mia_page_t *page) {
  uintptr_t word = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
  do {
    if (mia_tf_head(word) != NULL) return false;
  } while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &word, word | MIA_TF_FULL,
                                                  memory_order_release, memory_order_relaxed));
  return true;
}

/* Park a page without free blocks in the full list; false when remote
 * frees came in meanwhile (the caller collects them and takes it out). */
static bool mia_page_to_full(mia_theap_t *theap, mia_page_t *page) {
  mia_page_queue_t *pq = &theap->pages[page->bin];
  queue_remove(pq, page);
  mia_page_set_flag(page, MIA_PAGE_IN_FULL, true);
  queue_push_front(&theap->full, page);
  if (page->bin <= mia_bin_of(MIA_DIRECT_SIZE_MAX)) mia_theap_update_direct(theap, page->bin);
  return mia_page_arm_full(page);
}

/* A page leaving the full list goes to the back of its queue: the current
 * page keeps serving, and this one gathers more free blocks before it is
 * used again (at the front it would fill up at once and bounce back). */
static void mia_page_from_full(mia_theap_t *theap, mia_page_t *page) {
  mia_page_queue_t *pq = &theap->pages[page->bin];
  queue_remove(&theap->full, page);
  mia_page_set_flag(page, MIA_PAGE_IN_FULL, false);
  atomic_fetch_and_explicit(&page->thread_free, ~MIA_TF_FULL, memory_order_relaxed);
  bool was_empty = pq->first == NULL;
  queue_push_back(pq, page);
  if (was_empty && page->bin <= mia_bin_of(MIA_DIRECT_SIZE_MAX)) mia_theap_update_direct(theap, page->bin);
}

/* A local free hit a page in the full list: it has a free block again. */
void mia_theap_collect_page_from_full(mia_theap_t *theap, mia_page_t *page) {
  mia_page_collect(page);
  mia_page_from_full(theap, page);
}

/* Put an adopted page (after reclaim) where it belongs. */
void mia_theap_queue_page(mia_theap_t *theap, mia_page_t *page) {
  page->next = page->prev = NULL;
  mia_page_set_flag(page, MIA_PAGE_IN_FULL, false);
  queue_push_front(&theap->pages[page->bin], page);
  if (!mia_page_has_free(page) && page->local_free == NULL && page->held == 0 &&
      page->capacity >= page->reserved) {
    if (!mia_page_to_full(theap, page)) {
      mia_page_collect(page);
      mia_page_from_full(theap, page);
    }
    return;
  }
  if (page->bin <= mia_bin_of(MIA_DIRECT_SIZE_MAX)) mia_theap_update_direct(theap, page->bin);
}

/* An empty page out of its bin's queue and back to its segment.  The
 * caller checked mia_page_queued. */
static void mia_theap_page_free(mia_theap_t *theap, mia_page_t *page) {
  queue_remove(&theap->pages[page->bin], page);
  if (page->bin <= mia_bin_of(MIA_DIRECT_SIZE_MAX)) mia_theap_update_direct(theap, page->bin);
  mia_segment_page_free(page);
}

/* Full pages that got remote frees: collect them and put them back in
 * their bin's queue.  The claim is cleared before the collect, so a block
 * pushed after the collect finds no claim and queues the page again. */
void mia_theap_process_remote(mia_theap_t *theap) {
  mia_page_t *page = atomic_exchange_explicit(&theap->remote_pages, NULL, memory_order_acquire);
  while (page != NULL) {
    mia_page_t *next = page->remote_next;
    atomic_fetch_and_explicit(&page->thread_free, ~MIA_TF_QUEUED, memory_order_acq_rel);
    if (atomic_load_explicit(&page->theap, memory_order_relaxed) == theap &&
        (mia_page_flags(page) & MIA_PAGE_IN_FULL)) {
      mia_page_collect(page);
      if (mia_page_has_free(page)) {
        mia_page_from_full(theap, page);
      } else if (!mia_page_arm_full(page)) {
        /* its blocks were collected meanwhile, and new ones came in
         * before it could stay parked */
        mia_page_collect(page);
        mia_page_from_full(theap, page);
      }
    }
    page = next;
  }
}

/* The first page of the bin with a free block, moving exhausted pages to
 * the full list on the way; NULL when none has room.  Inlined into both
 * callers: as a call it added 0.6 instructions per malloc+free pair to the
 * amortised refill (bench/run --fastpath). */
static mia_always_inline mia_page_t *mia_bin_page_with_room(mia_theap_t *theap, uint8_t bin) {
  mia_page_queue_t *pq = &theap->pages[bin];
  mia_page_t *page = pq->first;
  while (page != NULL) {
    mia_page_t *next = page->next;
    mia_page_collect_to_alloc(page);
    /* blocks held by thinning first: they are carved already */
    if (!mia_page_has_free(page) && !(page->held != 0 && mia_page_readmit(page))) mia_page_extend(page);
    if (mia_page_has_free(page)) {
      if (page != pq->first) {
        queue_remove(pq, page);
        queue_push_front(pq, page);
        if (bin <= mia_bin_of(MIA_DIRECT_SIZE_MAX)) mia_theap_update_direct(theap, bin);
      }
      return page;
    }
    if (!mia_page_to_full(theap, page)) {
      mia_page_collect(page);
      mia_page_from_full(theap, page);
      return page;
    }
    page = next;
  }
  return NULL;
}

#define MIA_IDLE_PAGE_DIV 10   /* idle pages go after purge delay / this */

/* An emptied page that is its bin's current page stays (mia_page_retire):
 * a program that frees its last block of a size often asks for that size
 * again at once.  But a size one phase of a program used should not keep
 * a page of dirty memory for the rest of the run (bench python3 peaks
 * 3 MiB lower without them).  So when the thread needs a new page, current
 * pages empty and untouched for a tenth of the purge delay go back to
 * their segments first, where the new page can take their memory.
 *
 * A tenth, because phases can last a few milliseconds (bench bigint) and
 * each would cut new memory while the last one's pages waited; not at the
 * first look, because a page let go is set up again on fresh memory
 * (larson, aligncalloc: 1.07-1.10x the peak RSS).  Untouched: the heads of
 * the free lists did not move, as any malloc from the page would have
 * moved them.  Only pages that carved half their blocks: one that carved
 * little holds little, and set up again later it would likely land on a
 * fully dirty run.  Nothing here is on the fast paths or in
 * mia_page_retire, which a loop allocating and freeing one block calls
 * every time.  Not inlined: inside mia_malloc_generic it spilled
 * registers, 0.1 instructions per malloc+free pair (bench/run --fastpath). */
static mia_noinline void mia_theap_free_idle(mia_theap_t *theap, uint8_t bin, uint32_t now) {
  long delay = mia_option_get_fast(mi_option_purge_delay);
  if (delay < 0) return;
  for (uint8_t b = 1; b <= MIA_BIN_COUNT; b++) {
    mia_page_t *page = theap->pages[b].first;
    if (page == NULL || page->capacity < page->reserved / 2) continue;
    uint32_t mark = (uint32_t)((uintptr_t)page->free ^ (uintptr_t)page->local_free);
    if (page->used != 0 || b == bin || mark != page->idle_mark) {
      page->idle_mark = mark;
      page->idle_since = now;
      continue;
    }
    if (now - page->idle_since < (uint32_t)delay / MIA_IDLE_PAGE_DIV || mia_page_queued(page)) continue;
    mia_theap_page_free(theap, page);
  }
}

/* A fresh page for this bin from the thread's segments. */
static mia_page_t *mia_page_fresh(mia_theap_t *theap, uint8_t bin) {
  size_t bsize = mia_bin_size[bin];
  size_t slices = mia_page_slices_for(bsize);
  mia_deferred_free(theap, false);
  /* the heap grows: other threads get this one's batches of their blocks, and
   * what sparse pages hold free goes back */
  mia_remote_flush(theap->tld->thread_tld);
  uint64_t now = mia_prim_clock_ms();   /* read once: 25 ns a read on this project's VM */
  if (MIA_THIN && now >= theap->thin_at) mia_theap_thin(theap, false);
  mia_theap_free_idle(theap, bin, (uint32_t)now);
  /* out of room: segments other threads left may hold a page of this size
   * with free blocks.  Adopting them first keeps a program whose threads
   * come and go (each allocating a little) from cutting a page per thread
   * while the pages it adopted sit there with room. */
  if (!mia_segments_have_room(theap->tld, slices)) {
    mia_segment_reclaim(theap->tld, slices);
    mia_page_t *adopted = mia_bin_page_with_room(theap, bin);
    if (adopted != NULL) return adopted;
  }
  mia_page_t *page = mia_segment_page_alloc(theap->tld, slices);
  if (page == NULL) return NULL;
  mia_page_init(page, bsize, bin, page->is_zero_init);
  atomic_store_explicit(&page->theap, theap, memory_order_release);
  mia_page_set_free_key(page, theap->tid);
  mia_page_extend(page);
  queue_push_front(&theap->pages[bin], page);
  if (bin <= mia_bin_of(MIA_DIRECT_SIZE_MAX)) mia_theap_update_direct(theap, bin);
  mia_stat_page(page, 1);
  return page;
}

/* A page of the bin with a free block; a fresh page when none has room.
 * A shared group that needs a second page splits, but this request still
 * gets a block of the group's size, from a fresh page of the group's bin:
 * mi_good_size named that size before the malloc, and a program may use
 * all of it. */
static mia_page_t *mia_find_free_page(mia_theap_t *theap, uint8_t bin) {
  mia_page_t *page = mia_bin_page_with_room(theap, bin);
  if (page != NULL) return page;
  unsigned g = mia_group_of(bin);
  if (mia_unlikely(mia_group_shared(theap, g))) mia_group_split_if_started(theap, g);
  return mia_page_fresh(theap, bin);
}

/* calloc of fresh huge memory needs no memset, but a program that reads
 * it before writing (checks a table for empty slots, say) gets the
 * kernel's shared zero page first and a copy-on-write fault at the first
 * write, which in a threaded process also interrupts every other CPU
 * running it to flush their TLBs.  Pre-faulting the pages writable costs
 * one system call and saves all that; above this size a calloc is more
 * likely a sparse table, left to fault in as it is used. */
#define MIA_POPULATE_MAX ((size_t)64 << 20)

void *mia_malloc_huge(mia_theap_t *theap, size_t size, bool zero) {
  mia_page_t *page = mia_huge_page_alloc(theap->tld->heap, size, 0);
  if (page == NULL) {
    errno = mia_alloc_error(ENOMEM, 1, size, 0);
    return NULL;
  }
  if (zero && !page->is_zero_init) mia_memzero(page->start, page->block_size);   /* the usable size */
  else if (zero && size <= MIA_POPULATE_MAX) mia_prim_populate(page->start, size);
  return page->start;
}

void *mia_malloc_generic(size_t size, mia_theap_t *theap, bool zero) {
  if (mia_unlikely(theap == &mia_theap_empty)) {
    theap = mia_thread_init_slow();
    if (theap == NULL) {
      errno = mia_alloc_error(ENOMEM, 1, size, 0);
      return NULL;
    }
  }
  if (mia_unlikely(size > MIA_MAX_ALLOC_SIZE)) {
    errno = mia_alloc_error(EOVERFLOW, 1, size, 0);
    return NULL;
  }
  uint8_t bin = 0;
  mia_page_t *page = NULL;
  if (mia_likely(size <= MIA_LARGE_MAX)) {
    /* sizes above the direct table whose current page has a free block */
    bin = mia_theap_bin(theap, size);
    page = theap->pages[bin].first;
    if (page != NULL && page->free != NULL) goto pop;
  }
  if (mia_unlikely(mia_sampling_on()) && size > MIA_LARGE_MAX) {
    void *p;   /* huge: sampled here, the rest on their pages' streams */
    if (mia_prof_malloc(theap, size, zero, &p)) return p;
  }
  if (atomic_load_explicit(&theap->remote_pages, memory_order_relaxed) != NULL)
    mia_theap_process_remote(theap);
  if (size > MIA_LARGE_MAX) return mia_malloc_huge(theap, size, zero);
  page = mia_find_free_page(theap, bin);
  if (page == NULL) {
    errno = mia_alloc_error(ENOMEM, 1, size, 0);
    return NULL;
  }
  if (mia_unlikely(page->free == NULL)) return mia_prof_page_due(theap, page, size, zero);
pop:
  return mia_page_pop(page, zero);
}

/* Called when a page's last block came back.  The bin's current page stays;
 * others go back to the segment so another size can use the memory. */
void mia_page_retire(mia_page_t *page) {
  mia_theap_t *theap = atomic_load_explicit(&page->theap, memory_order_relaxed);
  /* only the owner retires, with the page's last block back */
  mia_assert(page->used == 0 && theap != NULL &&
             (mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK) == mia_prim_thread_id());
  if (mia_page_flags(page) & MIA_PAGE_IN_FULL) {
    mia_page_from_full(theap, page);
  } else if (theap->pages[page->bin].first == page) {
    /* the page malloc is using stays: the program is likely to allocate
     * this size again at once */
    return;
  }
  if (mia_page_queued(page)) {
    /* drain the list; a claim still standing is a remote free between
     * its claiming push and its listing: the page stays, empty, in its
     * queue */
    mia_theap_process_remote(theap);
    if (mia_page_queued(page)) return;
  }
  mia_theap_page_free(theap, page);
}

/* Collect every page; free the empty ones (all of them when force).
 * One segment operation as a whole: a page freed may start the purge
 * thread, whose pthread_create allocates here, and that allocation may
 * give back the page the walk holds as next (mia_theap_free_idle), which
 * the walk would then free again, or move it to the full list. */
static void mia_theap_free_empty_pages(mia_theap_t *theap, bool force) {
  mia_segment_ops_begin(theap->tld);
  mia_theap_process_remote(theap);
  for (size_t bin = 1; bin <= MIA_BIN_COUNT; bin++) {
    mia_page_t *page = theap->pages[bin].first;
    while (page != NULL) {
      mia_page_t *next = page->next;
      mia_page_collect(page);
      if (page->used == 0 && (force || page != theap->pages[bin].first) && !mia_page_queued(page)) {
        queue_remove(&theap->pages[bin], page);
        mia_segment_page_free(page);
      }
      page = next;
    }
    if (bin <= mia_bin_of(MIA_DIRECT_SIZE_MAX)) mia_theap_update_direct(theap, (uint8_t)bin);
  }
  mia_page_t *page = theap->full.first;
  while (page != NULL) {
    mia_page_t *next = page->next;
    mia_page_collect(page);
    if (page->used == 0) {
      mia_page_from_full(theap, page);
      if (!mia_page_queued(page)) mia_theap_page_free(theap, page);
    } else if (mia_page_has_free(page)) {
      mia_page_from_full(theap, page);
    }
    page = next;
  }
  mia_segment_ops_end(theap->tld);
}

void mia_theap_reset_queues(mia_theap_t *theap) {
  for (size_t bin = 1; bin <= MIA_BIN_COUNT; bin++) theap->pages[bin].first = theap->pages[bin].last = NULL;
  for (size_t w = 0; w <= MIA_DIRECT_WSIZE_MAX; w++) theap->pages_direct[w] = &mia_page_empty;
  theap->full.first = theap->full.last = NULL;
}

/* mi_collect: empty pages back to their segments, then purge what waited
 * long enough (everything when force). */
void mia_theap_collect(mia_theap_t *theap, bool force) {
  mia_theap_free_empty_pages(theap, force);
  mia_theap_thin(theap, force);
  mia_segments_purge(theap->tld, force);
}

/* Thread exit (or the end of a heap part): give back every empty page,
 * then leave the rest (pages with live blocks) on the given abandoned list,
 * to be reclaimed by other threads or destroyed with their heap. */
void mia_theap_abandon_to(mia_theap_t *theap, mia_segment_t **list, mia_lock_t *lock) {
  /* no purge here: a program starting threads over and over would fault
   * the same memory in again each time; the arenas purge it on time */
  mia_theap_free_empty_pages(theap, true);
  mia_theap_reset_queues(theap);
  mia_segments_abandon(theap->tld, list, lock);
  /* pages may have been queued on us while we abandoned them */
  mia_theap_process_remote(theap);
}

/* mi_heap_destroy: every segment of this part goes back to its arena,
 * live blocks and all.  Sampled blocks are reported freed first. */
void mia_theap_destroy_pages(mia_theap_t *theap) {
  mia_theap_reset_queues(theap);
  atomic_store_explicit(&theap->remote_pages, NULL, memory_order_relaxed);
  mia_segments_destroy(theap->tld);
}

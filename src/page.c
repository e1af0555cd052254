/* page.c -- blocks of one size in a page: the three free lists.
 *
 *   free         what malloc pops; only the owner touches it
 *   local_free   what the owner frees; swapped into free when free runs dry,
 *                so the fast paths of malloc and free never touch one list
 *   thread_free  what other threads free: an atomic LIFO the owner takes in
 *                one atomic step; its top bits hold the full-page state
 */
#include "internal.h"

/* Runs of fresh blocks span at most this much memory; secure builds, which
 * shuffle each run, at least this much, so the order is unpredictable. */
#define MIA_RUN_BYTES (16 * 1024)

#if MIALLOC_SECURE
/* Per-page keys from the process secret, the page's address and a counter,
 * mixed (mia_mix64): unpredictable without the secret, and no system call
 * for every page. */
static void mia_page_new_keys(mia_page_t *page) {
  static _Atomic(uint64_t) counter;
  uint64_t c = atomic_fetch_add_explicit(&counter, 1, memory_order_relaxed);
  uint64_t seed = mia_process_secret ^ ((uint64_t)(uintptr_t)page * 0x2545f4914f6cdd1dull);
  page->keys[0] = mia_mix64(seed ^ (c << 1)) | 1;
  page->keys[1] = mia_mix64(seed ^ ((c << 1) | 1));
}
#endif

/* debug builds fill fresh blocks, so they are not zero */
#if MIALLOC_DEBUG
#define MIALLOC_DEBUG_FILL 1
#else
#define MIALLOC_DEBUG_FILL 0
#endif

void mia_page_init(mia_page_t *page, size_t block_size, uint8_t bin, bool is_zero) {
  mia_annot_accessible(page->start, (size_t)page->slice_count * MIA_SLICE_SIZE);
  page->block_size = block_size;
  page->bin = bin;
  page->reserved = (uint32_t)((page->slice_count * MIA_SLICE_SIZE - mia_page_guard_size()) / block_size);
  mia_assert(page->reserved >= 1 && bin >= 1 && bin <= MIA_BIN_COUNT);
  page->capacity = 0;
  page->used = 0;
  page->free = page->local_free = NULL;
  atomic_store_explicit(&page->thread_free, 0, memory_order_relaxed);
  mia_page_set_flags(page, 0);
  page->is_zero_init = is_zero;
  page->sample_rest = NULL;
  page->sample_rest_len = UINT32_MAX;
  page->sample_rest_is_zero = false;
  page->idle_since = 0;
  page->idle_mark = 0;
  page->sample_left = -1;
  page->guard_left = -1;
  atomic_store_explicit(&page->sampled_live, 0, memory_order_relaxed);
  page->held_mask[0] = page->held_mask[1] = 0;
  page->held = page->thin_used = page->thin_stamp = page->thin_ms = 0;
#if MIALLOC_SECURE
  mia_page_new_keys(page);
  unsigned shift = (unsigned)__builtin_ctzl(block_size);
  uint64_t odd = block_size >> shift;
  uint64_t inv = odd;                      /* Newton: each step doubles the correct bits */
  for (int i = 0; i < 5; i++) inv *= 2 - odd * inv;
  page->div_shift = (uint8_t)shift;
  page->div_inv = inv;
  page->area_size = (uintptr_t)page->reserved * block_size;
#endif
}

/* Secure builds give fresh blocks the free mark, so that a free of one
 * never handed out is caught like a double free. */
static inline void mia_block_mark_fresh(mia_block_t *b) {
#if MIALLOC_SECURE
  mia_block_set_free_mark(b);
#else
  (void)b;
#endif
}

#if MIALLOC_SECURE
/* Link n > 2 fresh blocks in a random order that keeps their locality.
 * The run is cut into MIA_SHUFFLE_STREAMS slices, and each next block is
 * the next one of a slice drawn at random.  Which block follows which is
 * a fresh draw for every block (the random stride used before could be
 * read off two addresses), while a program that walks its objects in the
 * order it allocated them walks a few ascending streams, which caches and
 * prefetchers follow.  (That stride, and 16 streams, made Lua's table
 * walks 1.7-1.9x slower than in release builds, every next object on
 * another cache line; 4 streams 1.05-1.25x.)  The page's keys mixed with
 * how far it is carved seed the draws, with no system call. */
#define MIA_SHUFFLE_STREAMS 4
static mia_block_t *mia_page_thread_shuffled(mia_page_t *page, uint8_t *first, size_t n) {
  size_t bsize = page->block_size;
  size_t k = n < MIA_SHUFFLE_STREAMS ? n : MIA_SHUFFLE_STREAMS;
  uint8_t *next[MIA_SHUFFLE_STREAMS], *end[MIA_SHUFFLE_STREAMS];
  for (size_t j = 0; j < k; j++) {
    next[j] = first + j * n / k * bsize;
    end[j] = first + (j + 1) * n / k * bsize;
  }
  uint64_t r = mia_mix64(page->keys[0] ^ ((uint64_t)page->capacity * 0x9e3779b97f4a7c15ull));
  mia_block_t *head = NULL, *tail = NULL;
  while (k > 0) {
    r = r * 6364136223846793005ull + 1442695040888963407ull;   /* LCG: its high bits */
    size_t j = (size_t)(((r >> 32) * k) >> 32);                  /* below k, no division */
    mia_block_t *b = (mia_block_t *)next[j];
    next[j] += bsize;
    if (next[j] == end[j]) {   /* slice used up: the last one takes its place */
      k--;
      next[j] = next[k];
      end[j] = end[k];
    }
    if (tail != NULL) mia_block_set_next(page, tail, b);
    else head = b;
    mia_block_mark_fresh(b);
    tail = b;
  }
  mia_block_set_next(page, tail, NULL);
  return head;
}
#endif

/* Link n fresh blocks from first into a list (secure builds: shuffled). */
static mia_block_t *mia_page_thread_run(mia_page_t *page, uint8_t *first, size_t n) {
  size_t bsize = page->block_size;
#if MIALLOC_SECURE
  if (n > 2) return mia_page_thread_shuffled(page, first, n);
#endif
  uint8_t *b = first;
  for (size_t i = 0; i + 1 < n; i++, b += bsize) {
    mia_block_set_next(page, (mia_block_t *)b, (mia_block_t *)(b + bsize));
    mia_block_mark_fresh((mia_block_t *)b);
  }
  mia_block_set_next(page, (mia_block_t *)b, NULL);
  mia_block_mark_fresh((mia_block_t *)b);
  return (mia_block_t *)first;
}

/* How many never-used blocks the next run threads.  Linking a block writes
 * its first word, so a run makes resident every OS page a block of it
 * starts in.  Release runs start with the rest of one OS page and then grow
 * with what the page has carved, up to MIA_RUN_BYTES: a size class with a
 * few live blocks holds one OS page rather than a whole 64 KiB page, and a
 * page that fills fast still takes few slow-path visits to carve. */
static size_t mia_page_run_length(const mia_page_t *page, const uint8_t *first) {
  size_t bsize = page->block_size;
#if MIALLOC_SECURE
  (void)first;
  size_t n = MIA_RUN_BYTES / bsize;
  if (n < 4) n = 4;
#else
  size_t carved = (size_t)page->capacity * bsize;
  if (carved > MIA_RUN_BYTES) carved = MIA_RUN_BYTES;
  uintptr_t end = (((uintptr_t)first + carved) | (mia_prim_page_size() - 1)) + 1;
  size_t n = (end - (uintptr_t)first + bsize - 1) / bsize;
#endif
  size_t left = page->reserved - page->capacity;
  return n < left ? n : left;
}

/* Thread the next run of never-used blocks into the (empty) free list. */
bool mia_page_extend(mia_page_t *page) {
  if (page->capacity >= page->reserved) return false;
  uint8_t *first = page->start + (size_t)page->capacity * page->block_size;
  size_t n = mia_page_run_length(page, first);
  page->free = mia_page_thread_run(page, first, n);
  page->free_is_zero = page->is_zero_init && page->local_free == NULL && !MIALLOC_DEBUG_FILL;
  __atomic_store_n(&page->capacity, page->capacity + (uint32_t)n, __ATOMIC_RELAXED);   /* see mia_page_capacity */
  mia_assert(page->capacity <= page->reserved);
  if (mia_padded()) mia_check_fresh_blocks(page, first, n);
  if (mia_unlikely(mia_sampling_on())) mia_prof_account_refill(page, n);
  return true;
}

/* mia_page_pop found the first free block's link overwritten: report it,
 * drop the rest of the list (it cannot be trusted) and hand out the block,
 * which is still a block of the page. */
void *mia_page_pop_bad_link(mia_page_t *page, bool zero) {
  mia_block_t *block = page->free;
  page->free = mia_block_next(page, block);
  return mia_page_pop_finish(page, block, zero);
}

/* The list of blocks other threads freed, taken in one atomic step, and its
 * length, which rides in the thread_free word so that nobody walks the
 * list to count it. */
typedef struct mia_remote_list_s {
  mia_block_t *head;   /* NULL: none */
  uint32_t count;
} mia_remote_list_t;

static inline mia_remote_list_t mia_page_take_thread_list(mia_page_t *page) {
  /* the state bits stay: only the list and its count are taken */
  uintptr_t word = atomic_fetch_and_explicit(&page->thread_free, MIA_TF_STATE, memory_order_acquire);
  mia_remote_list_t list = {mia_tf_head(word), mia_tf_count(word)};
  mia_assert(list.count <= page->used);   /* more blocks came back than were out */
  page->used -= list.count;
  return list;
}

/* Keep a taken remote list on local_free, for a later refill.  Joining two
 * lists needs one's tail, and either may be long: an exited thread's
 * local_free, a server's remote list.  A short remote list is walked (its
 * length is known: a bounded cost); otherwise both are walked at once and
 * the one that ends first takes the other, so the cost is twice the
 * shorter one's. */
#define MIA_JOIN_WALK_REMOTE 64
static mia_noinline void mia_page_keep_remote(mia_page_t *page, mia_remote_list_t list) {
  mia_block_t *local = page->local_free, *remote = list.head;
  page->local_free = remote;
  if (local == NULL) return;
  if (list.count <= MIA_JOIN_WALK_REMOTE) {
    mia_block_t *tail = remote;
    for (mia_block_t *next; (next = mia_block_next(page, tail)) != NULL;) tail = next;
    mia_block_set_next(page, tail, local);
    return;
  }
  for (mia_block_t *a = local, *b = remote;;) {
    mia_block_t *nb = mia_block_next(page, b);
    if (nb == NULL) {
      mia_block_set_next(page, b, local);
      return;
    }
    mia_block_t *na = mia_block_next(page, a);
    if (na == NULL) {
      mia_block_set_next(page, a, remote);
      page->local_free = local;
      return;
    }
    a = na;
    b = nb;
  }
}

/* An abandoned page, held alone by the caller but owned by no thread: take
 * in its remote frees and say whether a block of it is still live.  Its
 * flags stay as they are: they live in the owner's free_key too, and the
 * next owner sets them. */
bool mia_page_collect_unowned(mia_page_t *page) {
  if (mia_page_has_remote(page))
    mia_page_keep_remote(page, mia_page_take_thread_list(page));
  return page->used == 0;
}

/* A free list of len blocks that no countdown has seen yet. */
static inline void mia_page_refill(mia_page_t *page, mia_block_t *list, size_t len) {
  page->free = list;
  page->free_is_zero = false;
  if (mia_unlikely(mia_sampling_on())) mia_prof_account_refill(page, len);
}

/* Refill an empty free list from the owner's side: a sample due here, or
 * local_free. */
static inline void mia_page_collect_local(mia_page_t *page) {
  if (page->free != NULL) return;
  if (mia_unlikely(page->sample_rest != NULL)) {
    /* a sample is due here: the slow path takes it (mia_prof_page_due),
     * unless the profiler stopped meanwhile */
    if (mia_sampling_on()) return;
    page->free = page->sample_rest;
    page->sample_rest = NULL;
    page->sample_rest_len = UINT32_MAX;
    page->sample_left = -1;
    page->guard_left = -1;
    page->free_is_zero = page->sample_rest_is_zero;
    return;
  }
  mia_block_t *local = page->local_free;
  if (local != NULL) {
    page->local_free = NULL;
    /* no remote list waited and free was empty: every block not handed
     * out (or held by thinning) is on this list now */
    mia_page_refill(page, local, page->capacity - page->used - page->held);
  }
}

/* Other threads freed blocks into the page (the owner, the only thread that
 * takes the list, saw it non-empty).  At a refill their list
 * becomes the free list as it is, and local_free waits for a later one:
 * joining the two walked a list block by block, each a cache miss (a
 * server whose threads free each other's blocks spent 14 % of its time
 * there). */
static mia_noinline void mia_page_collect_remote(mia_page_t *page) {
  mia_remote_list_t remote = mia_page_take_thread_list(page);
  /* other threads may have freed the page's last sampled block: its frees
   * can skip the sample check again (only the owner, here, changes the
   * flags; a new sample comes from the owner too) */
  if (mia_unlikely(mia_page_flags(page) & MIA_PAGE_HAS_SAMPLED) &&
      atomic_load_explicit(&page->sampled_live, memory_order_acquire) == 0)
    mia_page_set_flag(page, MIA_PAGE_HAS_SAMPLED, false);
  if (page->free == NULL && page->sample_rest == NULL) {
    mia_page_refill(page, remote.head, remote.count);
    return;
  }
  mia_page_keep_remote(page, remote);
  mia_page_collect_local(page);   /* a sample due, or the profiler stopped */
}

/* Take the blocks other threads freed; if free is empty, refill it. */
void mia_page_collect(mia_page_t *page) {
  if (mia_page_has_remote(page)) {
    mia_page_collect_remote(page);
    return;
  }
  mia_page_collect_local(page);
}

/* The same for the allocation path, which only needs a free list: one
 * that still has one keeps its remote list waiting for its next refill,
 * rather than joining it to local_free now (the test sits in the remote
 * branch, out of the way of the common refill). */
void mia_page_collect_to_alloc(mia_page_t *page) {
  if (mia_page_has_remote(page)) {
    if (page->free == NULL) mia_page_collect_remote(page);
    return;
  }
  mia_page_collect_local(page);
}

/* ---- live blocks: everything carved out that is on no free list ---- */

static void mark_list(const mia_page_t *page, const mia_block_t *b, uint64_t *freemap, size_t *nfree) {
  size_t bsize = page->block_size;
  /* bounded: a list corrupted by the program must not loop forever */
  for (size_t guard = 0; b != NULL && guard < page->capacity; guard++) {
    size_t diff = (size_t)((const uint8_t *)b - page->start);
    size_t i = diff / bsize;
    if ((const uint8_t *)b < page->start || i >= page->capacity) break;
    if (!((freemap[i / 64] >> (i % 64)) & 1)) {
      freemap[i / 64] |= (uint64_t)1 << (i % 64);
      (*nfree)++;
    }
    b = mia_block_next(page, b);
  }
}

static size_t count_bits(const uint64_t *map, size_t n) {
  size_t c = 0;
  for (size_t w = 0; w < (n + 63) / 64; w++) c += (size_t)__builtin_popcountll(map[w]);
  return c;
}

/* One bit per carved block: set for the free ones (on the owner's lists,
 * held by thinning, and with remote, on the list of other threads' frees,
 * which only the owner may take).  Returns how many are free. */
size_t mia_page_free_map(const mia_page_t *page, uint64_t *freemap, bool remote) {
  size_t nfree = 0;
  memset(freemap, 0, ((page->capacity + 63) / 64) * sizeof(uint64_t));
  mark_list(page, page->free, freemap, &nfree);
  mark_list(page, page->local_free, freemap, &nfree);
  mark_list(page, page->sample_rest, freemap, &nfree);
  if (remote)
    mark_list(page, mia_tf_head(atomic_load_explicit(&page->thread_free, memory_order_acquire)),
              freemap, &nfree);
  if (page->held != 0) {
    mia_page_mark_held(page, freemap);
    nfree = count_bits(freemap, page->capacity);
  }
  return nfree;
}

size_t mia_page_live_count(mia_page_t *page) {
  if (page->is_huge) return page->used;
  if (page->capacity > MIA_PAGE_MAX_BLOCKS) return page->used;
  uint64_t freemap[MIA_PAGE_MAX_BLOCKS / 64];
  return page->capacity - mia_page_free_map(page, freemap, true);
}

/* Call fun for each live block (its start); false when fun stopped it. */
bool mia_page_visit_live(mia_page_t *page, mia_block_fun *fun, void *arg) {
  if (page->is_huge) return page->used == 0 || fun(page, page->start, arg);
  if (page->capacity > MIA_PAGE_MAX_BLOCKS) return true;
  uint64_t freemap[MIA_PAGE_MAX_BLOCKS / 64];
  mia_page_free_map(page, freemap, true);
  for (size_t i = 0; i < page->capacity; i++) {
    if ((freemap[i / 64] >> (i % 64)) & 1) continue;
    if (!fun(page, page->start + i * page->block_size, arg)) return false;
  }
  return true;
}

/* The start of the block that contains p (p may point inside it after an
 * aligned allocation). */
void *mia_page_block_start(const mia_page_t *page, const void *p) {
  size_t diff = (size_t)((const uint8_t *)p - page->start);
  if (page->is_huge) return page->start;
  if (mia_unlikely(page->is_guarded)) return mia_guarded_block_start(page, p);
  return page->start + (diff / page->block_size) * page->block_size;
}

size_t mia_page_usable_of(const mia_page_t *page, const void *p) {
  const uint8_t *block = mia_page_block_start(page, p);
  return page->block_size - (size_t)((const uint8_t *)p - block);
}

/* Put a page whose FULL state this thread turned into QUEUED on its
 * owner's remote list.  An abandoned page has no owner to tell: the
 * claim is given back, and whoever adopts the segment collects it. */
static mia_noinline void mia_free_remote_notify(mia_page_t *page) {
  mia_theap_t *theap = atomic_load_explicit(&page->theap, memory_order_acquire);
  if (theap == NULL) {
    atomic_fetch_and_explicit(&page->thread_free, ~MIA_TF_QUEUED, memory_order_release);
    return;
  }
  mia_page_t *top = atomic_load_explicit(&theap->remote_pages, memory_order_relaxed);
  do {
    page->remote_next = top;
  } while (!atomic_compare_exchange_weak_explicit(&theap->remote_pages, &top, page,
                                                  memory_order_release, memory_order_relaxed));
}

/* The end of a push into a page nobody owns, out of line: the scan that
 * gives such pages back once emptied, and the claim's release as for any
 * page (an abandoned page is not parked, but one may be abandoned while a
 * push parks it). */
static mia_noinline void mia_free_remote_unowned(mia_page_t *page, uintptr_t old, mia_subproc_t *sp) {
  mia_abandoned_freed_into(sp);
  if ((old & MIA_TF_FULL) == 0 || (old & MIA_TF_QUEUED) != 0) return;
  mia_free_remote_notify(page);
}

/* Frees from a thread that does not own the page: n marked blocks linked
 * from first to last, pushed in one go.  If the owner parked the page in
 * its full list it will not look at it again by itself, so the push that
 * finds the FULL state turns it into QUEUED and puts the page on the
 * owner's remote list.  Push and state change are one compare-and-swap:
 * the claim stands from the moment the block is in, and the owner frees
 * no page while it stands, so the page record read after it is live. */
void mia_free_remote_list(mia_page_t *page, mia_block_t *first, mia_block_t *last, uint32_t n) {
  /* an unowned page (an exited thread's, a deleted heap's) is looked at
   * again only by a scan this push may have to schedule; read before the
   * push, while the page surely lives: once its last block is in, a scan
   * may free the page and give its segment back */
  mia_subproc_t *orphan_of = (mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK) == 0
                                 ? mia_segment_of_page(page)->subproc : NULL;
  uintptr_t old = atomic_load_explicit(&page->thread_free, memory_order_relaxed);
  /* the new head, and n more in the count (which never reaches the state
   * bits: a page holds at most 8192 blocks) */
  uintptr_t add = (uintptr_t)first + ((uintptr_t)n << MIA_TF_COUNT_SHIFT);
  uintptr_t word;
  do {
    mia_block_set_next(page, last, mia_tf_head(old));
    uintptr_t high = (old >> MIA_TF_COUNT_SHIFT) << MIA_TF_COUNT_SHIFT;   /* count and state */
    word = add + ((high & ~MIA_TF_FULL) | ((high & MIA_TF_FULL) << 1));   /* FULL becomes QUEUED */
  } while (!atomic_compare_exchange_weak_explicit(&page->thread_free, &old, word,
                                                  memory_order_acq_rel, memory_order_relaxed));
  if (mia_unlikely(orphan_of != NULL)) {
    mia_free_remote_unowned(page, old, orphan_of);
    return;
  }
  /* already on the list (QUEUED kept), or not parked: nothing to tell */
  if ((old & MIA_TF_FULL) == 0 || (old & MIA_TF_QUEUED) != 0) return;
  mia_free_remote_notify(page);
}

void mia_free_remote(mia_page_t *page, mia_block_t *block) {
  mia_block_set_free_mark(block);
  mia_free_remote_list(page, block, block, 1);
}

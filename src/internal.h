/* internal.h -- declarations shared by the allocator's source files.
 *
 * Public names start with mi_; internal ones with mia_ and are hidden (the
 * build uses -fvisibility=hidden and a version script).
 */
#ifndef MIALLOC_INTERNAL_H
#define MIALLOC_INTERNAL_H

#include "config.h"
#include "types.h"
#include "prim/prim.h"

#include <errno.h>
#include <string.h>

#define mia_likely(x)   __builtin_expect(!!(x), 1)
#define mia_unlikely(x) __builtin_expect(!!(x), 0)
#define mia_noinline    __attribute__((noinline))
#define mia_unused      __attribute__((unused))
#define mia_always_inline inline __attribute__((always_inline))
#define mia_cold        __attribute__((cold, noinline))
#define mia_export      __attribute__((visibility("default")))

/* Ask for p's cache line in a state we may write.  On x86-64 that is
 * prefetchw (CPUs without it run it as a no-op); the builtin would make it
 * a read prefetch unless the whole build targets newer CPUs.  A prefetch
 * never faults, NULL included. */
static inline void mia_prefetch_write(const void *p) {
#if defined(__x86_64__)
  __asm__("prefetchw %0" : : "m"(*(const char *)p));
#else
  __builtin_prefetch(p, 1);
#endif
}

/* Internal assertions: invariants of the allocator's own data, checked in
 * debug builds (--enable-debug) only.  A failure is a bug in mialloc or
 * metadata the program overwrote; either way nothing later can be trusted,
 * so it is reported with its place and the process aborts.  Other builds
 * compile the check out without evaluating it. */
#if MIALLOC_DEBUG
#define mia_assert(expr) \
  (mia_likely(expr) ? (void)0 : mia_assert_fail(#expr, __FILE__, __LINE__, __func__))
#else
#define mia_assert(expr) ((void)sizeof((expr) ? 1 : 0))   /* type-checked, never run */
#endif
void mia_assert_fail(const char *expr, const char *file, int line, const char *func)
    __attribute__((noreturn, cold, noinline));

/* ---- locks: a futex word, usable before init and taken around fork ---- */
void mia_lock(mia_lock_t *lock);
void mia_unlock(mia_lock_t *lock);
bool mia_trylock(mia_lock_t *lock);
/* Around fork: prepare takes the lock unless the forking thread holds it
 * already; parent releases what prepare took; child makes the lock free
 * again, except one the forking thread held (its interrupted holder may
 * still finish and release it in the child). */
void mia_lock_fork_prepare(mia_lock_t *lock);
void mia_lock_fork_parent(mia_lock_t *lock);
void mia_lock_fork_child(mia_lock_t *lock);
typedef enum { MIA_FORK_PREPARE, MIA_FORK_PARENT, MIA_FORK_CHILD } mia_fork_step_t;
void mia_lock_fork(mia_lock_t *lock, mia_fork_step_t step);
void mia_guarded_fork(mia_fork_step_t step);
void mia_pagemap_fork(mia_fork_step_t step);

/* ---- registered callbacks, read with their arguments as pairs (callback.c) ---- */
typedef void mia_callback_fun(void);   /* cast to and from the registered type */
typedef struct {
  /* twice the registrations, plus one while one is being written: the
   * last finished one wrote slot[(version >> 1) & 1]; 0: never registered */
  _Atomic(unsigned) version;
  struct {
    mia_callback_fun *_Atomic fun;
    void *_Atomic arg;
  } slot[2];
} mia_callback_t;
void mia_callback_set(mia_callback_t *cb, mia_callback_fun *fun, void *arg);
/* Never registered: the common case, told by one load. */
static inline bool mia_callback_never_set(mia_callback_t *cb) {
  return atomic_load_explicit(&cb->version, memory_order_relaxed) == 0;
}
/* Whether a pair read from the slot of the registration that made the
 * version done is whole: only the second registration after that one
 * rewrites its slot, and it marks the version done + 3 before its stores
 * (an acquire load that sees one of them sees the mark too). */
static inline bool mia_callback_read_holds(mia_callback_t *cb, unsigned done) {
  return atomic_load_explicit(&cb->version, memory_order_relaxed) - done <= 2;
}
/* The current pair; inline, for the deferred-free read of each fresh page. */
static inline mia_callback_fun *mia_callback_get(mia_callback_t *cb, void **arg) {
  for (;;) {
    unsigned done = atomic_load_explicit(&cb->version, memory_order_acquire) & ~1u;
    unsigned i = (done >> 1) & 1;
    mia_callback_fun *fun = atomic_load_explicit(&cb->slot[i].fun, memory_order_acquire);
    *arg = atomic_load_explicit(&cb->slot[i].arg, memory_order_acquire);
    if (mia_callback_read_holds(cb, done)) return fun;
  }
}
void mia_callbacks_fork(mia_fork_step_t step);

/* ---- output and errors (output.c) ---- */
void mia_message(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mia_verbose(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mia_warning(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void mia_check_tool_blindness(void) mia_cold;
void mia_error(int err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* How an error report is shown on the output (it always reaches the error
 * callback and the statistics); flags: */
enum {
  MIA_SHOW_ERROR = 0,    /* "error:", unless MIALLOC_SHOW_ERRORS=0 (at most MAX_ERRORS) */
  MIA_SHOW_WARNING = 1,  /* "warning:" instead (at most MAX_WARNINGS) */
  MIA_SHOW_VERBOSE = 2,  /* printed only with MIALLOC_VERBOSE=1 */
};
void mia_report(int err, int show, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* A failed allocation request (err: ENOMEM, EOVERFLOW for a size that is too
 * large or a count * size that overflows, EINVAL for a bad alignment):
 * reported, and returns the errno value the caller sets (ENOMEM or EINVAL). */
int mia_alloc_error(int err, size_t count, size_t size, size_t alignment) mia_cold;
void mia_output_to(mi_output_fun *out, void *arg, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- options (options.c) ---- */
void mia_options_init(void);
long mia_option_get_fast(mi_option_t option);
bool mia_option_is_default(mi_option_t option);

/* ---- cpu features (cpu.c) ---- */
typedef struct mia_cpu_features_s {
  bool detected, erms, fsrm, fsrs, popcnt;
} mia_cpu_features_t;
extern mia_cpu_features_t mia_cpu;
void mia_cpu_detect(void);
void mia_memcpy(void *dst, const void *src, size_t n);
void *mia_memzero(void *dst, size_t n);   /* returns dst, so a caller can tail-call it */

/* ---- process and thread state (init.c) ---- */
extern mia_theap_t mia_theap_empty;
extern mia_page_t mia_page_empty;
extern mia_subproc_t mia_subproc_main;
extern uintptr_t mia_process_secret;

/* One splitmix64 step: distinct inputs give unrelated outputs.  Mixed with
 * the process secret it makes keys and seeds without a system call. */
static inline uint64_t mia_mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}
extern _Atomic(int) mia_process_state;   /* 0 none, 1 initialising, 2 ready */
extern bool mia_redirected;
void mia_process_init(void);
mia_theap_t *mia_thread_init_slow(void);
mia_tld_t *mia_thread_data_alloc(void);
void mia_thread_data_free(mia_tld_t *tld);
uint64_t mia_tlds_purge_overdue(uint64_t now, uint64_t grace);
uint64_t mia_process_start(void);
void mia_deferred_free(mia_theap_t *theap, bool force);

/* ---- the page map (pagemap.c) ---- */
#define MIA_MAP_TOP_SHIFT 36     /* one leaf per 64 GiB */
#define MIA_MAP_TOP_COUNT ((size_t)1 << (47 - MIA_MAP_TOP_SHIFT))
#define MIA_MAP_LEAF_COUNT ((size_t)1 << (MIA_MAP_TOP_SHIFT - MIA_SLICE_SHIFT))
extern mia_page_t **mia_pagemap_top[MIA_MAP_TOP_COUNT];
void mia_pagemap_init(void);
bool mia_pagemap_ensure(void *start, size_t size);
void mia_pagemap_set(void *start, size_t slices, mia_page_t *page);

/* Which page owns p, for p below 2^47 (the caller has tested it): NULL for
 * any address mialloc does not own.  Two dependent loads. */
static inline mia_page_t *mia_page_of_in_range(const void *p) {
  uintptr_t u = (uintptr_t)p;
  mia_page_t **leaf = mia_pagemap_top[u >> MIA_MAP_TOP_SHIFT];
  return leaf[(u >> MIA_SLICE_SHIFT) & (MIA_MAP_LEAF_COUNT - 1)];
}

/* The same for any p: NULL for non-canonical and kernel addresses too. */
static inline mia_page_t *mia_page_of(const void *p) {
  if (mia_unlikely((uintptr_t)p >> 47)) return NULL;
  return mia_page_of_in_range(p);
}

/* The release free's one test (fastpath.h): bits no block start has, the
 * page map's range (47 bits) and 16-byte alignment.  Blocks of aligned
 * allocations with an offset are the only ones off the boundary.  Builds
 * with padding records or secure checks test every block start instead. */
#define MIA_FREE_ODD_BITS ((~(uintptr_t)0 << 47) | 15)
#if !MIALLOC_PADDING && !MIALLOC_SECURE
#define MIA_FREE_TESTS_ODD 1
#else
#define MIA_FREE_TESTS_ODD 0
#endif

/* Secure builds end every page (and huge span) with a guard page, so an
 * overflow off a page's last block traps instead of running into the next
 * page or the next segment's metadata.  None elsewhere, nor where OS pages
 * are too big to spare one per 64 KiB slice. */
static inline size_t mia_page_guard_size(void) {
#if MIALLOC_SECURE
  size_t ps = mia_prim_page_size();
  return ps <= MIA_SLICE_SIZE / 8 ? ps : 0;
#else
  return 0;
#endif
}

static inline mia_segment_t *mia_segment_of_page(const mia_page_t *page) {
  return (mia_segment_t *)((uintptr_t)page & ~(MIA_SEGMENT_SIZE - 1));
}

/* A page's free_key and flags are written by its owner and read by every
 * thread that frees into the page: relaxed atomics, which compile to the
 * plain loads and stores the fast paths had (x86-64 and arm64 alike), but
 * say so to the compiler and to ThreadSanitizer.  Readers other than the
 * owner only ever route a free by them; the handshakes that order a page's
 * hand-over live in its thread_free word. */
static inline uintptr_t mia_page_free_key(const mia_page_t *page) {
  return __atomic_load_n(&page->free_key, __ATOMIC_RELAXED);
}

static inline void mia_page_set_free_key(mia_page_t *page, uintptr_t key) {
  __atomic_store_n(&page->free_key, key, __ATOMIC_RELAXED);
}

static inline uint8_t mia_page_flags(const mia_page_t *page) {
  return __atomic_load_n(&page->flags, __ATOMIC_RELAXED);
}

static inline void mia_page_set_flags(mia_page_t *page, uint8_t flags) {
  __atomic_store_n(&page->flags, flags, __ATOMIC_RELAXED);
}

/* Raise a flag in both places, keeping the rest of free_key as it is: a
 * huge page's key is MIA_PAGE_IN_FULL whatever its flags say (segment.c),
 * which mia_page_set_flag would rebuild from the flags. */
static inline void mia_page_add_flag(mia_page_t *page, uint8_t flag) {
  mia_page_set_flags(page, (uint8_t)(mia_page_flags(page) | flag));
  mia_page_set_free_key(page, mia_page_free_key(page) | flag);
}

/* The carved blocks, as a thread other than the owner may read it (secure
 * builds' checks of a free or a realloc): it only grows while the page is
 * in use, so an older value still covers every block handed out. */
static inline uint32_t mia_page_capacity(const mia_page_t *page) {
  return __atomic_load_n(&page->capacity, __ATOMIC_RELAXED);
}

/* ---- size classes (bins.c) ---- */
extern size_t mia_bin_size[MIA_BIN_HUGE + 1];
void mia_bins_init(void);

static inline size_t mia_wsize(size_t size) { return (size + MIA_WORD_SIZE - 1) / MIA_WORD_SIZE; }

/* Bins of 16 bytes, then 16-byte steps to 64, then four per power of two
 * (waste at most 20% of a block, 10% on average).  Every block is 16-aligned
 * and at least 16 bytes: C17 wants malloc(n) aligned for any type that fits
 * in n (a long double fits in 24 bytes), compilers assume 16-byte alignment
 * of operator new on x86-64, and a freed block's second word must be its
 * own (release builds mark it, see MIA_FREE_MARK). */
static inline uint8_t mia_bin_of(size_t size) {
  size_t w = mia_wsize(size);
  if (w <= 2) return 1;
  if (w <= 8) return (uint8_t)((w + 1) / 2);
  w--;
  unsigned b = 63u - (unsigned)__builtin_clzl(w);
  return (uint8_t)(((b << 2) | ((w >> (b - 2)) & 3)) - 7);
}

/* ---- free-list links: encoded with per-page keys in secure mode ---- */
void mia_free_list_corrupted(const mia_page_t *page, const mia_block_t *b, uintptr_t link) mia_cold;

/* Secure builds: next + key1, rotated, xor key0 -- the end of a list too,
 * so a zero word (common in live data) never reads as a valid link. */
static inline uintptr_t mia_link_decode(const mia_page_t *page, uintptr_t x) {
#if MIALLOC_SECURE
  x ^= page->keys[0];
  x = (x >> 17) | (x << 47);
  return x - page->keys[1];
#else
  (void)page;
  return x;
#endif
}

#if MIALLOC_SECURE
/* The index of the block that starts at p, or a number above the page's
 * capacity when p is not a block start (see div_inv in types.h). */
static inline uint64_t mia_block_index_exact(const mia_page_t *page, const void *p) {
  uint64_t prod = ((uintptr_t)p - (uintptr_t)page->start) * page->div_inv;
  unsigned shift = page->div_shift;
  return (prod >> shift) | (prod << ((64 - shift) & 63));   /* rotate right */
}
#endif

/* The bytes a page's blocks may occupy (secure builds keep it). */
static inline uintptr_t mia_page_area_size(const mia_page_t *page) {
#if MIALLOC_SECURE
  return page->area_size;
#else
  return (uintptr_t)page->reserved * page->block_size;
#endif
}

/* Could this link word be one of ours (a link into the page, or the end)? */
static inline bool mia_link_plausible(const mia_page_t *page, uintptr_t x) {
  return x == 0 || (x - (uintptr_t)page->start < mia_page_area_size(page) && (x & (MIA_WORD_SIZE - 1)) == 0);
}

/* The link of b, decoded; false when it leads out of its page (secure and
 * debug builds check: it was overwritten by an overflow or a write after
 * free). */
static inline bool mia_block_next_ok(const mia_page_t *page, const mia_block_t *b, mia_block_t **next) {
#if MIALLOC_SECURE || MIALLOC_DEBUG
  uintptr_t x = mia_link_decode(page, (uintptr_t)b->next);
  *next = (mia_block_t *)x;
  return mia_link_plausible(page, x);
#else
  (void)page;
  *next = b->next;
  return true;
#endif
}

static inline mia_block_t *mia_block_next(const mia_page_t *page, const mia_block_t *b) {
  mia_block_t *next;
  if (mia_likely(mia_block_next_ok(page, b, &next))) return next;
  /* report it and cut the list rather than follow it */
  mia_free_list_corrupted(page, b, (uintptr_t)next);
  return NULL;
}

static inline void mia_block_set_next(const mia_page_t *page, mia_block_t *b, mia_block_t *next) {
#if MIALLOC_SECURE
  uintptr_t x = (uintptr_t)next + page->keys[1];
  x = (x << 17) | (x >> 47);
  b->next = (mia_block_t *)(x ^ page->keys[0]);
#else
  (void)page;
  b->next = next;
#endif
}

/* ---- pages (page.c) ---- */

/* A page's thread_free word: the head of the list of other threads' frees
 * in the low 48 bits (pages lie in the page map's 47-bit space), how many
 * blocks the list holds in the next 14 (a page holds at most 8192), and
 * the page's notification state in the top two.  Counted in the word each
 * push changes, the owner takes the list without walking it: the walk
 * missed the cache on every block, which the freeing thread wrote last.
 *
 * The state rides in the same word so that a remote free pushes its block
 * and learns what the owner expects of it in one atomic step:
 *   FULL    the owner parked the page in its full list (only ever set with
 *           the list empty); the push that finds it turns it into QUEUED
 *           and puts the page on the owner's remote list
 *   QUEUED  the page is on its owner's remote list, or about to be pushed
 *           there: until the owner clears it, the page is not freed */
#define MIA_TF_COUNT_SHIFT 48
#define MIA_TF_FULL ((uintptr_t)1 << 62)
#define MIA_TF_QUEUED ((uintptr_t)1 << 63)
#define MIA_TF_STATE (MIA_TF_FULL | MIA_TF_QUEUED)
static inline mia_block_t *mia_tf_head(uintptr_t word) {
  return (mia_block_t *)(word & (((uintptr_t)1 << MIA_TF_COUNT_SHIFT) - 1));
}
static inline uint32_t mia_tf_count(uintptr_t word) {
  return (uint32_t)((word & ~MIA_TF_STATE) >> MIA_TF_COUNT_SHIFT);
}
/* Whether other threads freed blocks the owner has not taken in yet. */
static inline bool mia_page_has_remote(mia_page_t *page) {
  return mia_tf_head(atomic_load_explicit(&page->thread_free, memory_order_relaxed)) != NULL;
}
void mia_page_init(mia_page_t *page, size_t block_size, uint8_t bin, bool is_zero);
void mia_page_collect(mia_page_t *page);
void mia_page_collect_to_alloc(mia_page_t *page);
bool mia_page_collect_unowned(mia_page_t *page);
/* A page on its owner's remote list, or claimed for it by a remote free
 * about to push it, must not go back to its segment: the list would keep
 * a pointer to it (freed, then purged or reused). */
static inline bool mia_page_queued(mia_page_t *page) {
  return (atomic_load_explicit(&page->thread_free, memory_order_acquire) & MIA_TF_QUEUED) != 0;
}

/* Blocks to hand out now: the free list, or the blocks a sampling stream
 * holds back until its sample is taken (they are free all the same: a
 * page holding them must not be parked as full, or left there). */
static inline bool mia_page_has_free(const mia_page_t *page) {
  return page->free != NULL || page->sample_rest != NULL;
}
bool mia_page_extend(mia_page_t *page);
size_t mia_page_usable_of(const mia_page_t *page, const void *p);
void *mia_page_block_start(const mia_page_t *page, const void *p);

/* A pointer into a huge block other than the one handed out: freeing it
 * would free the whole block under its owner.  The block starts at
 * page->start unless it was placed for an alignment or behind a profiler
 * header (the flags say so; such pointers are not checked). */
static inline bool mia_huge_interior(const mia_page_t *page, const void *p) {
  return page->is_huge && (const uint8_t *)p != page->start &&
         (mia_page_flags(page) & (MIA_PAGE_HAS_ALIGNED | MIA_PAGE_HAS_SAMPLED)) == 0;
}
void mia_report_huge_interior(const char *op, const mia_page_t *page, const void *p) mia_cold;
void mia_free_remote(mia_page_t *page, mia_block_t *block);
void mia_free_remote_list(mia_page_t *page, mia_block_t *first, mia_block_t *last, uint32_t n);
void mia_remote_flush(mia_tld_t *tld);

/* A block in a thread's batch of remote frees (MIA_REMOTE_BATCH, free.c)
 * carries the free mark and a link with this bit set, to the next block of
 * the batch or, for the last one, to itself: a block of the same page.
 * Its owner, which cannot see other threads' batches, tells it from live
 * data that holds the mark by that link (mia_block_batched, check.c): live
 * data's first word is rarely odd and next to never a tagged block address
 * of the same page. */
#define MIA_BATCHED_LINK_TAG ((uintptr_t)1)

/* Release and secure builds mark every freed block's second word with a
 * per-process random value, so a second free of a block still on a free
 * list is seen at once (glibc's tcache does the same): without it the
 * block would go on a list twice and be handed out to two owners.  A block
 * handed out loses its mark.  The mark is only a filter: a block carrying
 * it is searched for on the lists before a free is refused, so it need not
 * be secret (one load and compare; secure builds used to decode and range-
 * check the link word instead, ten instructions on every free).  Debug
 * builds check their padding records, and tools builds leave it to the
 * tool (whose view of a freed block is its link word only).  Every block
 * is 16 bytes or more. */
#if !MIALLOC_PADDING && !MIALLOC_VALGRIND && !MIALLOC_ASAN
#define MIA_FREE_MARK 1
#else
#define MIA_FREE_MARK 0
#endif
/* Release builds test the mark in the generic free.  Secure builds test it,
 * and search the lists from any thread, before they call the generic free
 * (check.c): testing it again there would take a live block holding a
 * freed block's bytes, freed by another thread, for a double free. */
#if MIA_FREE_MARK && !MIALLOC_SECURE
#define MIA_GENERIC_MARK 1
#else
#define MIA_GENERIC_MARK 0
#endif
/* hidden in its declaration too, so the free path loads it directly
 * rather than through the GOT (one instruction less) */
extern uintptr_t mia_free_mark __attribute__((visibility("hidden")));

static inline bool mia_block_marked_free(const void *p) {
#if MIA_FREE_MARK
  return ((const uintptr_t *)p)[1] == mia_free_mark;
#else
  (void)p;
  return false;
#endif
}

static inline void mia_block_set_free_mark(mia_block_t *block) {
#if MIA_FREE_MARK
  ((uintptr_t *)block)[1] = mia_free_mark;
#else
  (void)block;
#endif
}

/* Memory handed out other than by a pop (a huge span's start, a block
 * placed for an alignment inside a bigger one, a guarded slot) may hold
 * the free mark of a block that was there before.  The program would hold
 * a live block that looks freed, and a realloc copying it would pass the
 * mark on to a block start: wiped (a store only where it is there, so
 * untouched memory stays untouched). */
static inline void mia_block_forget_mark(void *p) {
#if MIA_FREE_MARK
  if (mia_block_marked_free(p)) ((uintptr_t *)p)[1] = 0;
#else
  (void)p;
#endif
}

/* Blocks handed out lose their free mark, so that a block the program
 * never wrote to does not look free; secure builds wipe the link too, so
 * that no encoded link is left for the program to read. */
static inline void mia_block_clear_link(mia_block_t *block) {
#if MIALLOC_SECURE
  block->next = NULL;
#endif
#if MIA_FREE_MARK
  ((uintptr_t *)block)[1] = 0;
#else
  (void)block;
#endif
}

/* Does the block at p look free, so that freeing it must first search its
 * page's lists?  The free mark where the build has one; secure tools
 * builds read the link word, which decodes as a link on every listed
 * block. */
static inline bool mia_block_looks_free(const mia_page_t *page, const void *p) {
#if MIA_FREE_MARK
  (void)page;
  return mia_block_marked_free(p);
#elif MIALLOC_SECURE
  return mia_link_plausible(page, mia_link_decode(page, (uintptr_t)((const mia_block_t *)p)->next));
#else
  (void)page, (void)p;
  return false;
#endif
}

/* Hand out the first block of a page's (non-empty) free list. */
static inline void *mia_page_pop_finish(mia_page_t *page, mia_block_t *block, bool zero) {
  mia_block_clear_link(block);
  page->used++;
  if (zero) {
    if (page->free_is_zero) block->next = NULL;
    else return mia_memzero(block, page->block_size);
  }
  return block;
}

void *mia_page_pop_bad_link(mia_page_t *page, bool zero) mia_noinline;

/* A bad link goes to a tail call, so malloc's fast path needs no frame. */
static inline void *mia_page_pop(mia_page_t *page, bool zero) {
  mia_block_t *block = page->free;
  mia_block_t *next;
  mia_assert((uint8_t *)block >= page->start && page->used < page->capacity);
  if (mia_unlikely(!mia_block_next_ok(page, block, &next))) return mia_page_pop_bad_link(page, zero);
  page->free = next;
  /* the next pop reads and writes that block: a block another thread
   * freed was last written on that thread's core, and the miss would
   * stall the next malloc (larson: 74 % of malloc's samples) */
  mia_prefetch_write(next);
  return mia_page_pop_finish(page, block, zero);
}

/* ---- theaps (theap.c) ---- */
void mia_theap_init(mia_theap_t *theap, mia_tld_t *tld);
void mia_page_set_flag(mia_page_t *page, uint8_t flag, bool on);
void *mia_malloc_huge(mia_theap_t *theap, size_t size, bool zero);
size_t mia_theap_block_size(const mia_theap_t *theap, size_t size);
void mia_theap_split_groups(mia_theap_t *theap);
void mia_theap_share_groups(mia_theap_t *theap);
void *mia_malloc_generic(size_t size, mia_theap_t *theap, bool zero) mia_noinline;
void *mia_count_overflow(size_t count, size_t size) mia_noinline mia_cold;   /* count * size overflows: NULL, errno set */
void mia_page_retire(mia_page_t *page) mia_noinline;
void mia_theap_collect(mia_theap_t *theap, bool force);
void mia_theap_abandon_to(mia_theap_t *theap, mia_segment_t **list, mia_lock_t *lock);
void mia_theap_destroy_pages(mia_theap_t *theap);
void mia_theap_reset_queues(mia_theap_t *theap);
void mia_theap_queue_page(mia_theap_t *theap, mia_page_t *page);
void mia_theap_process_remote(mia_theap_t *theap);
void mia_theap_collect_page_from_full(mia_theap_t *theap, mia_page_t *page);

/* ---- segments (segment.c) ---- */
mia_page_t *mia_segment_page_alloc(mia_tld_t *tld, size_t slices);
mia_segment_t *mia_segment_reclaim(mia_tld_t *tld, size_t count);
bool mia_segments_have_room(const mia_tld_t *tld, size_t count);
size_t mia_abandoned_note(mia_subproc_t *sp, mia_segment_t *seg);
uint64_t mia_abandoned_purge(mia_subproc_t *sp, uint64_t now, bool force);
void mia_abandoned_freed_into(mia_subproc_t *sp);
void mia_abandoned_scan_due(mia_subproc_t *sp, uint64_t now, bool force);
uint64_t mia_purge_delay_arena(void);
void mia_segment_page_free(mia_page_t *page);
void mia_segment_ops_begin(mia_tld_t *tld);
void mia_segment_ops_end(mia_tld_t *tld);
mia_page_t *mia_huge_page_alloc(mi_heap_t *heap, size_t size, size_t alignment);
void mia_huge_page_free(mia_page_t *page);
void mia_huge_release(mia_page_t *page);
void mia_huge_destroy(mia_segment_t *seg);
void mia_huge_move_to_heap(mia_segment_t *seg, mi_heap_t *heap);
void mia_segment_destroy(mia_segment_t *seg);
void mia_segment_visit_pages(mia_segment_t *seg, bool (*fun)(mia_page_t *page, void *arg), void *arg,
                             bool *stop);
bool mia_huge_page_grow(mia_page_t *page, size_t newsize);
void mia_huge_page_shrink(mia_page_t *page, size_t newsize);
uint8_t *mia_huge_span_end(const mia_page_t *page);
void mia_huge_set_used(mia_page_t *page, size_t used);
bool mia_huge_expand(mia_page_t *page, size_t used);
void mia_segments_purge(mia_tld_t *tld, bool force);
uint64_t mia_segments_purge_overdue(mia_tld_t *tld, uint64_t now, uint64_t grace);
void mia_segments_destroy(mia_tld_t *tld);
void mia_segments_abandon(mia_tld_t *tld, mia_segment_t **list, mia_lock_t *lock);
bool mia_segment_reclaim_one(mia_tld_t *tld, mia_segment_t **out);
mia_segment_t *mia_segments_reclaim_empty(mia_tld_t *tld, long max);

/* ---- arenas (arena.c) ---- */
/* guard bits of a segment as the arena keeps them (arena.c) */
#define MIA_GUARD_LAST_SLICE ((uint64_t)1 << (MIA_SEGMENT_SLICES - 1))   /* also a huge span's end */
bool mia_arena_reserved(mia_subproc_t *sp, const void *p);
bool mia_arena_serves(mia_subproc_t *sp, const void *segment, const mia_arena_t *only);
mia_segment_t *mia_arena_alloc_segments(mia_subproc_t *sp, mia_arena_t *only, size_t count, bool *is_zero,
                                        uint64_t keep, uint64_t *guards);
mia_arena_t *mia_arena_by_id(mia_subproc_t *sp, int id);
void mia_arenas_destroy(mia_subproc_t *sp);
void mia_arenas_visit_claimed(mia_subproc_t *sp, size_t (*fn)(mia_segment_t *seg, void *arg), void *arg);
void mia_subprocs_visit_claimed(size_t (*fn)(mia_segment_t *seg, void *arg), void *arg);
uint64_t mia_subprocs_purge_due(uint64_t now);
/* the claimed pages added up (stats.c) */
typedef struct mia_heap_usage_s {
  size_t live_bytes;                   /* blocks handed out, outside huge spans */
  size_t bin_free[MIA_BIN_COUNT + 1];  /* blocks free per size class, never carved included */
} mia_heap_usage_t;
void mia_stats_heap_usage(mia_heap_usage_t *usage);
void mia_arena_free_segments(mia_subproc_t *sp, void *segment, size_t count, uint64_t guards);
void mia_arenas_purge(mia_subproc_t *sp, bool force);
size_t mia_arena_reserved_total(void);
mia_arena_t *mia_arena_reserve(mia_subproc_t *sp, size_t bytes);
bool mia_arena_commits_on_demand(void);
mia_arena_t *mia_arena_reserve_huge(mia_subproc_t *sp, size_t gib);
bool mia_arena_extend_segments(mia_segment_t *segment, size_t count, size_t extra, bool *is_zero);

/* ---- pointer snapshots for walks that call out (snapshot.c) ---- */
#define MIA_SNAPSHOT_INLINE 32
typedef struct mia_snapshot_s {
  void **items;
  size_t count, cap;
  size_t mapped;                         /* bytes mapped for items; 0: inline */
  void *inline_items[MIA_SNAPSHOT_INLINE];
} mia_snapshot_t;
void mia_snapshot_init(mia_snapshot_t *s);
bool mia_snapshot_fit(mia_snapshot_t *s, size_t n);
void mia_snapshot_done(mia_snapshot_t *s);
bool mia_snapshot_lock(mia_snapshot_t *s, mia_lock_t *lock, size_t (*count)(const void *owner),
                       const void *owner, const char *fn, const char *what);

/* ---- heaps (heap.c) and sub-processes (subproc.c) ---- */
mia_theap_t *mia_heap_theap_slow(mi_heap_t *heap) mia_noinline;
void mia_heap_link_theap(mi_heap_t *heap, mia_theap_t *theap);
bool mia_visit_abandoned(mi_heap_t *heap, bool visit_all_blocks, mi_block_visit_fun *visitor, void *arg);
void mia_heap_unlink_theap(mia_theap_t *theap);
void mia_thread_release_heap_theaps(mia_tld_t *ttld);
mia_theap_t *mia_theap_use_process_main(void);
void mia_theap_restore(mia_theap_t *own);
void mia_segments_destroy_lists(mia_segment_t *abandoned, mia_segment_t *huge);
mi_heap_t *mia_heap_of_page(const mia_page_t *page);
void mia_heaps_fork_prepare(void);
void mia_heaps_fork_release(bool child);
void mia_subprocs_fork_prepare(void);
void mia_subprocs_fork_parent(void);
void mia_subprocs_fork_child(void);

/* ---- sampling streams (prof.c) for the profiler and guarded sampling:
 * everything here runs only in slow paths, and only while
 * mia_sampling_enabled is set ---- */
extern bool mia_sampling_enabled;
extern bool mia_prof_any_running;
void mia_sampling_update(void);
double mia_ln(double u);
/* Is a profiler or guarded sampling on anywhere?  Tested in slow paths
 * only; constant false in builds with neither. */
static inline bool mia_sampling_on(void) {
#if MIALLOC_PROF || MIALLOC_GUARDED
  return __atomic_load_n(&mia_sampling_enabled, __ATOMIC_RELAXED);
#else
  return false;
#endif
}
bool mia_prof_malloc(mia_theap_t *theap, size_t size, bool zero, void **out) mia_noinline;
void *mia_prof_page_due(mia_theap_t *theap, mia_page_t *page, size_t size, bool zero) mia_noinline;
#define MIA_LEN_UNKNOWN SIZE_MAX
void mia_prof_account(mia_page_t *page, size_t len) mia_noinline;
bool mia_prof_free(mia_page_t *page, void *block, void *p) mia_noinline;
void mia_prof_page_destroyed(mia_page_t *page);
void mia_prof_fork_child(mia_prof_t *prof);
bool mia_sampling_suspend(void);
void mia_sampling_resume(bool was_suspended);
void *mia_prof_user_pointer(mia_page_t *page, void *block);

/* ---- misuse checks of secure and debug builds (check.c) ---- */
#define MIA_PADDING_SIZE 16
/* What a padded build asks for: the program's bytes, at least a link word
 * (a freed block's link must not overwrite its padding record), and the
 * record. */
static inline size_t mia_padded_request(size_t size) {
  return (size < sizeof(void *) ? sizeof(void *) : size) + MIA_PADDING_SIZE;
}
void *mia_theap_malloc_checked(mia_theap_t *theap, size_t size, bool zero) mia_noinline;
void mia_checked_handout(void *p, size_t size, bool zero, bool unsampled);
void mia_free_checked(void *p) mia_noinline;
void mia_free_secure_slow(mia_page_t *page, void *p) mia_noinline;
bool mia_free_is_double(mia_page_t *page, const void *block, bool owner) mia_noinline;
void mia_report_double_free(const mia_page_t *page, const void *p) mia_cold;
void mia_free_marked(void *p, mia_page_t *page) mia_noinline;
void mia_free_secure_suspect(mia_page_t *page, void *p) mia_noinline;
bool mia_realloc_check(mia_page_t *page, void *p) mia_noinline;
void mia_padding_set(void *p, size_t size);
size_t mia_padding_usable(const mia_page_t *page, const void *p);
void mia_check_fresh_blocks(mia_page_t *page, uint8_t *first, size_t n);
void mia_show_leaks(void);

/* ---- Valgrind and AddressSanitizer annotations (annotate.c) ---- */
#if MIALLOC_VALGRIND || MIALLOC_ASAN
#define MIA_ANNOTATED 1
void mia_annot_alloc(void *p, size_t size, bool zero) mia_noinline;
void mia_annot_free(void *p) mia_noinline;
void mia_annot_accessible(void *p, size_t n) mia_noinline;
void mia_annot_zero(void *p, size_t size) mia_noinline;
bool mia_annot_destroyed_block(mia_page_t *page, void *block, void *arg);
#else
#define MIA_ANNOTATED 0
static inline void mia_annot_alloc(void *p, size_t size, bool zero) { (void)p; (void)size; (void)zero; }
static inline void mia_annot_free(void *p) { (void)p; }
static inline void mia_annot_accessible(void *p, size_t n) { (void)p; (void)n; }
static inline void mia_annot_zero(void *p, size_t size) { memset(p, 0, size); }
static inline bool mia_annot_destroyed_block(mia_page_t *page, void *block, void *arg) {
  (void)page; (void)block; (void)arg;
  return true;
}
#endif

/* Can a block be resized in place?  Not when tools track its exact size. */
static inline bool mia_annotated(void) { return MIA_ANNOTATED; }

/* Secure and debug builds report every misuse as an error. */
static inline bool mia_checked_build(void) {
#if MIALLOC_SECURE || MIALLOC_DEBUG
  return true;
#else
  return false;
#endif
}

/* Can a block change size in place?  Not when a padding record sits at
 * the end of its span. */
static inline bool mia_padded(void) {
#if MIALLOC_PADDING
  return true;
#else
  return false;
#endif
}

/* ---- guarded sampling (guarded.c) ---- */
extern bool mia_guarded_enabled;
void *mia_guarded_alloc(mia_theap_t *theap, size_t size, bool zero);
void mia_guarded_free(mia_page_t *page, void *p);
size_t mia_guarded_usable(const mia_page_t *page, const void *p);
void *mia_guarded_block_start(const mia_page_t *page, const void *p);
void mia_guarded_init(void);
void mia_guarded_options_changed(void);
bool mia_guarded_visit(const mi_heap_t *heap, bool all, mi_block_visit_fun *visitor, void *arg);
bool mia_guarded_page_eligible(size_t block_size);
bool mia_guarded_size_eligible(size_t size);
int32_t mia_guarded_draw(uint64_t random);
long mia_guarded_rate_in_use(void);
void mia_guarded_note_close(uint64_t ns);
/* The SIGSEGV handler that names the block behind a fault on a guard page
 * (guarded sampling's, and the page guards of secure builds). */
void mia_guard_handler_ensure(void);

/* A refilled free list of len blocks, while sampling is on: the common case
 * of mia_prof_account inline -- the page's profiler countdown is armed and
 * no sample point (the profiler's or guarded sampling's) falls inside the
 * list, so the countdowns just go down; with no profiler running anywhere
 * only guarded sampling's counts.  Anything else (a countdown to arm or a
 * list to cut) takes the call.  Refills are frequent where lists are
 * short: the call cost a program like bench/scaling one percent. */
static inline void mia_prof_account_refill(mia_page_t *page, size_t len) {
  int64_t bytes = (int64_t)(len * page->block_size);
  bool prof = __atomic_load_n(&mia_prof_any_running, __ATOMIC_RELAXED);
  bool prof_clear = !prof || page->sample_left >= bytes;
  bool guard_clear = page->guard_left >= (int64_t)len || !__atomic_load_n(&mia_guarded_enabled, __ATOMIC_RELAXED);
  if (prof_clear && guard_clear && page->sample_rest == NULL) {
    if (prof) page->sample_left -= bytes;
    if (page->guard_left >= 0) page->guard_left -= (int32_t)len;
    return;
  }
  mia_prof_account(page, len);
}

/* ---- thinning: purging the free OS pages of sparse pages (thin.c) ----
 * Release builds only: secure and debug builds check or fill freed memory
 * (which a purge would zero), tools builds track it. */
#if MIA_FREE_MARK && !MIALLOC_SECURE
#define MIA_THIN 1
#else
#define MIA_THIN 0
#endif
#define MIA_THIN_MAX_OS_PAGES 128   /* bits of page->held_mask */
#define MIA_THIN_BUDGET_DIV 40      /* thinning's system calls: at most 1/40 of a thread's time */
#define MIA_THIN_BUDGET_MAX ((int64_t)25 * 1000 * 1000)   /* ns of it saved up, at most */
void mia_theap_thin(mia_theap_t *theap, bool force);
bool mia_page_readmit(mia_page_t *page);
void mia_page_mark_held(const mia_page_t *page, uint64_t *freemap);

/* Does the block at block touch a purged OS page of its page?  Then it is
 * free already (held): a free of it is a double free.  Other threads ask
 * too, hence the atomic loads; a live block never touches one. */
static inline bool mia_page_block_held(const mia_page_t *page, const void *block) {
#if MIA_THIN
  if (!(__atomic_load_n(&page->flags, __ATOMIC_RELAXED) & MIA_PAGE_HAS_HELD)) return false;
  size_t shift = (size_t)__builtin_ctzl(mia_prim_page_size());
  size_t off = (size_t)((const uint8_t *)block - page->start);
  size_t first = off >> shift, last = (off + page->block_size - 1) >> shift;
  for (size_t k = first; k <= last && k < MIA_THIN_MAX_OS_PAGES; k++)
    if ((__atomic_load_n(&page->held_mask[k / 64], __ATOMIC_RELAXED) >> (k % 64)) & 1) return true;
  return false;
#else
  (void)page, (void)block;
  return false;
#endif
}

/* ---- live blocks of a page (page.c) ---- */
typedef bool (mia_block_fun)(mia_page_t *page, void *block, void *arg);
size_t mia_page_live_count(mia_page_t *page);
size_t mia_page_free_map(const mia_page_t *page, uint64_t *freemap, bool remote);
#define MIA_PAGE_MAX_BLOCKS (MIA_SLICE_SIZE / MIA_WORD_SIZE)
_Static_assert(MIA_PAGE_MAX_BLOCKS < ((uintptr_t)1 << (62 - MIA_TF_COUNT_SHIFT)),
               "a page's remote-free count fits below the thread_free state bits");
bool mia_page_visit_live(mia_page_t *page, mia_block_fun *fun, void *arg);

/* ---- background purging (purge.c) ---- */
/* Purge deadlines are clock_ms times, 0 for none: the earlier of two. */
static inline uint64_t mia_deadline_min(uint64_t a, uint64_t b) { return a == 0 || (b != 0 && b < a) ? b : a; }
void mia_purge_schedule(size_t dirty_bytes);
void mia_purge_pending_add(size_t dirty_bytes);
void mia_purge_poke(void);
void mia_purge_poke_orphans(void);
void mia_purge_start_deferred_run(mia_tld_t *tld);
void mia_purge_done(size_t purged_bytes);
void mia_purge_fork_child(void);
uint64_t mia_arenas_next_purge(mia_subproc_t *sp);

/* ---- statistics (stats.c) ---- */
extern mia_stats_t mia_stats_global;
void mia_stat_add(mia_stat_count_t *c, int64_t amount);
void mia_stat_page(const mia_page_t *page, int delta);   /* a page given to / taken from a theap */
void mia_stat_local_flush_all(mia_stat_local_t *local);   /* a tld that is done */
void mia_stat_local_sum(mia_stat_local_t *sum, const mia_stat_local_t *local);
void mia_tlds_stat_sum(mia_stat_local_t *sum);   /* init.c: every live tld's, added up */
void mia_segments_pending_flush(mia_tld_t *tld);   /* segment.c: a tld that is done */
void mia_stat_huge(int64_t bytes, int blocks);           /* huge spans: allocated, grown, freed */
void mia_stat_commit(int64_t bytes);                     /* memory newly touched (+) or handed on (-) */
void mia_stat_purge(size_t bytes);                       /* memory purged (one madvise) */
void mia_stat_thin(size_t bytes);                        /* OS pages of a page in use purged */
void mia_stat_reserve(int64_t bytes);                    /* an arena reserved */
void mia_stats_print_at_exit(void);

/* ---- allocation helpers shared by the API files ---- */
void *mia_malloc_aligned(mia_theap_t *theap, size_t size, size_t alignment, size_t offset, bool zero);
void *mia_realloc_zero(mia_theap_t *theap, void *p, size_t newsize, bool zero);
void mia_realloc_in_place(mia_page_t *page, void *p, size_t newsize, size_t usable);
void *mia_realloc_aligned(mia_theap_t *theap, void *p, size_t newsize, size_t alignment, size_t offset,
                          bool zero);
char *mia_strdup(mia_theap_t *theap, const char *s);
char *mia_strndup(mia_theap_t *theap, const char *s, size_t n);
char *mia_realpath(mia_theap_t *theap, const char *fname, char *resolved_name);
void mia_free_generic(void *p, mia_page_t *page) mia_noinline;
void mia_free_invalid(const char *op, void *p) mia_cold;
void mia_free_odd(void *p) mia_cold;
bool mia_odd_interior(const char *op, const mia_page_t *page, const void *p) mia_cold;
size_t mia_usable_size(const void *p);

#endif

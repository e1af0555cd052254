/* thin.c -- thinning: giving back the free OS pages of sparse pages.
 *
 * A program that goes through phases leaves a few survivors of each phase
 * scattered over pages of the size classes it used then (bench/frag).  The
 * pages cannot go back to the segment while one block lives, and no other
 * size class can use their free blocks, so without thinning the RSS grows
 * phase after phase although the live data barely does.
 *
 * A thinning round runs on the owner thread when it takes a fresh page (the
 * heap is about to grow) at most once per MIALLOC_PURGE_DELAY and within a
 * budget of system-call time (thin_budget_left), and from mi_collect.  A
 * page is thinned when it was sparse in two rounds in a row
 * (thin_sparse) and is not the page its bin allocates from: every run of
 * MIA_THIN_MIN_RUN or more OS pages that only free blocks touch is purged.
 * The free blocks touching a purged OS page are taken off the lists and
 * "held": the page remembers which OS pages it purged (held_mask) and so
 * which blocks it holds, without writing to them.  When the bin needs the
 * page again it re-admits them all (mia_page_readmit), which faults the
 * memory back in; a bin whose pages come back soon waits longer before it
 * is thinned again (thin_learn).
 *
 * A held block is free, so a free of one is a double free; the page's
 * MIA_PAGE_HAS_HELD flag sends every free of its blocks to the generic
 * path, which checks (the fast path could not: the block's free mark was
 * purged with it).
 *
 * MIALLOC_PAGE_THIN=0 turns it off, as MIALLOC_PURGE_DELAY=-1 does with
 * every other purge.  Release builds only (MIA_THIN): secure and debug
 * builds check freed memory's contents, which a purge would zero, and
 * tools builds track it.  Not while a profiler or guarded sampling counts
 * blocks on the lists (their countdowns assume lists that only the fast
 * paths shorten).  held_mask has a bit for each OS page of the largest
 * pages (8 slices of 16 OS pages); a kernel with smaller OS pages than
 * 4 KiB would leave pages with more of them alone.
 */
#include "internal.h"

#define MIA_THIN_SPARSE_DIV 4     /* sparse: used <= capacity / 4 */
#define MIA_THIN_MIN_PAGES  2     /* fewer newly purgeable OS pages: not worth a call */
#define MIA_THIN_MIN_RUN    4     /* nor a run of fewer */
#define MIA_THIN_SOON_MS    1000  /* re-admitted sooner: thinned too soon */
#define MIA_THIN_BACKOFF_MAX 8    /* at most 256 purge delays of waiting */

static size_t os_shift(void) { return (size_t)__builtin_ctzl(mia_prim_page_size()); }

static bool mask_test(const uint64_t *mask, size_t k) { return (mask[k / 64] >> (k % 64)) & 1; }

/* The blocks that touch OS page k: [*lo, *hi], clipped to the carved ones. */
static bool os_page_blocks(const mia_page_t *page, size_t k, size_t shift, size_t *lo, size_t *hi) {
  size_t bsize = page->block_size;
  *lo = (k << shift) / bsize;
  *hi = (((k + 1) << shift) - 1) / bsize;
  if (*hi >= page->capacity) *hi = page->capacity - 1;
  return *lo <= *hi;
}

void mia_page_mark_held(const mia_page_t *page, uint64_t *freemap) {
  size_t shift = os_shift();
  for (size_t k = 0; k < MIA_THIN_MAX_OS_PAGES; k++) {
    size_t lo, hi;
    if (!mask_test(page->held_mask, k) || !os_page_blocks(page, k, shift, &lo, &hi)) continue;
    for (size_t i = lo; i <= hi; i++) freemap[i / 64] |= (uint64_t)1 << (i % 64);
  }
}

/* Set the page's flag (and so the owner's free_key) as the mask says. */
static void update_flag(mia_page_t *page) {
  bool held = page->held_mask[0] != 0 || page->held_mask[1] != 0;
  if (held != ((mia_page_flags(page) & MIA_PAGE_HAS_HELD) != 0)) mia_page_set_flag(page, MIA_PAGE_HAS_HELD, held);
}

/* Link the blocks whose bits are set in map, in address order. */
static mia_block_t *list_from_map(const mia_page_t *page, const uint64_t *map, size_t *count) {
  mia_block_t *head = NULL, *tail = NULL;
  size_t n = 0;
  for (size_t w = 0; w < (page->capacity + 63) / 64; w++) {
    for (uint64_t bits = map[w]; bits != 0; bits &= bits - 1) {
      size_t i = w * 64 + (size_t)__builtin_ctzll(bits);
      mia_block_t *b = (mia_block_t *)(page->start + i * page->block_size);
      if (tail != NULL) mia_block_set_next(page, tail, b);
      else head = b;
      mia_block_set_free_mark(b);
      tail = b;
      n++;
    }
  }
  if (tail != NULL) mia_block_set_next(page, tail, NULL);
  *count = n;
  return head;
}

/* A page re-admitted soon after it was thinned paid a purge and the page
 * faults for nothing: a program that cycles through its size classes
 * (requests of one kind, then another, then the first again) would pay
 * them every cycle.  Its bin then waits before it is thinned again, twice
 * as long each time this happens, up to 256 purge delays; a page
 * re-admitted long after its thinning brings the wait down again. */
static void thin_learn(mia_page_t *page) {
  mia_theap_t *theap = atomic_load_explicit(&page->theap, memory_order_relaxed);
  if (theap == NULL) return;
  uint64_t now = mia_prim_clock_ms();
  uint8_t *backoff = &theap->thin_backoff[page->bin];
  if ((uint32_t)now - page->thin_ms >= MIA_THIN_SOON_MS) {
    if (*backoff > 0) (*backoff)--;
    return;
  }
  if (*backoff < MIA_THIN_BACKOFF_MAX) (*backoff)++;
  long delay = mia_option_get_fast(mi_option_purge_delay);
  theap->thin_resume[page->bin] = now + ((uint64_t)(delay > 0 ? delay : 1) << *backoff);
}

/* The bin needs the page again: every held block goes back on its (empty)
 * free list.  Writing their links faults the purged OS pages back in. */
bool mia_page_readmit(mia_page_t *page) {
  if (page->held == 0) return false;
  thin_learn(page);
  mia_assert(page->free == NULL && page->sample_rest == NULL);
  uint64_t map[MIA_PAGE_MAX_BLOCKS / 64];
  memset(map, 0, ((page->capacity + 63) / 64) * sizeof(uint64_t));
  mia_page_mark_held(page, map);
  size_t n;
  page->free = list_from_map(page, map, &n);
  mia_assert(n == page->held);
  page->free_is_zero = false;
  __atomic_store_n(&page->held_mask[0], 0, __ATOMIC_RELAXED);
  __atomic_store_n(&page->held_mask[1], 0, __ATOMIC_RELAXED);
  page->held = 0;
  update_flag(page);
  if (mia_unlikely(mia_sampling_on())) mia_prof_account_refill(page, n);
  return true;
}

/* The OS pages wholly inside the carved part that only free blocks touch,
 * less those purged already. */
static size_t find_purgeable(const mia_page_t *page, const uint64_t *freemap, uint64_t *add) {
  size_t shift = os_shift();
  size_t whole = ((size_t)page->capacity * page->block_size) >> shift;
  if (whole > MIA_THIN_MAX_OS_PAGES) whole = MIA_THIN_MAX_OS_PAGES;
  size_t count = 0;
  add[0] = add[1] = 0;
  for (size_t k = 0; k < whole; k++) {
    size_t lo, hi;
    if (mask_test(page->held_mask, k) || !os_page_blocks(page, k, shift, &lo, &hi)) continue;
    size_t i = lo;
    while (i <= hi && mask_test(freemap, i)) i++;
    if (i > hi) {
      add[k / 64] |= (uint64_t)1 << (k % 64);
      count++;
    }
  }
  return count;
}

/* The next run of set bits at or after *k: [*k, *end); false when none. */
static bool next_run(const uint64_t *mask, size_t *k, size_t *end) {
  while (*k < MIA_THIN_MAX_OS_PAGES && !mask_test(mask, *k)) (*k)++;
  if (*k == MIA_THIN_MAX_OS_PAGES) return false;
  for (*end = *k; *end < MIA_THIN_MAX_OS_PAGES && mask_test(mask, *end); (*end)++) {
  }
  return true;
}

/* Drop runs shorter than MIA_THIN_MIN_RUN OS pages: with another thread
 * running, a madvise costs as much as faulting a few pages back in.
 * Returns how many are left. */
static size_t drop_short_runs(uint64_t *add) {
  size_t left = 0;
  for (size_t k = 0, end; next_run(add, &k, &end); k = end) {
    if (end - k >= MIA_THIN_MIN_RUN) left += end - k;
    else
      for (size_t j = k; j < end; j++) add[j / 64] &= ~((uint64_t)1 << (j % 64));
  }
  return left;
}

/* One madvise per run of OS pages.  With another thread of the process
 * running, each call interrupts its CPU to flush the TLB (11 us a call
 * here, against 1.4 us with no other thread); process_madvise could take
 * a round's runs with one flush (Linux 6.16), but a system call the
 * program does not expect can kill it under a seccomp filter (sshd's
 * privilege separation, browser sandboxes, systemd's SystemCallFilter=). */
static uint64_t purge_runs(const mia_page_t *page, const uint64_t *add, bool lazy) {
  size_t shift = os_shift();
  uint64_t start = mia_prim_clock_ns();
  for (size_t k = 0, end; next_run(add, &k, &end); k = end) {
    mia_prim_purge(page->start + (k << shift), (end - k) << shift, lazy);
    mia_stat_thin((end - k) << shift);
  }
  return mia_prim_clock_ns() - start;
}

/* Purge the page's free OS pages and hold the blocks touching them; the
 * other free blocks make up its free list again, in address order.
 * Returns the ns its system calls took. */
static uint64_t mia_page_thin(mia_page_t *page, bool lazy) {
  /* the lists link the free blocks in the order the program freed them:
   * loading every block's first line ahead turns a chain of cache misses
   * into misses in parallel (pages of small blocks are rarely sparse
   * enough to get here, and their blocks share lines) */
  size_t stride = page->block_size < 64 ? 64 : page->block_size;
  for (uint8_t *b = page->start, *end = page->start + (size_t)page->capacity * page->block_size; b < end; b += stride)
    __builtin_prefetch(b);
  mia_page_collect(page);
  page->thin_used = page->used + 1;
  uint64_t freemap[MIA_PAGE_MAX_BLOCKS / 64];
  /* blocks other threads are freeing now stay where they are: only the
   * owner's lists (and the held blocks) are rebuilt */
  mia_page_free_map(page, freemap, false);
  uint64_t add[2];
  if (find_purgeable(page, freemap, add) < MIA_THIN_MIN_PAGES || drop_short_runs(add) < MIA_THIN_MIN_PAGES) return 0;
  uint64_t spent = purge_runs(page, add, lazy);
  __atomic_store_n(&page->held_mask[0], page->held_mask[0] | add[0], __ATOMIC_RELAXED);
  __atomic_store_n(&page->held_mask[1], page->held_mask[1] | add[1], __ATOMIC_RELAXED);
  /* listed: the free blocks that touch no purged OS page */
  uint64_t held[MIA_PAGE_MAX_BLOCKS / 64];
  memset(held, 0, ((page->capacity + 63) / 64) * sizeof(uint64_t));
  mia_page_mark_held(page, held);
  size_t nheld = 0;
  for (size_t w = 0; w < (page->capacity + 63) / 64; w++) {
    freemap[w] &= ~held[w];
    nheld += (size_t)__builtin_popcountll(held[w]);
  }
  size_t n;
  page->free = list_from_map(page, freemap, &n);
  page->local_free = NULL;
  page->free_is_zero = false;
  page->held = (uint32_t)nheld;
  page->thin_ms = (uint32_t)mia_prim_clock_ms();
  update_flag(page);
  return spent;
}

/* Sparse enough that about half its OS pages or more hold no live block?
 * With a fraction d of k blocks per OS page live, scattered, an OS page is
 * free with chance (1 - d)^(k + 1), about 1 - d (k + 1).  Finding out walks
 * the free lists, a cache miss per free block, so pages of small blocks
 * (many per OS page) must be very sparse to be worth it. */
static bool thin_sparse(const mia_page_t *page) {
  size_t k = mia_prim_page_size() / page->block_size;
  return (size_t)page->used * MIA_THIN_SPARSE_DIV <= page->capacity &&
         (size_t)page->used * 2 * (k + 1) <= page->capacity;
}

/* Is the page one to thin in this round?  Sparse in this round and the one
 * before, and sparser by half than when it was last thinned. */
static bool thin_due(mia_page_t *page, uint32_t round, bool force) {
  if (page->is_guarded || page->sample_rest != NULL || page->capacity == 0 ||
      page->slice_count * (MIA_SLICE_SIZE >> os_shift()) > MIA_THIN_MAX_OS_PAGES || !thin_sparse(page)) {
    page->thin_stamp = 0;
    return false;
  }
  bool seen = page->thin_stamp == round - 1;
  page->thin_stamp = round;
  if (!seen && !force) return false;
  return page->thin_used == 0 || (page->used + 1) * 2 <= page->thin_used;
}

/* What thinning's system calls cost depends on the machine far more than
 * on the page: on this project's development VM a madvise has taken 1.4 us
 * alone and 11 us with a second thread running (its CPU must flush its
 * TLB), and on another day 35 and 135-220 us (a PVM guest, whose TLB
 * flushes go through the hypervisor), when bench/frag ran 1.35x as long as
 * with thinning off.  Rather than guess, the calls are timed, and a
 * thread's rounds may spend at most 1/MIA_THIN_BUDGET_DIV of its time in
 * them: a budget topped up as time passes, holding at most
 * MIA_THIN_BUDGET_MAX (a new thread starts with that much).  A round that
 * finds it spent thins nothing, and one stops when it runs out; mi_collect
 * thins regardless. */
static bool thin_budget_left(mia_theap_t *theap, uint64_t now_ns) {
  uint64_t gone = (now_ns - theap->thin_budget_at) / MIA_THIN_BUDGET_DIV;
  theap->thin_budget_at = now_ns;
  int64_t budget = theap->thin_budget + (gone < (uint64_t)MIA_THIN_BUDGET_MAX ? (int64_t)gone : MIA_THIN_BUDGET_MAX);
  theap->thin_budget = budget < MIA_THIN_BUDGET_MAX ? budget : MIA_THIN_BUDGET_MAX;
  if (theap->thin_budget > 0) return true;
  static _Atomic(bool) told;
  if (!atomic_exchange_explicit(&told, true, memory_order_relaxed))
    mia_verbose("thinning: its system calls used up their share of a thread's time (1/%d); "
                "thinning waits for it to refill\n", MIA_THIN_BUDGET_DIV);
  return false;
}

/* A thinning round over the theap's queues (not the full list: its pages
 * have no free blocks).  The first page of each bin is the one malloc
 * uses, and stays as it is.  A round reads every queued page's header, a
 * cache miss or two each, so the next one waits at least 10 us a page
 * (a heap of 100,000 partly used pages: a round a second, not one per
 * purge delay). */
void mia_theap_thin(mia_theap_t *theap, bool force) {
  long delay = mia_option_get_fast(mi_option_purge_delay);
  uint64_t now_ns = mia_prim_clock_ns(), now = now_ns / 1000000u;
  theap->thin_at = delay < 0 ? UINT64_MAX : now + (uint64_t)delay;
  if (!MIA_THIN || delay < 0 || mia_sampling_on() || !mia_option_get_fast(mi_option_page_thin)) return;
  /* the flag bit must not collide with the owner's thread id */
  if ((theap->tid & MIA_PAGE_FLAG_MASK) != 0) return;
  if (!force && !thin_budget_left(theap, now_ns)) return;
  uint32_t round = ++theap->thin_round;
  if (round == 0) round = theap->thin_round = 1;   /* 0 means "not seen" */
  size_t visited = 0;
  bool lazy = mia_option_get_fast(mi_option_purge_decommits) == 0;
  for (size_t bin = 1; bin <= MIA_BIN_COUNT && (force || theap->thin_budget > 0); bin++) {
    mia_page_t *first = theap->pages[bin].first;
    if (first == NULL || (now < theap->thin_resume[bin] && !force)) continue;
    for (mia_page_t *page = first->next; page != NULL && (force || theap->thin_budget > 0); page = page->next, visited++)
      if (thin_due(page, round, force)) theap->thin_budget -= (int64_t)mia_page_thin(page, lazy);
  }
  if (visited / 100 > (size_t)delay) theap->thin_at = now + visited / 100;
}

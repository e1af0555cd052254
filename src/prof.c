/* prof.c -- the profiler interface: sampling in the slow paths only.
 *
 * Sampling is a Poisson process over allocated bytes.  The fast path has
 * no counter: instead, each page is its own sampling stream.  Whenever a
 * page's free list is refilled (mia_page_collect, mia_page_extend) while a
 * profiler runs, the list is cut after the blocks that fit in the page's
 * byte countdown; the rest wait in page->sample_rest.  The fast path pops
 * the accounted blocks as usual and falls into the slow path exactly at the
 * block where the countdown runs out: that allocation is the sample.  A
 * superposition of independent Poisson streams with one rate is a Poisson
 * stream with that rate over all bytes, so each byte is sampled with the
 * same probability whichever page serves it.  Huge blocks, which are slow
 * path allocations anyway, use one countdown per theap.
 *
 * A sampled allocation gets a block with room for a header in front of
 * the pointer returned: a cookie (so free can tell a sampled block), the
 * requested size and the profiler's sample data.  Its page is flagged
 * MIA_PAGE_HAS_SAMPLED, which sends its frees to the generic path, where
 * on_free runs -- in whichever thread frees it.  The cost per sample is the
 * header: no page of its own.
 */
#include "internal.h"
#include "fastpath.h"

bool mia_sampling_enabled;         /* a running profiler somewhere, or guarded sampling */
bool mia_prof_any_running;         /* a running profiler somewhere */
static _Atomic(int) mia_prof_running_count;

/* Two threads starting and stopping profilers at once could store their
 * results in the other order: whoever stores checks the count again
 * afterwards, so the last store always matches the count. */
void mia_sampling_update(void) {
  int count;
  do {
    count = atomic_load(&mia_prof_running_count);
    bool prof = count > 0;
    bool on = prof || __atomic_load_n(&mia_guarded_enabled, __ATOMIC_ACQUIRE);
    __atomic_store_n(&mia_prof_any_running, prof, __ATOMIC_SEQ_CST);
    __atomic_store_n(&mia_sampling_enabled, on, __ATOMIC_SEQ_CST);
  } while (atomic_load(&mia_prof_running_count) != count);
}

typedef struct mia_sample_hdr_s {
  uintptr_t cookie;                /* process secret ^ user pointer */
  uint64_t size_gen;               /* requested size | the profiler's generation << MIA_SAMPLE_GEN_SHIFT */
  uint8_t data[];                  /* the profiler's sample data */
} mia_sample_hdr_t;

/* A profiler detached and another attached (mi_profile) may meet blocks
 * sampled for the first: their data has the first one's layout, and the
 * second never heard of them.  Each attachment is a generation, kept in the
 * top bits of the header's size (no block is 2^48 bytes), and only samples
 * of the attached generation reach on_free. */
#define MIA_SAMPLE_GEN_SHIFT 48
static size_t mia_sample_size(const mia_sample_hdr_t *hdr) {
  return (size_t)(hdr->size_gen & (((uint64_t)1 << MIA_SAMPLE_GEN_SHIFT) - 1));
}
static uint16_t mia_sample_gen(const mia_sample_hdr_t *hdr) {
  return (uint16_t)(hdr->size_gen >> MIA_SAMPLE_GEN_SHIFT);
}

#define MIA_SAMPLE_MAGIC ((uintptr_t)0x5a3c96e1u)

static uintptr_t mia_sample_cookie(const void *p) {
  return mia_process_secret ^ (uintptr_t)p ^ MIA_SAMPLE_MAGIC;
}

static mia_prof_t *mia_prof_of(mia_theap_t *theap) { return &theap->tld->subproc->prof; }

/* ---- callbacks and attachment ----
 *
 * A program detaches its profiler and frees what the callbacks use (the
 * library's profiler lives in a heap it destroys), while other threads may
 * be about to call one of them.  So a callback is entered by counting it,
 * then checking the state, while mi_profile stores the state, then waits
 * for the count to drop -- all four sequentially consistent, so either the
 * waiting thread sees the call counted, or the call sees the state changed
 * and is not made.  Once mi_profile(NULL) returns, no callback of the old
 * profiler runs or will, and a new one is only attached in a state no
 * callback can read half-written. */
enum { MIA_PROF_DETACHED, MIA_PROF_ATTACHED, MIA_PROF_CHANGING };

static void mia_prof_set_running(mia_prof_t *prof, bool running);

/* The calling thread's count of callbacks it is inside (NULL for a thread
 * that never allocated): a callback that detaches must not wait for itself. */
static uint32_t *mia_prof_own_calls(void) {
  mia_theap_t *theap = mia_theap_get();
  return theap == &mia_theap_empty ? NULL : &theap->tld->thread_tld->prof_calls;
}

/* *own: the counter to give back to mia_prof_leave (a callback that
 * allocates may set its thread up, and must not count down what it did
 * not count up). */
static bool mia_prof_enter(mia_prof_t *prof, uint32_t **own) {
  __atomic_fetch_add(&prof->in_callback, 1, __ATOMIC_SEQ_CST);
  if (__atomic_load_n(&prof->state, __ATOMIC_SEQ_CST) != MIA_PROF_ATTACHED) {
    __atomic_fetch_sub(&prof->in_callback, 1, __ATOMIC_RELEASE);
    return false;
  }
  *own = mia_prof_own_calls();
  if (*own != NULL) (**own)++;
  return true;
}

static void mia_prof_leave(mia_prof_t *prof, uint32_t *own) {
  if (own != NULL) (*own)--;
  __atomic_fetch_sub(&prof->in_callback, 1, __ATOMIC_RELEASE);
}

/* Wait until no other thread is inside a callback (calls are short). */
static void mia_prof_wait_callbacks(mia_prof_t *prof) {
  uint32_t *own = mia_prof_own_calls();
  uint32_t mine = own != NULL ? *own : 0;
  while (__atomic_load_n(&prof->in_callback, __ATOMIC_SEQ_CST) > mine) mia_prim_yield();
}

static bool mia_prof_is_attached(mia_prof_t *prof) {
  return __atomic_load_n(&prof->state, __ATOMIC_ACQUIRE) == MIA_PROF_ATTACHED;
}

/* The child of a fork has only the forking thread: a change another
 * thread was making never finishes there (the profiler is detached), and
 * the only callbacks still running are the forking thread's own. */
void mia_prof_fork_child(mia_prof_t *prof) {
  if (__atomic_load_n(&prof->state, __ATOMIC_RELAXED) == MIA_PROF_CHANGING) {
    mia_prof_set_running(prof, false);
    __atomic_store_n(&prof->state, MIA_PROF_DETACHED, __ATOMIC_RELAXED);
  }
  uint32_t *own = mia_prof_own_calls();
  __atomic_store_n(&prof->in_callback, own != NULL ? *own : 0, __ATOMIC_RELAXED);
}

/* Are this theap's pages sampling streams?  Not in heaps excluded from
 * profiling. */
static bool mia_prof_counting(mia_theap_t *theap) {
  if (theap == NULL || theap == &mia_theap_empty) return false;
  if (!__atomic_load_n(&mia_prof_of(theap)->running, __ATOMIC_ACQUIRE)) return false;
  mi_heap_t *heap = theap->tld->heap;
  return heap != NULL && !heap->no_profile;
}

/* Take a sample now?  Not inside one (the profiler's own work and the
 * allocation carrying the sample): those still count down the streams. */
static bool mia_prof_active(mia_theap_t *theap) { return mia_prof_counting(theap) && !theap->in_sample; }

/* Guarded sampling: main heaps only (a destroyed first-class heap could
 * not take its guarded blocks along). */
static bool mia_guard_counting(mia_theap_t *theap) {
  if (!__atomic_load_n(&mia_guarded_enabled, __ATOMIC_RELAXED)) return false;
  if (theap == NULL || theap == &mia_theap_empty) return false;
  /* the slots belong to the main sub-process: others keep to their memory */
  return theap->tld->heap == &mia_subproc_main.heap_main;
}

static bool mia_guard_counting_page(mia_theap_t *theap, const mia_page_t *page) {
  return mia_guard_counting(theap) && mia_guarded_page_eligible(page->block_size);
}

static bool mia_streams_counting(mia_theap_t *theap, const mia_page_t *page) {
  return mia_prof_counting(theap) || mia_guard_counting_page(theap, page);
}

/* xorshift64*: the theap's own stream, so draws need no lock */
static uint64_t mia_prof_next_random(mia_theap_t *theap) {
  if (theap->random == 0) {
    uint64_t seed = __atomic_load_n(&mia_prof_of(theap)->seed, __ATOMIC_RELAXED);
    if (seed == 0) seed = (uint64_t)mia_option_get_fast(mi_option_guarded_sample_seed);
    /* a fixed seed must give the same draws run after run: mix in the
     * order in which theaps first draw, not their (randomised) address.
     * Otherwise the process's secret is mixed in instead of a system call
     * per stream (one getrandom per thread cost a program that starts
     * thousands of threads about 1 %). */
    static _Atomic(uint64_t) mia_stream_counter;
    uint64_t order = (atomic_fetch_add(&mia_stream_counter, 1) + 1) * 0x9e3779b97f4a7c15ull;
    if (seed != 0) seed ^= order;
    else seed = mia_mix64(mia_process_secret + order);
    theap->random = seed != 0 ? seed : 0x2545f4914f6cdd1dull;
  }
  uint64_t x = theap->random;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  theap->random = x;
  return x * 0x2545f4914f6cdd1dull;
}

/* The natural logarithm of u in [2^-53, 1], for the exponential draws.
 * Not libm's log: linking libm would map it into every process that loads
 * mialloc (about 300 KiB resident in a small C program) for this one
 * function.  u = m * 2^e with m in [sqrt(1/2), sqrt(2)); ln m is
 * 2 atanh(s), s = (m-1)/(m+1), |s| < 0.172, whose series to s^23 is
 * exact to about 1e-16. */
double mia_ln(double u) {
  uint64_t bits;
  memcpy(&bits, &u, sizeof bits);
  int e = (int)((bits >> 52) & 0x7ff) - 1023;
  bits = (bits & 0x000fffffffffffffull) | 0x3ff0000000000000ull;
  double m;
  memcpy(&m, &bits, sizeof m);
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e++;
  }
  double s = (m - 1.0) / (m + 1.0), s2 = s * s;
  /* Horner on 1/1 + s2/3 + s2^2/5 + ... + s2^11/23: no division per term */
  static const double inv_odd[12] = {1.0 / 1,  1.0 / 3,  1.0 / 5,  1.0 / 7,  1.0 / 9,  1.0 / 11,
                                     1.0 / 13, 1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23};
  double sum = inv_odd[11];
  for (int k = 10; k >= 0; k--) sum = sum * s2 + inv_odd[k];
  return 2.0 * s * sum + e * 0.69314718055994530942;
}

/* An exponential draw with the configured mean: bytes to the next sample. */
static int64_t mia_prof_draw(mia_theap_t *theap) {
  /* a draw made while another profiler is attached only comes out a
   * little different */
  double mean = (double)__atomic_load_n(&mia_prof_of(theap)->rate, __ATOMIC_RELAXED);
  if (mean <= 1.0) return 0;
  /* u in (0, 1]: 53 random bits, never 0 */
  double u = (double)((mia_prof_next_random(theap) >> 11) + 1) * (1.0 / 9007199254740992.0);
  double d = -mia_ln(u) * mean;
  return d > 4e18 ? INT64_MAX / 2 : (int64_t)d;
}

static int64_t mia_prof_next_interval(mia_theap_t *theap, size_t asked) {
  if (asked != 0) return asked > (size_t)INT64_MAX / 2 ? INT64_MAX / 2 : (int64_t)asked;
  return mia_prof_draw(theap);
}

/* Guarded sampling alone: a sample due inside a fresh list of len blocks
 * is taken at the list's first block, with guard_left left at the number
 * of blocks it came early; the next countdown is lengthened by as much
 * (mia_guard_page_due), so the samples keep their number and only move to
 * the start of their list.  Finding the exact block would mean walking
 * the list, a cache miss per block: that walk made guarded sampling cost
 * a third of an allocation-heavy program's time. */
static void mia_guard_account(mia_page_t *page, size_t len) {
  if ((uint64_t)page->guard_left >= len) {
    page->guard_left -= (int32_t)len;
    return;
  }
  page->sample_rest = page->free;
  page->sample_rest_len = (uint32_t)len;
  page->sample_rest_is_zero = page->free_is_zero;
  page->free = NULL;
}

/* Cut the page's fresh free list (len blocks; MIA_LEN_UNKNOWN: count
 * them) after the blocks its countdowns cover: the profiler's (bytes) and
 * guarded sampling's (blocks).  When no sample falls inside the list, the
 * countdowns just go down by its length: the list is only walked up to the
 * cut, and most refills have none (a 64 KiB page is an eighth of the
 * default sampling interval). */
void mia_prof_account(mia_page_t *page, size_t len) {
  if (page->sample_rest != NULL || page->free == NULL) return;
  mia_theap_t *theap = atomic_load_explicit(&page->theap, memory_order_relaxed);
  bool prof = mia_prof_counting(theap);
  bool guard = mia_guard_counting_page(theap, page);
  /* a block size guarded sampling leaves alone stays so for the page's
   * life: a countdown that never runs out keeps its refills inline (and
   * this is asked again if it ever does) */
  if (!guard && __atomic_load_n(&mia_guarded_enabled, __ATOMIC_RELAXED) && !mia_guarded_page_eligible(page->block_size))
    page->guard_left = INT32_MAX;
  if (!prof && !guard) return;
  if (prof && page->sample_left < 0) page->sample_left = mia_prof_draw(theap);
  if (guard && page->guard_left < 0) page->guard_left = mia_guarded_draw(mia_prof_next_random(theap));
  if (!prof && len != MIA_LEN_UNKNOWN) {
    mia_guard_account(page, len);
    return;
  }
  int64_t bsize = (int64_t)page->block_size;
  int64_t left = prof ? page->sample_left : INT64_MAX;
  int64_t gleft = guard ? page->guard_left : INT64_MAX;
  /* the common case, no sample point inside the list, without dividing */
  if (len != MIA_LEN_UNKNOWN && gleft >= (int64_t)len && left >= (int64_t)len * bsize) {
    if (prof) page->sample_left = left - (int64_t)len * bsize;
    if (guard) page->guard_left = (int32_t)(gleft - (int64_t)len);
    return;
  }
  /* blocks before the first sample point */
  int64_t k = left / bsize;
  if (gleft < k) k = gleft;
  mia_block_t *prev = NULL, *b = page->free;
  int64_t walked = 0;
  while (b != NULL && walked < k) {
    walked++;
    prev = b;
    b = mia_block_next(page, b);
  }
  if (prof) page->sample_left = left - walked * bsize;
  if (guard) page->guard_left = (int32_t)(gleft - walked);
  if (b == NULL) return;
  page->sample_rest = b;
  page->sample_rest_len = len != MIA_LEN_UNKNOWN ? (uint32_t)(len - (size_t)walked) : UINT32_MAX;
  page->sample_rest_is_zero = page->free_is_zero;
  if (prev != NULL) mia_block_set_next(page, prev, NULL);
  else page->free = NULL;
}

/* Allocate size bytes with a sample header in front, and report it.
 * Inline: the profiler unwinds every frame between malloc and its callback,
 * and each costs it more than this function's body. */
static mia_always_inline void *mia_prof_sample(mia_theap_t *theap, size_t size, bool zero, size_t sample_size,
                                               int64_t *next) {
  mia_prof_t *prof = mia_prof_of(theap);
  *next = -1;
  theap->in_sample = true;   /* nested allocations (the callback's) are not sampled */
  uint32_t *own;
  if (!mia_prof_enter(prof, &own)) {
    /* detached since this thread decided to sample: the block the caller
     * would have taken (raw: checked and tools builds set it up on return) */
    void *plain = mia_theap_malloc_raw(theap, size, zero);
    theap->in_sample = false;
    return plain;
  }
  /* debug builds asked for room for a padding record: the program's size
   * is what the profiler hears of (the nested allocation adds it again) */
  if (mia_padded()) size = size > MIA_PADDING_SIZE + sizeof(void *) ? size - MIA_PADDING_SIZE : sizeof(void *);
  size_t hsize = prof->header_size;
  uint8_t *block = NULL;
  if (size > MIA_MAX_ALLOC_SIZE - hsize)
    errno = ENOMEM;
  else   /* a byte at least past the header: for malloc(0) the pointer would be
          * the end of the header's block, which is the start of the next block */
    block = mia_theap_malloc(theap, (size == 0 ? 1 : size) + hsize, zero);
  if (block == NULL) {
    mia_prof_leave(prof, own);
    theap->in_sample = false;
    return NULL;
  }
  mia_page_t *page = mia_page_of(block);
  if (!(mia_page_flags(page) & MIA_PAGE_HAS_SAMPLED)) mia_page_add_flag(page, MIA_PAGE_HAS_SAMPLED);
  if (!page->is_huge) atomic_fetch_add_explicit(&page->sampled_live, 1, memory_order_relaxed);
  uint8_t *p = block + hsize;
  mia_sample_hdr_t *hdr = (mia_sample_hdr_t *)block;
  hdr->size_gen = (uint64_t)size | (uint64_t)prof->generation << MIA_SAMPLE_GEN_SHIFT;
  memset(hdr->data, 0, hsize - sizeof *hdr);
  __atomic_store_n(&hdr->cookie, mia_sample_cookie(p), __ATOMIC_RELEASE);
  size_t asked = prof->profiler.on_alloc(theap->tld->heap, p, size, sample_size, hdr->data,
                                         prof->profiler.arg);
  mia_prof_leave(prof, own);
  *next = mia_prof_next_interval(theap, asked);
  theap->in_sample = false;
  return p;
}

/* The slow path met a page whose countdown ran out: this allocation is
 * the sample.  The held-back blocks return to the free list and are
 * accounted again with the next interval. */
/* The length of the list after a sample, without walking it (a walk is a
 * cache miss per block, often the whole list: more than the sample's own
 * cost).  The sample's nested allocation may have popped blocks of this
 * page, which the used count shows; if it also collected remote frees
 * (used goes down too) the result is a little long, which only moves the
 * next sample.  MIA_LEN_UNKNOWN when the count cannot be right. */
static size_t mia_rest_len_after(const mia_page_t *page, size_t rest_len, uint32_t used_before) {
  if (rest_len == UINT32_MAX || page->used < used_before) return MIA_LEN_UNKNOWN;
  size_t popped = page->used - used_before;
  return popped <= rest_len ? rest_len - popped : MIA_LEN_UNKNOWN;
}

/* The sample of a guarded-only stream (see mia_guard_account): the list
 * is intact, rest_len blocks long, and guard_left says how many of them
 * the exact sample would have come after. */
static void *mia_guard_page_due(mia_theap_t *theap, mia_page_t *page, size_t size, bool zero, size_t rest_len) {
  int64_t early = page->guard_left;
  void *p = mia_guarded_size_eligible(size) ? mia_guarded_alloc(theap, size, zero) : NULL;
  if (p == NULL) {   /* no slot, or a size guarded sampling leaves alone */
    p = mia_page_pop(page, zero);
    rest_len--;
  }
  int64_t next = (int64_t)mia_guarded_draw(mia_prof_next_random(theap)) + early;
  page->guard_left = next > INT32_MAX ? INT32_MAX : (int32_t)next;
  mia_prof_account(page, rest_len);
  return p;
}

/* Put the page's held-back blocks back on its free list; their count
 * (UINT32_MAX: unknown). */
static size_t mia_page_rejoin_rest(mia_page_t *page) {
  size_t rest_len = page->sample_rest_len;
  page->free = page->sample_rest;
  page->sample_rest = NULL;
  page->sample_rest_len = UINT32_MAX;
  /* held-back blocks were never handed out: as zero as when they were
   * cut off (calloc skips the memset on fresh pages) */
  page->free_is_zero = page->sample_rest_is_zero;
  return rest_len;
}

/* An allocation made while taking a sample: borrow one held-back block
 * and leave this page's own sample pending. */
static void *mia_page_borrow_in_sample(mia_page_t *page, bool zero, size_t rest_len, bool guard_only) {
  void *block = mia_page_pop(page, zero);
  page->sample_rest = page->free;
  page->sample_rest_len = rest_len != UINT32_MAX ? (uint32_t)rest_len - 1 : UINT32_MAX;
  page->sample_rest_is_zero = page->free_is_zero;
  if (guard_only && page->guard_left > 0) page->guard_left--;   /* one handed out */
  page->free = NULL;
  return block;
}

/* The guarded sample due at this allocation, or NULL where the size is
 * not eligible or no slot is free (the caller then hands out a block). */
static void *mia_page_guarded_sample(mia_theap_t *theap, mia_page_t *page, size_t size, bool zero, size_t rest_len) {
  page->guard_left = -1;
  if (!mia_guarded_size_eligible(size)) return NULL;
  void *p = mia_guarded_alloc(theap, size, zero);
  if (p != NULL) mia_prof_account(page, rest_len != UINT32_MAX ? rest_len : MIA_LEN_UNKNOWN);   /* list intact */
  return p;
}

void *mia_prof_page_due(mia_theap_t *theap, mia_page_t *page, size_t size, bool zero) {
  size_t rest_len = mia_page_rejoin_rest(page);
  if (!mia_streams_counting(theap, page)) {
    page->sample_left = -1;   /* sampling stopped: the page is plain again */
    page->guard_left = -1;
    return mia_page_pop(page, zero);
  }
  bool guard_only = !mia_prof_counting(theap) && rest_len != UINT32_MAX;
  if (theap->in_sample) return mia_page_borrow_in_sample(page, zero, rest_len, guard_only);
  if (guard_only) return mia_guard_page_due(theap, page, size, zero, rest_len);
  /* a profiler sample due at the same block goes first: a guarded block
   * has no room for the sample's header, and the profile must see it */
  bool prof_due = mia_prof_active(theap) && page->sample_left >= 0 && page->sample_left < (int64_t)page->block_size;
  if (page->guard_left == 0 && !prof_due && mia_guard_counting_page(theap, page)) {
    void *p = mia_page_guarded_sample(theap, page, size, zero, rest_len);
    if (p != NULL) return p;
  }
  if (prof_due) {
    int64_t next;
    uint32_t used_before = page->used;
    void *p = mia_prof_sample(theap, size, zero, page->block_size, &next);
    page->sample_left = next;
    mia_prof_account(page, mia_rest_len_after(page, rest_len, used_before));
    return p;
  }
  /* nothing due for this allocation after all (a guarded sample that did
   * not fit): a plain block, and the streams go on */
  void *block = mia_page_pop(page, zero);
  mia_prof_account(page, rest_len != UINT32_MAX ? rest_len - 1 : MIA_LEN_UNKNOWN);
  return block;
}

/* Huge allocations (the caller checked size > MIA_LARGE_MAX): one countdown per theap. */
bool mia_prof_malloc(mia_theap_t *theap, size_t size, bool zero, void **out) {
  if (size > MIA_MAX_ALLOC_SIZE || !mia_prof_active(theap)) return false;
  if (theap->huge_sample_left < 0) theap->huge_sample_left = mia_prof_draw(theap);
  size_t bsize = mi_good_size(size);
  if (theap->huge_sample_left >= (int64_t)bsize) {
    theap->huge_sample_left -= (int64_t)bsize;
    return false;
  }
  int64_t next;
  *out = mia_prof_sample(theap, size, zero, bsize, &next);
  theap->huge_sample_left = next;
  return true;
}

/* A free in a page with sampled blocks: report it if p is one.  block is
 * the start of p's block (the span's start for a huge page), which every
 * caller has found already: finding it costs a division.  Returns whether
 * p was sampled; the caller frees the block either way. */
bool mia_prof_free(mia_page_t *page, void *block, void *p) {
  mia_sample_hdr_t *hdr = block;
  if (block == p) return false;
  uintptr_t cookie = mia_sample_cookie(p);
  if (__atomic_load_n(&hdr->cookie, __ATOMIC_ACQUIRE) != cookie) return false;
  /* cleared first: a block reused for an aligned allocation must never
   * look sampled */
  __atomic_store_n(&hdr->cookie, 0, __ATOMIC_RELAXED);
  /* the page's last sampled block: its frees can take the fast path again
   * (only the owner may change the flags; callers found the block start
   * before calling us) */
  if (!page->is_huge && atomic_fetch_sub_explicit(&page->sampled_live, 1, memory_order_acq_rel) == 1 &&
      (mia_page_free_key(page) & ~(uintptr_t)MIA_PAGE_FLAG_MASK) == mia_prim_thread_id())
    mia_page_set_flag(page, MIA_PAGE_HAS_SAMPLED, false);
  mia_prof_t *prof = &mia_segment_of_page(page)->subproc->prof;
  uint32_t *own;
  if (!mia_prof_enter(prof, &own)) return true;
  if (prof->profiler.on_free != NULL && mia_sample_gen(hdr) == prof->generation) {
    /* the callback may allocate: keep it out of sampling in this thread */
    bool was = mia_sampling_suspend();
    prof->profiler.on_free(p, mia_sample_size(hdr), hdr->data, prof->profiler.arg);
    mia_sampling_resume(was);
  }
  mia_prof_leave(prof, own);
  return true;
}

/* Keep this thread's allocations out of both kinds of samples until
 * mia_sampling_resume.  For what libc allocates on the allocator's behalf
 * (the purge thread's TLS block): that memory is not the program's, and a
 * profile that dropped the allocator's frames would pin it on whichever
 * call of the program happened to start the thread.  Returns the previous
 * state, for nesting. */
bool mia_sampling_suspend(void) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) return false;
  bool was = theap->in_sample;
  theap->in_sample = true;
  return was;
}

void mia_sampling_resume(bool was_suspended) {
  mia_theap_t *theap = mia_theap_get();
  if (theap != &mia_theap_empty) theap->in_sample = was_suspended;
}

/* The user pointer of a sampled block, or NULL if block holds none.  The
 * header's size depends on the profiler that took the sample, which may
 * not be the one attached now: each size there can be is tried (a block is
 * sampled if its cookie matches the pointer past that size). */
static void *mia_sample_user(void *block) {
  uintptr_t cookie = __atomic_load_n(&((mia_sample_hdr_t *)block)->cookie, __ATOMIC_ACQUIRE);
  for (size_t h = sizeof(mia_sample_hdr_t); h <= sizeof(mia_sample_hdr_t) + MI_PROFILE_DATA_MAX; h += 16)
    if (cookie == mia_sample_cookie((uint8_t *)block + h)) return (uint8_t *)block + h;
  return NULL;
}

static bool mia_prof_report_block(mia_page_t *page, void *block, void *arg) {
  (void)arg;
  void *p = mia_sample_user(block);
  if (p != NULL) mia_prof_free(page, block, p);
  return true;
}

/* The page goes away with its heap: its live sampled blocks are freed. */
void mia_prof_page_destroyed(mia_page_t *page) { mia_page_visit_live(page, mia_prof_report_block, NULL); }

/* The user pointer of a live block, past a sample header if it has one. */
void *mia_prof_user_pointer(mia_page_t *page, void *block) {
  if (!(mia_page_flags(page) & MIA_PAGE_HAS_SAMPLED)) return block;
  void *p = mia_sample_user(block);
  return p != NULL ? p : block;
}

/* ---- the public interface ---- */

static void mia_prof_set_running(mia_prof_t *prof, bool running) {
  bool was = __atomic_exchange_n(&prof->running, running, __ATOMIC_ACQ_REL);
  if (was == running) return;
  atomic_fetch_add(&mia_prof_running_count, running ? 1 : -1);
  mia_sampling_update();
}

static mia_prof_t *mia_prof_current(void) { return &mi_heap_main()->subproc->prof; }

/* Detach: no callback of the profiler runs once this returns (a call
 * from inside one waits for the other threads' only). */
static void mia_prof_detach(mia_prof_t *prof) {
  for (;;) {
    uint8_t state = __atomic_load_n(&prof->state, __ATOMIC_ACQUIRE);
    if (state == MIA_PROF_DETACHED) return;
    if (state == MIA_PROF_ATTACHED &&
        __atomic_compare_exchange_n(&prof->state, &state, MIA_PROF_CHANGING, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_RELAXED))
      break;
    mia_prim_yield();   /* another thread is attaching or detaching */
  }
  mia_prof_set_running(prof, false);
  mia_prof_wait_callbacks(prof);
  __atomic_store_n(&prof->state, MIA_PROF_DETACHED, __ATOMIC_SEQ_CST);
}

mia_export bool mi_profile(const mi_profiler_t *profiler) {
  mia_prof_t *prof = mia_prof_current();
  if (profiler == NULL) {
    mia_prof_detach(prof);
    return true;
  }
  if (!MIALLOC_PROF) {
    mia_error(ENOSYS, "mi_profile: this build has no profiler support (configured with --disable-prof)\n");
    errno = ENOSYS;
    return false;
  }
  if (profiler->sample_data_size > MI_PROFILE_DATA_MAX || profiler->on_alloc == NULL) {
    mia_error(EINVAL, "mi_profile: sample_data_size %zu exceeds %d or on_alloc is missing\n",
              profiler->sample_data_size, MI_PROFILE_DATA_MAX);
    errno = EINVAL;
    return false;
  }
  uint8_t detached = MIA_PROF_DETACHED;
  if (!__atomic_compare_exchange_n(&prof->state, &detached, MIA_PROF_CHANGING, false, __ATOMIC_SEQ_CST,
                                   __ATOMIC_RELAXED)) {
    mia_error(EBUSY, "mi_profile: a profiler is already attached to this sub-process\n");
    errno = EBUSY;
    return false;
  }
  /* no callback reads these now: every call entered finds the state
   * changing, and the last detach waited for those of the old profiler */
  prof->profiler = *profiler;
  __atomic_store_n(&prof->rate, profiler->sample_rate, __ATOMIC_RELAXED);
  __atomic_store_n(&prof->seed, profiler->seed, __ATOMIC_RELAXED);
  prof->generation++;
  prof->header_size = sizeof(mia_sample_hdr_t) + ((profiler->sample_data_size + 15) & ~(size_t)15);
  /* running first: a detach can only come after the store, and its stop
   * after this start (a sample drawn before the store is a plain block) */
  mia_prof_set_running(prof, profiler->sample_rate > 0);
  __atomic_store_n(&prof->state, MIA_PROF_ATTACHED, __ATOMIC_SEQ_CST);
  return true;
}

mia_export void mi_profiler_start(void) {
  mia_prof_t *prof = mia_prof_current();
  if (mia_prof_is_attached(prof) && __atomic_load_n(&prof->rate, __ATOMIC_RELAXED) > 0)
    mia_prof_set_running(prof, true);
}

mia_export void mi_profiler_stop(void) { mia_prof_set_running(mia_prof_current(), false); }

mia_export void mi_profiler_snapshot(void) {
  mia_prof_t *prof = mia_prof_current();
  uint32_t *own;
  if (!mia_prof_enter(prof, &own)) return;
  if (prof->profiler.on_snapshot != NULL) prof->profiler.on_snapshot(prof->profiler.arg);
  mia_prof_leave(prof, own);
}

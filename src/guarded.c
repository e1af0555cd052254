/* guarded.c -- guarded sampling: about one in MIALLOC_GUARDED_SAMPLE_RATE
 * allocations is placed at the end of a 4 KiB page followed by a page
 * that is never accessible, so an overflow past it traps at once.  Freed
 * guarded blocks are made inaccessible and stay so for a while (at least
 * MIA_GUARD_QUARANTINE guarded allocations), so a use after free traps too;
 * a SIGSEGV handler names the block.
 *
 * Which allocations are sampled is decided by the same per-page streams
 * as the profiler's (prof.c): zero cost on the fast paths, and none at all
 * when the option is 0.  The blocks live in dedicated segments of slots
 * (4 KiB data + 4 KiB guard), never a segment or a page of their own.
 *
 * What a sample costs is system calls, so the layout is made for cheap
 * ones.  Every page of a slot is a mapping of its own: the guard pages are
 * excluded from core dumps, the data pages are not, so the kernel can
 * never merge them, and opening or closing a data page changes one whole
 * mapping's protection without splitting or merging any (about 1.2 us a
 * call here, against 4 us for an mprotect that splits).  Closing keeps the
 * page, so a slot used again does not fault.  Where the kernel has guard
 * markers (Linux 6.13), the guard pages are markers, which survive a
 * protection change of the range around them: one mprotect then reopens a
 * run of neighbouring slots, and slots are handed out in address order
 * (a cursor going round) so the runs are long.  A sample then costs about
 * 2.4 us in one thread: the close at free and a small share of a reopen.
 * Runs of up to 64 slots: each call is dear where system calls are (on a
 * PVM guest the program's TLB refills after it cost more than the call),
 * and a longer run only opens slots whose quarantine has ended anyway.
 */
#include "internal.h"
#include "tls.h"

#include <limits.h>


#define MIA_GUARD_PAGE      4096
#define MIA_GUARD_SLOT      (2 * MIA_GUARD_PAGE)              /* data page, guard page */
#define MIA_GUARD_PER_SLICE (MIA_SLICE_SIZE / MIA_GUARD_SLOT) /* 8 */
#define MIA_GUARD_SLOTS     ((MIA_SEGMENT_SLICES - 1) * MIA_GUARD_PER_SLICE)
#define MIA_GUARD_MAX_SEGMENTS 16
#define MIA_GUARD_QUARANTINE 256    /* guarded allocations a freed slot stays closed for, at least */
#define MIA_GUARD_OPEN_RUN  64      /* slots one mprotect reopens, at most */
#define MIA_GUARD_MAX_SIZE  (MIA_GUARD_PAGE - 16)
#define MIA_GUARD_CLOSE_BUDGET_NS 2000   /* a close up to this dear keeps the default rate */
#define MIA_GUARD_MAX_SPARSER 6          /* the default rate made at most 64 times sparser */

enum {
  SLOT_UNPREPARED = 0,   /* its slice's guard pages are not set yet */
  SLOT_OPEN,             /* free, data page accessible */
  SLOT_LIVE,             /* handed out */
  SLOT_CLOSED,           /* freed, data page inaccessible (quarantine) */
  SLOT_BUSY,             /* a thread is changing its protection */
};

typedef struct mia_guard_seg_s {
  mia_segment_t *seg;
  bool markers;                         /* guard pages are guard markers, not PROT_NONE */
  uint32_t size[MIA_GUARD_SLOTS];       /* bytes asked for */
  uint32_t closed_at[MIA_GUARD_SLOTS];  /* mia_guard_seq when it was freed */
  uint8_t state[MIA_GUARD_SLOTS];
} mia_guard_seg_t;

bool mia_guarded_enabled;
static mia_lock_t mia_guard_lock;
static mia_guard_seg_t *mia_guard_segs[MIA_GUARD_MAX_SEGMENTS];
static size_t mia_guard_seg_count;
static uint32_t mia_guard_cursor;   /* global index of the next slot to look at */
static uint32_t mia_guard_seq;      /* guarded samples drawn so far, placed or not (wraps) */
/* After a search found every slot live or in quarantine (and no segment
 * could be added): samples fail at once until mia_guard_seq reaches
 * mia_guard_retry_seq, when the first quarantine ends, instead of each
 * walking all 8,064 slots under the lock. */
static bool mia_guard_full;
static uint32_t mia_guard_retry_seq;
static mia_prim_fault_fun *mia_guard_old_fun;
static void (*mia_guard_old_plain)(int);

/* the option defaults until mia_guarded_init reads the options */
static size_t mia_guard_min, mia_guard_max = MIA_GUARD_MAX_SIZE;
static long mia_guard_rate;
/* The default rate of secure builds follows what a close costs here (see
 * mia_guarded_note_close); a rate the user chose is kept as it is. */
static bool mia_guard_adaptive;
static uint64_t mia_guard_close_avg;    /* ns, a moving average of the closes timed */
static uint32_t mia_guard_sparser;      /* the rate in use is mia_guard_rate << this */

/* ---- slot addressing ---- */

static uint8_t *slot_in(const mia_guard_seg_t *gs, size_t local) {
  return (uint8_t *)gs->seg + MIA_SLICE_SIZE + local * MIA_GUARD_SLOT;
}

/* The block ends at the guard page and is as large as the size class of
 * its request (the bytes past the request are checked at free instead).
 * The class, not the thread's shared group (theap.c): a free, from any
 * thread, finds the block's start again from its size. */
static size_t slot_room(size_t size) {
  size_t room = mia_bin_size[mia_bin_of(size == 0 ? 1 : size)];
  return room > MIA_GUARD_PAGE ? MIA_GUARD_PAGE : room;
}

static uint8_t *slot_user(uint8_t *slot, size_t size) { return slot + MIA_GUARD_PAGE - slot_room(size); }

/* the slot holding p, from its page; false if the page is not a guarded one */
static bool slot_of(const mia_page_t *page, const void *p, mia_guard_seg_t **gs_out, size_t *local_out) {
  mia_segment_t *seg = mia_segment_of_page(page);
  for (size_t i = 0; i < MIA_GUARD_MAX_SEGMENTS; i++) {
    mia_guard_seg_t *gs = __atomic_load_n(&mia_guard_segs[i], __ATOMIC_ACQUIRE);
    if (gs == NULL) break;
    if (gs->seg != seg) continue;
    *gs_out = gs;
    *local_out = (size_t)((const uint8_t *)p - slot_in(gs, 0)) / MIA_GUARD_SLOT;
    return true;
  }
  return false;
}

void mia_guarded_fork(mia_fork_step_t step) { mia_lock_fork(&mia_guard_lock, step); }

/* ---- set-up ---- */

static void mia_guard_segv(int sig, void *addr, void *info, void *ctx);

/* Installed once, when the first guard page is set: a process that never
 * has one keeps its signal dispositions as they were. */
void mia_guard_handler_ensure(void) {
  static _Atomic(int) installed;
  if (atomic_load_explicit(&installed, memory_order_acquire) != 0 || atomic_exchange(&installed, 1) != 0) return;
  mia_prim_on_segv(mia_guard_segv, &mia_guard_old_fun, &mia_guard_old_plain);
}

/* Set the guard pages of the slice holding slot `first`: each becomes a
 * mapping of its own (see the top of the file), then a marker or PROT_NONE.
 * Done when the cursor first reaches the slice, so a program that samples
 * a little pays for a little.  false if a marker was refused and a guard
 * became PROT_NONE: a run reopened over it would open it too. */
static bool slice_prepare(const mia_guard_seg_t *gs, size_t first) {
  bool markers = gs->markers;
  for (size_t i = first; i < first + MIA_GUARD_PER_SLICE; i++) {
    uint8_t *guard = slot_in(gs, i) + MIA_GUARD_PAGE;
    mia_prim_no_dump(guard, MIA_GUARD_PAGE);
    if (!markers || !mia_prim_guard_set(guard, MIA_GUARD_PAGE)) {
      mia_prim_protect(guard, MIA_GUARD_PAGE, MIA_PROT_NONE);
      markers = false;
    }
  }
  return markers;
}

/* A new segment of slots; caller holds the lock. */
static bool mia_guard_add_segment(void) {
  if (mia_guard_seg_count >= MIA_GUARD_MAX_SEGMENTS) return false;
  size_t meta = (sizeof(mia_guard_seg_t) + mia_prim_page_size() - 1) & ~(mia_prim_page_size() - 1);
  mia_guard_seg_t *gs = mia_prim_reserve(meta, 0, false);
  if (gs == NULL) return false;
  bool is_zero;
  mia_segment_t *seg = mia_arena_alloc_segments(&mia_subproc_main, NULL, 1, &is_zero, 0, NULL);
  if (seg == NULL) {
    mia_prim_release(gs, meta);
    return false;
  }
  if (!is_zero) memset(seg, 0, sizeof *seg);
  seg->cookie = (uintptr_t)seg ^ mia_process_secret;
  seg->subproc = &mia_subproc_main;
  seg->size = MIA_SEGMENT_SIZE;
  seg->used_mask = ~(uint64_t)0;
  seg->heap = &mia_subproc_main.heap_main;
  /* its protection changes page by page; the metadata slice keeps the
   * arena's setting, so the first data page is a mapping of its own too */
  mia_prim_no_thp((uint8_t *)seg + MIA_SLICE_SIZE, MIA_SEGMENT_SIZE - MIA_SLICE_SIZE);
  for (size_t s = 1; s < MIA_SEGMENT_SLICES; s++) {
    mia_page_t *page = &seg->pages[s];
    memset(page, 0, sizeof *page);
    page->slice_count = 1;
    page->start = (uint8_t *)seg + s * MIA_SLICE_SIZE;
    page->block_size = MIA_GUARD_SLOT;
    page->reserved = page->capacity = MIA_GUARD_PER_SLICE;
    page->is_guarded = true;
    mia_page_set_free_key(page, MIA_PAGE_IN_FULL);   /* never a thread id: frees go to the generic path */
    mia_pagemap_set(page->start, 1, page);
  }
  gs->seg = seg;
  /* markers where the kernel takes one (tried on the first guard page) */
  gs->markers = mia_prim_guard_set(slot_in(gs, 0) + MIA_GUARD_PAGE, MIA_GUARD_PAGE);
  size_t index = mia_guard_seg_count;
  __atomic_store_n(&mia_guard_segs[index], gs, __ATOMIC_RELEASE);
  mia_guard_seg_count++;
  mia_guard_cursor = (uint32_t)(index * MIA_GUARD_SLOTS);
  if (index == 0) mia_guard_handler_ensure();
  return true;
}

/* The rate and the size window are read by every thread's slow paths
 * while mi_heap_guarded_set_* may change them: relaxed atomics, since a
 * draw made with the old value just comes out a little different. */
static void mia_guarded_apply(long rate, size_t min, size_t max, bool adaptive) {
  if (max > MIA_GUARD_MAX_SIZE) max = MIA_GUARD_MAX_SIZE;
  __atomic_store_n(&mia_guard_adaptive, adaptive, __ATOMIC_RELAXED);
  if (!adaptive) __atomic_store_n(&mia_guard_sparser, 0, __ATOMIC_RELAXED);
  __atomic_store_n(&mia_guard_rate, rate, __ATOMIC_RELAXED);
  __atomic_store_n(&mia_guard_min, min, __ATOMIC_RELAXED);
  __atomic_store_n(&mia_guard_max, max, __ATOMIC_RELAXED);
  bool on = rate > 0 && min <= max;
  __atomic_store_n(&mia_guarded_enabled, on, __ATOMIC_RELEASE);
  mia_sampling_update();
  if (on)
    mia_verbose("guarded sampling: 1 in %ld allocations of %zu..%zu bytes\n", rate, min, max);
}

void mia_guarded_init(void) {
#if MIALLOC_GUARDED
  /* the window too when the rate is 0: mi_heap_guarded_set_sample_rate
   * may turn sampling on later */
  long rate = mia_option_get_fast(mi_option_guarded_sample_rate);
  bool adaptive = rate > 0 && mia_option_is_default(mi_option_guarded_sample_rate);   /* secure builds' default */
  mia_guarded_apply(rate, mi_option_get_size(mi_option_guarded_min), mi_option_get_size(mi_option_guarded_max),
                    adaptive);
#endif
}

/* Only the main heap takes guarded samples (prof.c: a destroyed
 * first-class heap could not take its slots along), so its settings are
 * the process's; for other heaps these calls change nothing. */
static bool mia_guarded_heap(const mi_heap_t *heap) {
#if MIALLOC_GUARDED
  return heap == &mia_subproc_main.heap_main;
#else
  (void)heap;
  return false;
#endif
}

/* The calling thread's pages draw a new countdown at their next refill,
 * so a new rate or window applies there at once rather than after the
 * countdowns drawn under the old one (up to twice the old rate).  Other
 * threads' pages are theirs to touch: they finish their countdowns.
 * Pages holding blocks back for a due sample keep their state. */
static void mia_guarded_restart_queue(mia_page_t *page) {
  for (; page != NULL; page = page->next)
    if (page->sample_rest == NULL) page->guard_left = -1;
}

static void mia_guarded_restart(mia_theap_t *theap) {
  if (theap == NULL || theap == &mia_theap_empty) return;
  for (size_t bin = 1; bin <= MIA_BIN_COUNT; bin++) mia_guarded_restart_queue(theap->pages[bin].first);
  mia_guarded_restart_queue(theap->full.first);
}

mia_export void mi_heap_guarded_set_sample_rate(mi_heap_t *heap, size_t sample_rate, size_t seed) {
  if (!mia_guarded_heap(heap)) return;
  long rate = sample_rate > (size_t)LONG_MAX ? LONG_MAX : (long)sample_rate;
  mia_guarded_apply(rate, __atomic_load_n(&mia_guard_min, __ATOMIC_RELAXED),
                    __atomic_load_n(&mia_guard_max, __ATOMIC_RELAXED), false);
  mia_theap_t *theap = mia_heap_theap(heap);
  if (theap == NULL || theap == &mia_theap_empty) return;
  if (seed != 0) theap->random = mia_mix64(seed) | 1;   /* xorshift needs a non-zero state */
  mia_guarded_restart(theap);
}

mia_export void mi_heap_guarded_set_size_bound(mi_heap_t *heap, size_t min, size_t max) {
  if (!mia_guarded_heap(heap)) return;
  mia_guarded_apply(__atomic_load_n(&mia_guard_rate, __ATOMIC_RELAXED), min, max,
                    __atomic_load_n(&mia_guard_adaptive, __ATOMIC_RELAXED));
  mia_guarded_restart(mia_heap_theap(heap));
}

/* mi_option_set of a guarded option once the process runs: the rate and
 * window are cached here at start-up, so they are read again and applied
 * at once, as mi_heap_guarded_set_* would be (the calling thread's pages
 * draw new countdowns; other threads' finish theirs). */
void mia_guarded_options_changed(void) {
#if MIALLOC_GUARDED
  if (atomic_load(&mia_process_state) != 2) return;   /* start-up reads them */
  mia_guarded_init();
  mia_guarded_restart(mia_theap_get());
#endif
}

/* ---- the sampling decision (called from the streams in prof.c) ---- */

bool mia_guarded_page_eligible(size_t block_size) {
  return block_size >= __atomic_load_n(&mia_guard_min, __ATOMIC_RELAXED) &&
         block_size <= __atomic_load_n(&mia_guard_max, __ATOMIC_RELAXED) + MIA_PADDING_SIZE + 128;
}

bool mia_guarded_size_eligible(size_t size) {
  if (mia_padded()) size -= MIA_PADDING_SIZE;   /* may include the link word minimum: harmless */
  return size >= __atomic_load_n(&mia_guard_min, __ATOMIC_RELAXED) &&
         size <= __atomic_load_n(&mia_guard_max, __ATOMIC_RELAXED);
}

/* Blocks handed out before a page's next guarded sample: uniform in
 * [0, 2N-2], so the sample is on average the N-th block, and sampling
 * cannot lock onto a program's allocation pattern. */
int32_t mia_guarded_draw(uint64_t random) {
  uint64_t n = (uint64_t)mia_guarded_rate_in_use();
  if (n <= 1) return 0;
  return (int32_t)(random % (2 * n - 1));
}

/* A rate the user chose is used as it is, even while a close timed under
 * the default is still being noted. */
long mia_guarded_rate_in_use(void) {
  long rate = __atomic_load_n(&mia_guard_rate, __ATOMIC_RELAXED);
  if (!__atomic_load_n(&mia_guard_adaptive, __ATOMIC_RELAXED)) return rate;
  return rate << __atomic_load_n(&mia_guard_sparser, __ATOMIC_RELAXED);
}

/* A close took ns.  What a guarded sample costs is mostly its close: one
 * system call, and where other threads of the process run, a TLB flush on
 * their CPUs: on the 2-core development VM 4-8 times what the 16-core
 * machine of doc/secure.md's run 30 paid.  The default rate is meant to cost a few percent
 * of a program that allocates all the time, which holds while a close
 * takes about 2 us; where closes take longer, the default rate becomes
 * sparser by the same factor (a power of two, at most 64), so secure
 * builds keep their cost on such machines too.  The average moves by an
 * eighth of each close, and one close counts at most four times the
 * average (twice the budget while the average is small): a thread
 * preempted in the call must not turn sampling down by more than a step,
 * while closes that stay dear raise the average within a few samples. */
void mia_guarded_note_close(uint64_t ns) {
  if (!__atomic_load_n(&mia_guard_adaptive, __ATOMIC_RELAXED)) return;
  /* racing threads may lose an update to each other: an average either way */
  uint64_t avg = __atomic_load_n(&mia_guard_close_avg, __ATOMIC_RELAXED);
  uint64_t cap = 4 * avg > 2 * MIA_GUARD_CLOSE_BUDGET_NS ? 4 * avg : 2 * MIA_GUARD_CLOSE_BUDGET_NS;
  uint64_t most = (uint64_t)MIA_GUARD_CLOSE_BUDGET_NS << (MIA_GUARD_MAX_SPARSER + 1);
  if (cap > most) cap = most;
  if (ns > cap) ns = cap;
  avg = avg == 0 ? ns : avg - avg / 8 + ns / 8;
  __atomic_store_n(&mia_guard_close_avg, avg, __ATOMIC_RELAXED);
  uint32_t sparser = 0;
  while (sparser < MIA_GUARD_MAX_SPARSER && (avg >> sparser) > MIA_GUARD_CLOSE_BUDGET_NS) sparser++;
  if (__atomic_exchange_n(&mia_guard_sparser, sparser, __ATOMIC_RELAXED) != sparser)
    mia_verbose("guarded sampling: a close takes %llu ns; sampling 1 in %ld allocations\n", (unsigned long long)avg,
                mia_guarded_rate_in_use());
}

/* ---- allocation and free ---- */

/* Samples drawn before a closed slot's quarantine ends (0: ended). */
static uint32_t slot_quarantine_left(const mia_guard_seg_t *gs, size_t local) {
  uint32_t age = mia_guard_seq - gs->closed_at[local];
  return age >= MIA_GUARD_QUARANTINE ? 0 : MIA_GUARD_QUARANTINE - age;
}

/* May a freed slot be handed out again?  Not before its quarantine ends. */
static bool slot_reusable(const mia_guard_seg_t *gs, size_t local) {
  uint8_t s = gs->state[local];
  if (s == SLOT_OPEN || s == SLOT_UNPREPARED) return true;
  return s == SLOT_CLOSED && slot_quarantine_left(gs, local) == 0;
}

/* No slot may be handed out now: remember when one may (the first
 * quarantine to end; with none running, the next free decides). */
static void slots_full(void) {
  uint32_t soonest = UINT32_MAX;
  for (size_t i = 0; i < mia_guard_seg_count; i++)
    for (size_t local = 0; local < MIA_GUARD_SLOTS; local++)
      if (mia_guard_segs[i]->state[local] == SLOT_CLOSED) {
        uint32_t left = slot_quarantine_left(mia_guard_segs[i], local);
        if (left < soonest) soonest = left;
      }
  mia_guard_full = true;
  /* with none closed, half a wrap: in effect until a free */
  mia_guard_retry_seq = mia_guard_seq + (soonest == UINT32_MAX ? (uint32_t)INT32_MAX : soonest);
}

/* The next slot the cursor finds that may be handed out, adding a segment
 * when a whole round finds none; -1 if there is none.  Caller holds the lock. */
static long slot_next(void) {
  if (mia_guard_full && (int32_t)(mia_guard_seq - mia_guard_retry_seq) < 0) return -1;
  mia_guard_full = false;
  for (int round = 0; round < 2; round++) {
    size_t total = mia_guard_seg_count * MIA_GUARD_SLOTS;
    for (size_t n = 0; n < total; n++) {
      uint32_t g = mia_guard_cursor;
      mia_guard_cursor = (uint32_t)((g + 1) % total);
      if (slot_reusable(mia_guard_segs[g / MIA_GUARD_SLOTS], g % MIA_GUARD_SLOTS)) return (long)g;
    }
    if (!mia_guard_add_segment()) break;
  }
  slots_full();
  return -1;
}

/* Make slot `local` (state `was`, now LIVE) and, where one call can, the
 * reusable closed slots after it accessible.  Takes and drops the lock
 * around the system calls; the slots in between are BUSY meanwhile. */
static bool slot_make_open(mia_guard_seg_t *gs, size_t local, uint8_t was) {
  if (was == SLOT_OPEN) return true;
  size_t end = local + 1;
  if (was == SLOT_UNPREPARED) {
    end = local - local % MIA_GUARD_PER_SLICE + MIA_GUARD_PER_SLICE;
    for (size_t i = end - MIA_GUARD_PER_SLICE; i < end; i++)
      if (i != local) gs->state[i] = SLOT_BUSY;
    mia_unlock(&mia_guard_lock);
    bool markers = slice_prepare(gs, end - MIA_GUARD_PER_SLICE);
    mia_lock(&mia_guard_lock);
    if (!markers) gs->markers = false;   /* slots of this segment reopen one by one */
    for (size_t i = end - MIA_GUARD_PER_SLICE; i < end; i++)
      if (i != local) gs->state[i] = SLOT_OPEN;
    mia_guard_full = false;   /* a search that met them busy missed them */
    return true;
  }
  /* closed: with markers, the guard pages between stay set */
  while (gs->markers && end < MIA_GUARD_SLOTS && end < local + MIA_GUARD_OPEN_RUN && gs->state[end] == SLOT_CLOSED &&
         slot_reusable(gs, end))
    gs->state[end++] = SLOT_BUSY;
  mia_unlock(&mia_guard_lock);
  bool ok = mia_prim_protect(slot_in(gs, local), (end - local) * MIA_GUARD_SLOT - MIA_GUARD_PAGE, MIA_PROT_RW);
  mia_lock(&mia_guard_lock);
  for (size_t i = local + 1; i < end; i++) gs->state[i] = ok ? SLOT_OPEN : SLOT_CLOSED;
  if (end > local + 1) mia_guard_full = false;   /* a search that met them busy missed them */
  return ok;
}

void *mia_guarded_alloc(mia_theap_t *theap, size_t size, bool zero) {
  (void)theap;
  /* padded builds ask for the padding too; the guard page does its job */
  if (mia_padded()) size -= MIA_PADDING_SIZE;
  mia_lock(&mia_guard_lock);
  /* counted placed or not, so quarantines end even while no slot is free */
  mia_guard_seq++;
  long g = slot_next();
  if (g < 0) {
    mia_unlock(&mia_guard_lock);
    return NULL;
  }
  mia_guard_seg_t *gs = mia_guard_segs[g / MIA_GUARD_SLOTS];
  size_t local = (size_t)g % MIA_GUARD_SLOTS;
  uint8_t was = gs->state[local];
  gs->state[local] = SLOT_LIVE;
  gs->size[local] = (uint32_t)size;
  if (!slot_make_open(gs, local, was)) {
    gs->state[local] = was;
    mia_unlock(&mia_guard_lock);
    return NULL;
  }
  mia_unlock(&mia_guard_lock);
  uint8_t *p = slot_user(slot_in(gs, local), size);
  if (zero) memset(p, 0, size);   /* a slot keeps its page across uses */
  else mia_block_forget_mark(p);  /* its memory may have held pages' blocks before */
  return p;
}

void mia_guarded_free(mia_page_t *page, void *p) {
  mia_guard_seg_t *gs;
  size_t local;
  if (!slot_of(page, p, &gs, &local)) {
    mia_error(EFAULT, "free: %p is in a guarded segment mialloc does not know\n", p);
    return;
  }
  uint8_t *slot = slot_in(gs, local);
  mia_lock(&mia_guard_lock);
  uint8_t state = gs->state[local];
  size_t size = gs->size[local];
  if (state != SLOT_LIVE) {
    mia_unlock(&mia_guard_lock);
    mia_error(EAGAIN, "free: double free of guarded block %p (%zu bytes)\n", p, size);
    return;
  }
  if ((uint8_t *)p != slot_user(slot, size)) {
    mia_unlock(&mia_guard_lock);
    mia_error(EINVAL, "free: pointer %p points into the middle of guarded block %p (%zu bytes)\n", p,
              (void *)slot_user(slot, size), size);
    return;
  }
  gs->state[local] = SLOT_BUSY;
  mia_unlock(&mia_guard_lock);
  /* the block's usable bytes end at the guard page: any overflow trapped */
  bool timed = __atomic_load_n(&mia_guard_adaptive, __ATOMIC_RELAXED);
  uint64_t start = timed ? mia_prim_clock_ns() : 0;
  mia_prim_protect(slot, MIA_GUARD_PAGE, MIA_PROT_NONE);
  if (timed) mia_guarded_note_close(mia_prim_clock_ns() - start);
  mia_lock(&mia_guard_lock);
  gs->state[local] = SLOT_CLOSED;
  gs->closed_at[local] = mia_guard_seq;
  /* a full pool may take this slot once its quarantine ends */
  uint32_t reusable_at = mia_guard_seq + MIA_GUARD_QUARANTINE;
  if (mia_guard_full && (int32_t)(reusable_at - mia_guard_retry_seq) < 0) mia_guard_retry_seq = reusable_at;
  mia_unlock(&mia_guard_lock);
}

void *mia_guarded_block_start(const mia_page_t *page, const void *p) {
  mia_guard_seg_t *gs;
  size_t local;
  if (!slot_of(page, p, &gs, &local)) return (void *)p;
  return slot_user(slot_in(gs, local), gs->size[local]);
}

size_t mia_guarded_usable(const mia_page_t *page, const void *p) {
  mia_guard_seg_t *gs;
  size_t local;
  if (!slot_of(page, p, &gs, &local) || gs->state[local] != SLOT_LIVE) return 0;
  uint8_t *slot = slot_in(gs, local);
  uint8_t *user = slot_user(slot, gs->size[local]);
  uint8_t *end = slot + MIA_GUARD_PAGE;
  /* padded builds promise the size asked for, as for their other blocks */
  if (mia_padded()) end = user + gs->size[local];
  return (const uint8_t *)p >= user && (const uint8_t *)p < end ? (size_t)(end - (const uint8_t *)p) : 0;
}

/* The live guarded blocks (all the main heap's), each an area of its
 * own.  The lock is held only to read a slot: the visitor may allocate. */
bool mia_guarded_visit(const mi_heap_t *heap, bool all, mi_block_visit_fun *visitor, void *arg) {
  for (size_t i = 0; i < MIA_GUARD_MAX_SEGMENTS; i++) {
    mia_guard_seg_t *gs = __atomic_load_n(&mia_guard_segs[i], __ATOMIC_ACQUIRE);
    if (gs == NULL) break;
    for (size_t local = 0; local < MIA_GUARD_SLOTS; local++) {
      mia_lock(&mia_guard_lock);
      bool live = gs->state[local] == SLOT_LIVE;
      size_t size = gs->size[local];
      mia_unlock(&mia_guard_lock);
      if (!live) continue;
      uint8_t *p = slot_user(slot_in(gs, local), size);
      mi_heap_area_t area = {.blocks = p, .reserved = MIA_GUARD_PAGE, .committed = MIA_GUARD_PAGE, .used = 1,
                             .block_size = mia_padded() ? size : slot_room(size),
                             .full_block_size = MIA_GUARD_SLOT, .heap_tag = heap->tag};
      if (!visitor(heap, &area, NULL, 0, arg)) return false;
      if (all && !visitor(heap, &area, p, area.block_size, arg)) return false;
    }
  }
  return true;
}

/* ---- the trap ---- */

/* Secure builds: a fault on the guard page at the end of an ordinary page
 * or huge span (segment.c) is an overflow off its last block. */
static void mia_page_guard_report(const mia_page_t *page, const void *addr) {
  size_t g = mia_page_guard_size();
  if (g == 0 || page->block_size == 0) return;
  const uint8_t *a = addr;
  if (page->is_huge) {
    const uint8_t *guard = mia_huge_span_end(page);   /* the span may run on past the block */
    const uint8_t *end = page->start + page->block_size;
    if (a >= guard && a < guard + g)
      mia_error(EFAULT, "heap overflow past huge block %p (%zu bytes): access at %p, %zu bytes past its end\n",
                (void *)page->start, page->block_size, addr, (size_t)(a - end));
    return;
  }
  const uint8_t *guard = page->start + (size_t)page->slice_count * MIA_SLICE_SIZE - g;
  if (a < guard || a >= guard + g || page->reserved == 0) return;
  const uint8_t *last = page->start + (size_t)(page->reserved - 1) * page->block_size;
  /* the guard also sits just below the next page: name that page's first
   * block too, since an underflow of it lands here as well */
  const mia_page_t *next = mia_page_of(guard + g);
  if (next != NULL && !next->is_guarded && !next->is_huge && next->block_size != 0 && a >= guard + g / 2)
    mia_error(EFAULT, "heap underflow before the first block %p (%zu bytes) of a page: access at %p, %zu bytes before it\n",
              (void *)next->start, next->block_size, addr, (size_t)(guard + g - a));
  else
    mia_error(EFAULT, "heap overflow off the end of a page: access at %p, %zu bytes past the last block %p (%zu bytes)\n",
              addr, (size_t)(a - (last + page->block_size)), (const void *)last, page->block_size);
}

/* Secure builds: a fault on the guard after a thread segment's metadata
 * (slice 0, segment.c) is an underflow off the first page's first block. */
static void mia_segment_guard_report(const void *addr) {
  if (mia_page_guard_size() == 0) return;
  const uint8_t *seg = (const uint8_t *)((uintptr_t)addr & ~(MIA_SEGMENT_SIZE - 1));
  const uint8_t *first = seg + MIA_SLICE_SIZE;
  if ((const uint8_t *)addr >= first) return;
  const mia_page_t *page = mia_page_of(first);
  if (page == NULL || page->is_guarded || page->is_huge || page->block_size == 0) return;
  mia_error(EFAULT, "heap underflow before the first block %p (%zu bytes) of a segment: access at %p, %zu bytes before it\n",
            (const void *)first, page->block_size, addr, (size_t)(first - (const uint8_t *)addr));
}

/* A fault inside a guarded slot's data page or after it. */
static void mia_guard_slot_report(mia_guard_seg_t *gs, size_t local, const void *addr) {
  uint8_t *slot = slot_in(gs, local);
  size_t size = gs->size[local];
  uint8_t *user = slot_user(slot, size);
  const uint8_t *a = addr;
  if (a >= slot + MIA_GUARD_PAGE)
    mia_error(EFAULT, "heap overflow past guarded block %p (%zu bytes): access at %p, %zu bytes past its end\n",
              (void *)user, size, addr, (size_t)(a - (user + size)));
  else if (__atomic_load_n(&gs->state[local], __ATOMIC_RELAXED) == SLOT_LIVE)
    /* the block is allocated and its page open: a fault there is no
     * overflow and no use after free (code run from the heap, say) */
    mia_error(EFAULT, "invalid access to live guarded block %p (%zu bytes) at %p: not an overflow or a use after "
              "free (code run from the heap?)\n", (void *)user, size, addr);
  else
    mia_error(EFAULT, "use after free of guarded block %p (%zu bytes): access at %p\n", (void *)user, size, addr);
}

static void mia_guard_segv(int sig, void *addr, void *info, void *ctx) {
  mia_page_t *page = mia_page_of(addr);
  mia_guard_seg_t *gs;
  size_t local;
  if (page == NULL) mia_segment_guard_report(addr);
  else if (!page->is_guarded) mia_page_guard_report(page, addr);
  else if (slot_of(page, addr, &gs, &local)) mia_guard_slot_report(gs, local, addr);
  /* let the previous handler (or the default action: the process dies
   * with SIGSEGV when the access is retried) deal with the fault */
  if (mia_guard_old_fun != NULL) {
    mia_guard_old_fun(sig, addr, info, ctx);
    return;
  }
  if (mia_guard_old_plain != NULL) {
    mia_guard_old_plain(sig);
    return;
  }
  mia_prim_default_segv(info);
}

/* guarded.c -- guarded sampling: about one in MIALLOC_GUARDED_SAMPLE_RATE
 * allocations is placed at the end of a 4 KiB page followed by a page
 * that is never accessible, so an overflow past it traps at once.  Freed
 * guarded blocks are made inaccessible and kept in quarantine for a while,
 * so a use after free traps too; a SIGSEGV handler names the block.
 *
 * Which allocations are sampled is decided by the same per-page streams
 * as the profiler's (prof.c): zero cost on the fast paths, and none at all
 * when the option is 0.  The blocks live in dedicated segments of slots
 * (4 KiB data + 4 KiB guard): a sample costs two system calls (open the
 * slot, close it at free), never a segment or a page of its own.
 *
 * Closed pages are guard markers where the kernel has them (Linux 6.13):
 * setting and lifting one leaves the mapping alone, where mprotect splits
 * it and merges it back, so a sample costs about 40% less (the page fault
 * of the block's first touch included; the page comes back zeroed).  Older
 * kernels get mprotect, and the block keeps its page across reuse.
 */
#include "internal.h"


#define MIA_GUARD_PAGE      4096
#define MIA_GUARD_SLOT      (2 * MIA_GUARD_PAGE)              /* data page, guard page */
#define MIA_GUARD_PER_SLICE (MIA_SLICE_SIZE / MIA_GUARD_SLOT) /* 8 */
#define MIA_GUARD_SLOTS     ((MIA_SEGMENT_SLICES - 1) * MIA_GUARD_PER_SLICE)
#define MIA_GUARD_MAX_SEGMENTS 16
#define MIA_GUARD_QUARANTINE 256
#define MIA_GUARD_MAX_SIZE  (MIA_GUARD_PAGE - 16)

enum { SLOT_FREE = 0, SLOT_LIVE = 1, SLOT_QUARANTINED = 2 };

typedef struct mia_guard_seg_s {
  mia_segment_t *seg;
  bool markers;                     /* closed pages are guard markers, not PROT_NONE */
  uint32_t size[MIA_GUARD_SLOTS];   /* bytes asked for */
  uint8_t state[MIA_GUARD_SLOTS];
} mia_guard_seg_t;

bool mia_guarded_enabled;
static int mia_guard_lock;
static mia_guard_seg_t *mia_guard_segs[MIA_GUARD_MAX_SEGMENTS];
static size_t mia_guard_seg_count;
/* free slots (global indices) and the quarantine, a FIFO */
static uint32_t mia_guard_free[MIA_GUARD_MAX_SEGMENTS * MIA_GUARD_SLOTS];
static size_t mia_guard_free_count;
static uint32_t mia_guard_quar[MIA_GUARD_QUARANTINE];
static size_t mia_guard_quar_head, mia_guard_quar_len;
static mia_prim_fault_fun *mia_guard_old_fun;
static void (*mia_guard_old_plain)(int);

static size_t mia_guard_min, mia_guard_max;
static long mia_guard_rate;

/* ---- slot addressing ---- */

static uint8_t *slot_addr(uint32_t g) {
  mia_guard_seg_t *gs = mia_guard_segs[g / MIA_GUARD_SLOTS];
  return (uint8_t *)gs->seg + MIA_SLICE_SIZE + (size_t)(g % MIA_GUARD_SLOTS) * MIA_GUARD_SLOT;
}

/* The block ends at the guard page and is as large as the size class of
 * its request, so its usable size is what mi_good_size promises (the
 * bytes past the request are checked at free instead). */
static size_t slot_room(size_t size) {
  size_t room = mia_bin_size[mia_bin_of(size == 0 ? 1 : size)];
  return room > MIA_GUARD_PAGE ? MIA_GUARD_PAGE : room;
}

static uint8_t *slot_user(uint8_t *slot, size_t size) { return slot + MIA_GUARD_PAGE - slot_room(size); }

/* the slot holding p, from its page; -1 if the page is not a guarded one */
static long slot_of(const mia_page_t *page, const void *p, mia_guard_seg_t **gs_out, size_t *local_out) {
  mia_segment_t *seg = mia_segment_of_page(page);
  for (size_t i = 0; i < mia_guard_seg_count; i++) {
    mia_guard_seg_t *gs = __atomic_load_n(&mia_guard_segs[i], __ATOMIC_ACQUIRE);
    if (gs == NULL || gs->seg != seg) continue;
    size_t local = (size_t)((const uint8_t *)p - ((uint8_t *)seg + MIA_SLICE_SIZE)) / MIA_GUARD_SLOT;
    *gs_out = gs;
    *local_out = local;
    return (long)(i * MIA_GUARD_SLOTS + local);
  }
  return -1;
}

/* Open a slot's data page for its block, or close it again. */
static bool slot_open(const mia_guard_seg_t *gs, uint8_t *slot) {
  return gs->markers ? mia_prim_guard_lift(slot, MIA_GUARD_PAGE) : mia_prim_protect(slot, MIA_GUARD_PAGE, MIA_PROT_RW);
}

static void slot_close(const mia_guard_seg_t *gs, uint8_t *slot) {
  if (gs->markers) mia_prim_guard_set(slot, MIA_GUARD_PAGE);
  else mia_prim_protect(slot, MIA_GUARD_PAGE, MIA_PROT_NONE);
}

/* ---- set-up ---- */

static void mia_guard_segv(int sig, void *addr, void *info, void *ctx);

/* Installed once, when the first guard page is set: a process that never
 * has one keeps its signal dispositions as they were. */
void mia_guard_handler_ensure(void) {
  static _Atomic(int) installed;
  if (atomic_load_explicit(&installed, memory_order_acquire) != 0 || atomic_exchange(&installed, 1) != 0) return;
  mia_prim_on_segv(mia_guard_segv, &mia_guard_old_fun, &mia_guard_old_plain);
}

/* A new segment of slots, all inaccessible; caller holds the lock. */
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
  mia_prim_no_thp(seg, MIA_SEGMENT_SIZE);   /* its protection changes page by page */
  /* every slot page starts closed (and, with markers, zeroed) */
  uint8_t *slots = (uint8_t *)seg + MIA_SLICE_SIZE;
  gs->markers = mia_prim_guard_set(slots, MIA_SEGMENT_SIZE - MIA_SLICE_SIZE);
  if (!gs->markers) mia_prim_protect(slots, MIA_SEGMENT_SIZE - MIA_SLICE_SIZE, MIA_PROT_NONE);
  for (size_t s = 1; s < MIA_SEGMENT_SLICES; s++) {
    mia_page_t *page = &seg->pages[s];
    memset(page, 0, sizeof *page);
    page->slice_count = 1;
    page->start = (uint8_t *)seg + s * MIA_SLICE_SIZE;
    page->block_size = MIA_GUARD_SLOT;
    page->reserved = page->capacity = MIA_GUARD_PER_SLICE;
    page->is_guarded = true;
    page->free_key = MIA_PAGE_IN_FULL;   /* never a thread id: frees go to the generic path */
    mia_pagemap_set(page->start, 1, page);
  }
  gs->seg = seg;
  size_t index = mia_guard_seg_count;
  __atomic_store_n(&mia_guard_segs[index], gs, __ATOMIC_RELEASE);
  mia_guard_seg_count++;
  for (size_t i = MIA_GUARD_SLOTS; i-- > 0;) mia_guard_free[mia_guard_free_count++] = (uint32_t)(index * MIA_GUARD_SLOTS + i);
  if (index == 0) mia_guard_handler_ensure();
  return true;
}

void mia_guarded_init(void) {
#if MIALLOC_GUARDED
  mia_guard_rate = mia_option_get_fast(mi_option_guarded_sample_rate);
  mia_guard_min = mi_option_get_size(mi_option_guarded_min);
  mia_guard_max = mi_option_get_size(mi_option_guarded_max);
  if (mia_guard_max > MIA_GUARD_MAX_SIZE) mia_guard_max = MIA_GUARD_MAX_SIZE;
  if (mia_guard_rate <= 0 || mia_guard_min > mia_guard_max) return;
  __atomic_store_n(&mia_guarded_enabled, true, __ATOMIC_RELEASE);
  mia_sampling_update();
  mia_verbose("guarded sampling: 1 in %ld allocations of %zu..%zu bytes\n", mia_guard_rate, mia_guard_min,
              mia_guard_max);
#endif
}

/* ---- the sampling decision (called from the streams in prof.c) ---- */

bool mia_guarded_page_eligible(size_t block_size) {
  return block_size >= mia_guard_min && block_size <= mia_guard_max + MIA_PADDING_SIZE + 128;
}

bool mia_guarded_size_eligible(size_t size) {
  if (mia_padded()) size -= MIA_PADDING_SIZE;   /* may include the link word minimum: harmless */
  return size >= mia_guard_min && size <= mia_guard_max;
}

/* Blocks handed out before a page's next guarded sample: uniform in
 * [0, 2N-2], so the sample is on average the N-th block, and sampling
 * cannot lock onto a program's allocation pattern. */
int32_t mia_guarded_draw(uint64_t random) {
  uint64_t n = (uint64_t)mia_guard_rate;
  if (n <= 1) return 0;
  return (int32_t)(random % (2 * n - 1));
}

/* ---- allocation and free ---- */

void *mia_guarded_alloc(mia_theap_t *theap, size_t size, bool zero) {
  (void)theap;
  /* padded builds ask for the padding too; the guard page does its job */
  if (mia_padded()) size -= MIA_PADDING_SIZE;
  mia_lock(&mia_guard_lock);
  if (mia_guard_free_count == 0) {
    /* reuse the oldest quarantined slot before taking more memory */
    if (mia_guard_quar_len > MIA_GUARD_QUARANTINE / 2 || !mia_guard_add_segment()) {
      if (mia_guard_quar_len == 0) {
        mia_unlock(&mia_guard_lock);
        return NULL;
      }
      uint32_t old = mia_guard_quar[mia_guard_quar_head];
      mia_guard_quar_head = (mia_guard_quar_head + 1) % MIA_GUARD_QUARANTINE;
      mia_guard_quar_len--;
      mia_guard_segs[old / MIA_GUARD_SLOTS]->state[old % MIA_GUARD_SLOTS] = SLOT_FREE;
      mia_guard_free[mia_guard_free_count++] = old;
    }
  }
  uint32_t g = mia_guard_free[--mia_guard_free_count];
  mia_guard_seg_t *gs = mia_guard_segs[g / MIA_GUARD_SLOTS];
  gs->state[g % MIA_GUARD_SLOTS] = SLOT_LIVE;
  gs->size[g % MIA_GUARD_SLOTS] = (uint32_t)size;
  mia_unlock(&mia_guard_lock);
  uint8_t *slot = slot_addr(g);
  if (!slot_open(gs, slot)) {
    mia_lock(&mia_guard_lock);
    gs->state[g % MIA_GUARD_SLOTS] = SLOT_FREE;
    mia_guard_free[mia_guard_free_count++] = g;
    mia_unlock(&mia_guard_lock);
    return NULL;
  }
  uint8_t *p = slot_user(slot, size);
  if (zero && !gs->markers) memset(p, 0, size);   /* a lifted marker leaves a zero page */
  return p;
}

void mia_guarded_free(mia_page_t *page, void *p) {
  mia_guard_seg_t *gs;
  size_t local;
  long g = slot_of(page, p, &gs, &local);
  if (g < 0) {
    mia_error(EFAULT, "free: %p is in a guarded segment mialloc does not know\n", p);
    return;
  }
  uint8_t *slot = slot_addr((uint32_t)g);
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
  gs->state[local] = SLOT_QUARANTINED;
  mia_unlock(&mia_guard_lock);
  /* the block's usable bytes end at the guard page: any overflow trapped */
  slot_close(gs, slot);
  mia_lock(&mia_guard_lock);
  if (mia_guard_quar_len == MIA_GUARD_QUARANTINE) {
    uint32_t old = mia_guard_quar[mia_guard_quar_head];
    mia_guard_quar_head = (mia_guard_quar_head + 1) % MIA_GUARD_QUARANTINE;
    mia_guard_quar_len--;
    mia_guard_segs[old / MIA_GUARD_SLOTS]->state[old % MIA_GUARD_SLOTS] = SLOT_FREE;
    mia_guard_free[mia_guard_free_count++] = old;
  }
  mia_guard_quar[(mia_guard_quar_head + mia_guard_quar_len) % MIA_GUARD_QUARANTINE] = (uint32_t)g;
  mia_guard_quar_len++;
  mia_unlock(&mia_guard_lock);
}

void *mia_guarded_block_start(const mia_page_t *page, const void *p) {
  mia_guard_seg_t *gs;
  size_t local;
  if (slot_of(page, p, &gs, &local) < 0) return (void *)p;
  uint8_t *slot = (uint8_t *)gs->seg + MIA_SLICE_SIZE + local * MIA_GUARD_SLOT;
  return slot_user(slot, gs->size[local]);
}

size_t mia_guarded_usable(const mia_page_t *page, const void *p) {
  mia_guard_seg_t *gs;
  size_t local;
  if (slot_of(page, p, &gs, &local) < 0 || gs->state[local] != SLOT_LIVE) return 0;
  uint8_t *slot = (uint8_t *)gs->seg + MIA_SLICE_SIZE + local * MIA_GUARD_SLOT;
  uint8_t *user = slot_user(slot, gs->size[local]);
  uint8_t *end = slot + MIA_GUARD_PAGE;
  /* padded builds promise the size asked for, as for their other blocks */
  if (mia_padded()) end = user + gs->size[local];
  return (const uint8_t *)p >= user && (const uint8_t *)p < end ? (size_t)(end - (const uint8_t *)p) : 0;
}

/* ---- the trap ---- */

/* Secure builds: a fault on the guard page at the end of an ordinary page
 * or huge span (segment.c) is an overflow off its last block. */
static void mia_page_guard_report(const mia_page_t *page, const void *addr) {
  size_t g = mia_page_guard_size();
  if (g == 0 || page->block_size == 0) return;
  const uint8_t *a = addr;
  if (page->is_huge) {
    const uint8_t *end = page->start + page->block_size;
    if (a >= end && a < end + g)
      mia_error(EFAULT, "heap overflow past huge block %p (%zu bytes): access at %p, %zu bytes past its end\n",
                (void *)page->start, page->block_size, addr, (size_t)(a - end));
    return;
  }
  const uint8_t *guard = page->start + (size_t)page->slice_count * MIA_SLICE_SIZE - g;
  if (a < guard || a >= guard + g || page->reserved == 0) return;
  const uint8_t *last = page->start + (size_t)(page->reserved - 1) * page->block_size;
  mia_error(EFAULT, "heap overflow off the end of a page: access at %p, %zu bytes past the last block %p (%zu bytes)\n",
            addr, (size_t)(a - (last + page->block_size)), (const void *)last, page->block_size);
}

static void mia_guard_segv(int sig, void *addr, void *info, void *ctx) {
  mia_page_t *page = mia_page_of(addr);
  if (page != NULL && !page->is_guarded) mia_page_guard_report(page, addr);
  if (page != NULL && page->is_guarded) {
    mia_guard_seg_t *gs;
    size_t local;
    if (slot_of(page, addr, &gs, &local) >= 0) {
      uint8_t *slot = (uint8_t *)gs->seg + MIA_SLICE_SIZE + local * MIA_GUARD_SLOT;
      size_t size = gs->size[local];
      void *user = slot_user(slot, size);
      if ((uint8_t *)addr >= slot + MIA_GUARD_PAGE)
        mia_error(EFAULT, "heap overflow past guarded block %p (%zu bytes): access at %p, %zu bytes past its end\n",
                  user, size, addr, (size_t)((uint8_t *)addr - ((uint8_t *)user + size)));
      else
        mia_error(EFAULT, "use after free of guarded block %p (%zu bytes): access at %p\n", user, size, addr);
    }
  }
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
  mia_prim_default_segv();
}

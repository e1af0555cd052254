/* arena.c -- OS reservations handed out as 4 MiB segments.
 *
 * An arena is one large mapping (MIALLOC_ARENA_RESERVE, 1 GiB by default)
 * that costs address space only; segments are committed as they are
 * claimed (mia_arena_commits_on_demand), and RAM is used when a page is
 * touched.  Three bitmaps track its segments: claimed, free-but-dirty
 * (touched since the last purge), and dirty ones already seen free by the
 * last purge pass.  Claiming happens once per 4 MiB a thread needs, so a
 * lock is cheap here; huge allocations claim runs of segments the same way.
 */
#include "internal.h"

#define MIA_BITS 64

static bool bit_get(const uint64_t *map, size_t i) { return (map[i / MIA_BITS] >> (i % MIA_BITS)) & 1; }
static void bit_set(uint64_t *map, size_t i) { map[i / MIA_BITS] |= (uint64_t)1 << (i % MIA_BITS); }
static void bit_clear(uint64_t *map, size_t i) { map[i / MIA_BITS] &= ~((uint64_t)1 << (i % MIA_BITS)); }

/* Where to claim count free segments: the run of them that holds the most
 * dirty ones (the lowest among equals), or SIZE_MAX.  Dirty segments are
 * resident already, so reusing them costs no page faults and adds nothing
 * to the RSS; plain first fit could take clean segments below them and
 * leave the dirty ones resident until their purge. */
static size_t find_claim_one(const mia_arena_t *a) {
  size_t words = (a->segment_count + MIA_BITS - 1) / MIA_BITS, clean = SIZE_MAX;
  for (size_t w = 0; w < words; w++) {
    uint64_t free = ~a->used_map[w];   /* bits past the end count as used */
    if ((free & a->dirty_map[w]) != 0) return w * MIA_BITS + (size_t)__builtin_ctzll(free & a->dirty_map[w]);
    if (free != 0 && clean == SIZE_MAX) clean = w * MIA_BITS + (size_t)__builtin_ctzll(free);
  }
  return clean;
}

/* Secure builds: a dirty free segment whose guards a one-segment claim
 * keeps whole, with the one it would set first among them (keep's lowest
 * bit: a thread segment's metadata guard, a huge span's end guard), or
 * SIZE_MAX.  Programs that cycle huge blocks and thread segments through
 * the same memory otherwise lift a segment's guards and set others on
 * nearly every claim, a system call each (aligncalloc: 600 lifts and as
 * many sets a run). */
static size_t find_claim_guarded(const mia_arena_t *a, uint64_t keep) {
  uint64_t first = keep & -keep;
  if (mia_page_guard_size() == 0 || first == 0) return SIZE_MAX;
  size_t words = (a->segment_count + MIA_BITS - 1) / MIA_BITS;
  for (size_t w = 0; w < words; w++)
    for (uint64_t m = ~a->used_map[w] & a->dirty_map[w]; m != 0; m &= m - 1) {
      size_t i = w * MIA_BITS + (size_t)__builtin_ctzll(m);
      uint64_t g = a->guards[i];
      if ((g & first) != 0 && (g & ~keep) == 0) return i;
    }
  return SIZE_MAX;
}

static size_t find_claim_run(const mia_arena_t *a, size_t count, uint64_t keep) {
  if (count == 1) {   /* every thread segment: word at a time */
    size_t i = find_claim_guarded(a, keep);
    return i != SIZE_MAX ? i : find_claim_one(a);
  }
  size_t best = SIZE_MAX, best_dirty = 0, run = 0, dirty = 0;
  for (size_t i = 0; i < a->segment_count; i++) {
    if (i % MIA_BITS == 0 && a->used_map[i / MIA_BITS] == ~(uint64_t)0) {
      run = dirty = 0;
      i += MIA_BITS - 1;
      continue;
    }
    if (bit_get(a->used_map, i)) {
      run = dirty = 0;
      continue;
    }
    dirty += bit_get(a->dirty_map, i);
    if (++run > count) {
      dirty -= bit_get(a->dirty_map, i - count);
      run = count;
    }
    if (run == count && (best == SIZE_MAX || dirty > best_dirty)) {
      best = i + 1 - count;
      best_dirty = dirty;
      if (dirty == count) break;
    }
  }
  return best;
}

uint64_t mia_purge_delay_arena(void) {
  long delay = mia_option_get_fast(mi_option_purge_delay);
  long mult = mia_option_get_fast(mi_option_arena_purge_mult);
  if (delay < 0) return UINT64_MAX;
  return (uint64_t)delay * (uint64_t)(mult > 0 ? mult : 1);
}

/* Register memory [base, base + segments * 4 MiB) as an arena. */
static int mia_arena_next_id;   /* ids are unique in the process */

/* The arena's header, its three bitmaps and its guard masks, in whole pages. */
static size_t mia_arena_meta_size(size_t segments) {
  size_t words = (segments + MIA_BITS - 1) / MIA_BITS;
  size_t meta = sizeof(mia_arena_t) + (3 * words + segments) * sizeof(uint64_t);
  return (meta + mia_prim_page_size() - 1) & ~(mia_prim_page_size() - 1);
}

static mia_arena_t *mia_arena_register(mia_subproc_t *sp, uint8_t *base, size_t segments, bool pinned,
                                       bool caller_owned) {
  size_t words = (segments + MIA_BITS - 1) / MIA_BITS;
  size_t meta = mia_arena_meta_size(segments);
  mia_arena_t *arena = mia_prim_reserve(meta, 0, false);
  if (arena == NULL || !mia_pagemap_ensure(base, segments * MIA_SEGMENT_SIZE)) {
    if (!caller_owned) mia_prim_release(base, segments * MIA_SEGMENT_SIZE);
    if (arena != NULL) mia_prim_release(arena, meta);
    return NULL;
  }
  arena->id = __atomic_add_fetch(&mia_arena_next_id, 1, __ATOMIC_RELAXED);
  arena->caller_owned = caller_owned;
  arena->base = base;
  arena->size = segments * MIA_SEGMENT_SIZE;
  arena->segment_count = segments;
  arena->subproc = sp;
  arena->pinned = pinned;
  arena->used_map = (uint64_t *)(arena + 1);
  arena->dirty_map = arena->used_map + words;
  arena->aged_map = arena->dirty_map + words;
  arena->guards = arena->aged_map + words;
  /* bits past the end count as used so runs never cross it */
  for (size_t i = segments; i < words * MIA_BITS; i++) bit_set(arena->used_map, i);
  arena->next = sp->arenas;
  /* release: mia_arena_reserved walks the list without the lock */
  __atomic_store_n(&sp->arenas, arena, __ATOMIC_RELEASE);
  sp->arena_count++;
  mia_stat_reserve((int64_t)arena->size);
  mia_verbose("reserved arena %zu: %zu MiB at %p%s\n", sp->arena_count, arena->size >> 20,
              (void *)base, pinned ? " (huge OS pages)" : "");
  return arena;
}

/* Arenas are mapped uncommitted (inaccessible); a segment is committed
 * (made writable) when claimed and decommitted when purged.  A writable
 * 1 GiB reservation costs nothing on most systems, but where the kernel
 * does not overcommit (vm.overcommit_memory=2) it is charged against the
 * commit limit whole -- a few processes exhaust it, and fork and exec fail
 * system-wide -- and a program calling mlockall(MCL_CURRENT) or
 * (MCL_FUTURE) gets all of it faulted in and locked: 1 GiB of RAM in
 * every program that locks its memory (libcryptsetup does).
 * MIALLOC_ARENA_EAGER_COMMIT: 0 (default) on demand, 1 at once, 2 at once
 * only where the kernel overcommits. */
bool mia_arena_commits_on_demand(void) {
  long eager = mia_option_get_fast(mi_option_arena_eager_commit);
  return eager == 0 || (eager != 1 && !mia_prim_overcommits());
}

/* Where the system's THP mode is "always", the first segments of the
 * first arena -- all of a small program's heap -- are kept from huge pages
 * (set once, with the first arena). */
#define MIA_THP_LEAN_SEGMENTS 4
static uintptr_t mia_thp_lean_lo, mia_thp_lean_hi;

/* Transparent huge pages as the arena wants them (again after a decommit,
 * which drops the advice with the mapping).  Secure builds put a guard
 * page in every page: no huge pages there.  Otherwise the system decides,
 * unless asked (MIALLOC_ALLOW_LARGE_OS_PAGES) -- but not in a small
 * program's heap where its mode is "always": a claimed segment is a 4 MiB
 * writable mapping, and the first touch of each half brought in a 2 MiB
 * page, so a small program peaked at 2-4.5 times its RSS (interp 5.8 MiB,
 * 2.6 MiB kept from huge pages; glibc 2.0).  Keeping every arena from
 * them cost a big heap its huge pages too (randlife 0.6 s became 0.8). */
static void mia_arena_advise(uint8_t *p, size_t size) {
  if (mia_page_guard_size() != 0) {
    mia_prim_no_thp(p, size);
  } else if (mia_option_get_fast(mi_option_allow_large_os_pages) != 0) {
    mia_prim_want_thp(p, size);
  } else if (mia_prim_thp_mode() == MIA_THP_ALWAYS) {
    uintptr_t lean_lo = __atomic_load_n(&mia_thp_lean_lo, __ATOMIC_RELAXED);
    uintptr_t lean_hi = __atomic_load_n(&mia_thp_lean_hi, __ATOMIC_RELAXED);
    uintptr_t lo = (uintptr_t)p > lean_lo ? (uintptr_t)p : lean_lo;
    uintptr_t hi = (uintptr_t)p + size < lean_hi ? (uintptr_t)p + size : lean_hi;
    if (lo < hi) mia_prim_no_thp((void *)lo, hi - lo);
  }
}

/* Segments an arena may reserve at most: halved by each refused
 * reservation, so a process under a small address-space limit (ulimit -v,
 * RLIMIT_AS) tries the 1 GiB default once, not at every new arena. */
static size_t mia_arena_cap = SIZE_MAX;

/* Reserve and register an arena of exactly segments, or nothing. */
static mia_arena_t *mia_arena_try_new(mia_subproc_t *sp, size_t segments, bool on_demand) {
  size_t size = segments * MIA_SEGMENT_SIZE;
  uint8_t *base = on_demand ? mia_prim_reserve_uncommitted(size, MIA_SEGMENT_SIZE, false)
                            : mia_prim_reserve(size, MIA_SEGMENT_SIZE, false);
  if (base == NULL) return NULL;
  /* releases base when it fails */
  mia_arena_t *arena = mia_arena_register(sp, base, segments, false, false);
  if (arena == NULL) return NULL;
  uintptr_t unset = 0;
  size_t lean = segments < MIA_THP_LEAN_SEGMENTS ? segments : MIA_THP_LEAN_SEGMENTS;
  /* lo first: a range whose hi is still 0 is empty */
  if (__atomic_compare_exchange_n(&mia_thp_lean_lo, &unset, (uintptr_t)base, false, __ATOMIC_RELAXED,
                                  __ATOMIC_RELAXED))
    __atomic_store_n(&mia_thp_lean_hi, (uintptr_t)base + lean * MIA_SEGMENT_SIZE, __ATOMIC_RELAXED);
  mia_arena_advise(base, size);
  return arena;
}

/* An arena of at least min_segments (exactly that many when exact).  A
 * refused reservation is tried again at half the size, down to what is
 * needed: under an address-space limit below the default (1 GiB) every
 * allocation would fail, where glibc's malloc still works.  So is one whose
 * registration failed: the arena fitted under the limit, but not with the
 * 8 MiB page-map leaf that must follow it (and would then fail the same way
 * at every allocation). */
static mia_arena_t *mia_arena_new(mia_subproc_t *sp, size_t min_segments, bool exact) {
  size_t reserve = mi_option_get_size(mi_option_arena_reserve);
  if (reserve < 64 * MIA_SEGMENT_SIZE) reserve = 64 * MIA_SEGMENT_SIZE;
  size_t segments = exact ? min_segments : reserve / MIA_SEGMENT_SIZE;
  size_t cap = __atomic_load_n(&mia_arena_cap, __ATOMIC_RELAXED);
  if (!exact && segments > cap) segments = cap;
  /* A block larger than the reserve gets an arena of its own with as
   * much again of address space after it, kept free for it: a program
   * growing a buffer past the reserve by realloc would otherwise have it
   * copied at every step (glibc moves no byte there: mremap).  Reserved,
   * not committed; doubling keeps the copies to one per doubling. */
  bool dedicated = !exact && min_segments > segments;
  if (dedicated) segments = min_segments <= SIZE_MAX / 2 / MIA_SEGMENT_SIZE ? 2 * min_segments : min_segments;
  if (segments < min_segments) segments = min_segments;
  bool on_demand = mia_arena_commits_on_demand();
  for (;;) {
    mia_arena_t *arena = mia_arena_try_new(sp, segments, on_demand);
    if (arena != NULL) {
      arena->on_demand = on_demand;
      arena->dedicated = dedicated;
      return arena;
    }
    if (exact || segments <= min_segments) return NULL;
    segments = segments / 2 > min_segments ? segments / 2 : min_segments;
    __atomic_store_n(&mia_arena_cap, segments, __ATOMIC_RELAXED);
  }
}

/* MIALLOC_RESERVE_HUGE_OS_PAGES=N: N GiB of explicit huge pages (hugetlbfs),
 * pinned: they are never purged, since giving them back would lose them. */
mia_arena_t *mia_arena_reserve_huge(mia_subproc_t *sp, size_t gib) {
  size_t size = gib << 30;
  uint8_t *raw = mia_prim_reserve_huge_pages(size + MIA_SEGMENT_SIZE);
  if (raw == NULL) return NULL;
  uint8_t *base = (uint8_t *)(((uintptr_t)raw + MIA_SEGMENT_SIZE - 1) & ~(MIA_SEGMENT_SIZE - 1));
  mia_lock(&sp->lock);
  mia_arena_t *arena = mia_arena_register(sp, base, size / MIA_SEGMENT_SIZE, true, false);
  mia_unlock(&sp->lock);
  return arena;
}

mia_arena_t *mia_arena_reserve(mia_subproc_t *sp, size_t bytes) {
  mia_lock(&sp->lock);
  mia_arena_t *arena = mia_arena_new(sp, (bytes + MIA_SEGMENT_SIZE - 1) / MIA_SEGMENT_SIZE, true);
  mia_unlock(&sp->lock);
  return arena;
}

/* Secure builds: freed segments keep their guard pages in the arena
 * (arena->guards: per segment, bit k for the last OS page of slice k, bit
 * 0 for the metadata guard), so the next user that wants guards in the
 * same places sets them without a system call -- a program whose threads
 * come and go, or that cycles huge blocks, would otherwise pay mprotect
 * calls for each.  A claim lifts every guard it cannot keep: keep says
 * which bits the last segment of the claim may keep (the others may keep
 * none); the kept ones are returned in *guards. */
static uint64_t mia_arena_take_guards(mia_arena_t *arena, size_t idx, size_t count, uint64_t keep) {
  uint64_t kept = 0;
  for (size_t i = idx; i < idx + count; i++) {
    uint64_t m = arena->guards[i];
    arena->guards[i] = 0;
    uint64_t allowed = i + 1 == idx + count ? keep : 0;
    if (m != 0 && (m & ~allowed) != 0) {
      mia_prim_guard_off(arena->base + i * MIA_SEGMENT_SIZE, MIA_SEGMENT_SIZE, (size_t)__builtin_popcountll(m), true);
      m = 0;
    }
    if (i + 1 == idx + count) kept = m;
  }
  return kept;
}

/* On-demand arenas: commit segments [idx, idx + count) before they are
 * handed out (the dirty ones are committed still).  false at the commit
 * limit, with the clean ones left uncommitted. */
static bool mia_arena_commit(mia_arena_t *arena, size_t idx, size_t count) {
  if (!arena->on_demand) return true;
  bool all_dirty = true;
  for (size_t i = idx; i < idx + count; i++) all_dirty = all_dirty && bit_get(arena->dirty_map, i);
  if (all_dirty) return true;
  uint8_t *p = arena->base + idx * MIA_SEGMENT_SIZE;
  if (mia_prim_commit(p, count * MIA_SEGMENT_SIZE)) return true;
  /* a refused mprotect may have changed part of the range */
  for (size_t i = idx; i < idx + count; i++)
    if (!bit_get(arena->dirty_map, i)) mia_prim_decommit(arena->base + i * MIA_SEGMENT_SIZE, MIA_SEGMENT_SIZE, false);
  mia_arena_advise(p, count * MIA_SEGMENT_SIZE);
  return false;
}

/* On-demand arenas: purging free segments decommits them (their guards go
 * with the mapping, and back to the OS layer's budget). */
static void mia_arena_decommit(mia_arena_t *arena, size_t idx, size_t count, bool lazy) {
  uint8_t *p = arena->base + idx * MIA_SEGMENT_SIZE;
  size_t size = count * MIA_SEGMENT_SIZE;
  if (!arena->on_demand || lazy) {   /* MIALLOC_PURGE_DECOMMITS=0: MADV_FREE, committed still */
    mia_prim_purge(p, size, lazy);
    return;
  }
  for (size_t i = idx; i < idx + count; i++) {
    if (arena->guards[i] != 0)
      mia_prim_guard_off(arena->base + i * MIA_SEGMENT_SIZE, MIA_SEGMENT_SIZE,
                         (size_t)__builtin_popcountll(arena->guards[i]), true);
    arena->guards[i] = 0;
  }
  if (mia_prim_decommit(p, size, false)) mia_arena_advise(p, size);
  else mia_prim_purge(p, size, false);   /* stays committed: a later claim commits it again, no harm */
}

/* Segments for a heap: from its exclusive arena only, if it has one, else
 * from the shared arenas (never from another heap's exclusive one).
 * keep/guards: see mia_arena_take_guards (guards may be NULL if keep is 0). */
/* Marks segments [idx, idx + count) claimed; caller holds the lock.
 * Returns how many of them were dirty (freed, not purged yet): their
 * memory is not zero, and they no longer wait for a purge. */
static size_t mia_arena_claim(mia_arena_t *arena, size_t idx, size_t count) {
  size_t dirty = 0;
  for (size_t i = idx; i < idx + count; i++) {
    mia_assert(!bit_get(arena->used_map, i));
    if (bit_get(arena->dirty_map, i)) {
      dirty++;
      mia_stat_commit(-(int64_t)MIA_SEGMENT_SIZE);
    }
    bit_clear(arena->dirty_map, i);
    bit_clear(arena->aged_map, i);
    bit_set(arena->used_map, i);
  }
  return dirty;
}

mia_segment_t *mia_arena_alloc_segments(mia_subproc_t *sp, mia_arena_t *only, size_t count, bool *is_zero,
                                        uint64_t keep, uint64_t *guards) {
  mia_lock(&sp->lock);
  mia_arena_t *arena;
  size_t idx = SIZE_MAX;
  for (arena = sp->arenas; arena != NULL; arena = arena->next) {
    if (only != NULL ? arena != only : arena->exclusive || arena->dedicated) continue;
    idx = find_claim_run(arena, count, keep);
    if (idx != SIZE_MAX) break;
  }
  if (arena == NULL && only == NULL && mia_option_get_fast(mi_option_disallow_os_alloc) == 0) {
    arena = mia_arena_new(sp, count, false);
    if (arena != NULL) idx = 0;
  }
  if (arena == NULL) {
    mia_unlock(&sp->lock);
    return NULL;
  }
  if (!mia_arena_commit(arena, idx, count)) {
    mia_unlock(&sp->lock);
    return NULL;
  }
  uint64_t kept = mia_arena_take_guards(arena, idx, count, keep);
  size_t reused = mia_arena_claim(arena, idx, count);
  mia_unlock(&sp->lock);
  mia_purge_done(reused * MIA_SEGMENT_SIZE);
  mia_segment_t *segment = (mia_segment_t *)(arena->base + idx * MIA_SEGMENT_SIZE);
  mia_annot_accessible(segment, count * MIA_SEGMENT_SIZE);
  mia_stat_add(&mia_stats_global.segments, (int64_t)count);
  *is_zero = reused == 0;
  if (guards != NULL) *guards = kept;
  return segment;
}

static mia_arena_t *mia_arena_of(mia_subproc_t *sp, const void *p) {
  for (mia_arena_t *a = sp->arenas; a != NULL; a = a->next)
    if ((const uint8_t *)p >= a->base && (const uint8_t *)p < a->base + a->size) return a;
  return NULL;
}

/* Whether p lies in memory the sub-process's arenas reserved.  Without the
 * lock (arenas are only ever added, at the list's head): a free of a bad
 * pointer may come from anywhere, a signal handler that interrupted the
 * holder included. */
bool mia_arena_reserved(mia_subproc_t *sp, const void *p) {
  for (const mia_arena_t *a = __atomic_load_n(&sp->arenas, __ATOMIC_ACQUIRE); a != NULL; a = a->next)
    if ((const uint8_t *)p >= a->base && (const uint8_t *)p < a->base + a->size) return true;
  return false;
}

/* Whether a heap may take this segment's memory: its exclusive arena's
 * (only) if it has one, else that of any arena that is not exclusive, as
 * mia_arena_alloc_segments chooses. */
bool mia_arena_serves(mia_subproc_t *sp, const void *segment, const mia_arena_t *only) {
  mia_lock(&sp->lock);
  mia_arena_t *arena = mia_arena_of(sp, segment);
  bool fits = only != NULL ? arena == only : arena != NULL && !arena->exclusive;
  mia_unlock(&sp->lock);
  return fits;
}

/* fn on every segment claimed from sp's arenas, with the arena lock held
 * so that none is given back (and decommitted) meanwhile; fn returns how
 * many segments the span starting there covers, and must not take the
 * arena lock.  For figures such as mallinfo's: the pages in a segment
 * change under it as their owners allocate. */
void mia_arenas_visit_claimed(mia_subproc_t *sp, size_t (*fn)(mia_segment_t *seg, void *arg), void *arg) {
  mia_lock(&sp->lock);
  for (mia_arena_t *a = sp->arenas; a != NULL; a = a->next) {
    for (size_t i = 0; i < a->segment_count;) {
      if (!bit_get(a->used_map, i)) {
        i++;
        continue;
      }
      size_t span = fn((mia_segment_t *)(a->base + i * MIA_SEGMENT_SIZE), arg);
      i += span > 0 ? span : 1;
    }
  }
  mia_unlock(&sp->lock);
}

/* guards: the guards the last of the segments leaves set, for the next
 * user (the others have none). */
void mia_arena_free_segments(mia_subproc_t *sp, void *segment, size_t count, uint64_t guards) {
  uint64_t delay = mia_purge_delay_arena();
  mia_lock(&sp->lock);
  mia_arena_t *arena = mia_arena_of(sp, segment);
  if (arena == NULL) {
    mia_unlock(&sp->lock);
    mia_error(EFAULT, "segment %p does not belong to any arena\n", (void *)segment);
    return;
  }
  size_t idx = (size_t)((uint8_t *)segment - arena->base) / MIA_SEGMENT_SIZE;
  mia_assert(((uintptr_t)segment & (MIA_SEGMENT_SIZE - 1)) == 0 && idx + count <= arena->segment_count);
  arena->guards[idx + count - 1] = guards;
  if (idx == 0) arena->dedicated = false;   /* its block is gone: an arena like any other */
  for (size_t i = idx; i < idx + count; i++) {
    mia_assert(bit_get(arena->used_map, i));   /* not freed twice */
    bit_clear(arena->used_map, i);
    bit_set(arena->dirty_map, i);
    bit_clear(arena->aged_map, i);   /* freed just now: waits a whole delay from here */
  }
  mia_stat_add(&mia_stats_global.segments, -(int64_t)count);
  mia_stat_commit((int64_t)(count * MIA_SEGMENT_SIZE));   /* counted whole until purged */
  if (arena->purge_at == 0 && delay != UINT64_MAX) arena->purge_at = mia_prim_clock_ms() + delay;
  mia_unlock(&sp->lock);
  if (delay == 0) mia_arenas_purge(sp, false);
  else mia_purge_schedule(count * MIA_SEGMENT_SIZE);
}

/* The earliest purge deadline of any arena or of the abandoned segments'
 * free slices, 0 if nothing waits. */
uint64_t mia_arenas_next_purge(mia_subproc_t *sp) {
  uint64_t next = 0;
  mia_lock(&sp->lock);
  for (mia_arena_t *a = sp->arenas; a != NULL; a = a->next) next = mia_deadline_min(next, a->purge_at);
  next = mia_deadline_min(next, sp->abandoned_purge_at);
  mia_unlock(&sp->lock);
  return mia_deadline_min(next, atomic_load_explicit(&sp->orphans_due, memory_order_relaxed));
}

/* A purge pass: free dirty segments that were free at the previous pass
 * too go back to the OS, the others are marked and wait for the next one
 * (force: all of them now).  So a segment stays resident between one and
 * two delays after its last free: a program that frees and allocates large
 * blocks at a steady pace keeps reusing the same resident memory, where
 * one deadline per arena purged whatever happened to be free at the
 * moment, often just freed, and the next claim faulted it back in.  The
 * abandoned segments' free slices that are due go too (mia_abandoned_purge),
 * and so do their pages that other threads' frees emptied (mia_abandoned_scan_due). */
void mia_arenas_purge(mia_subproc_t *sp, bool force) {
  uint64_t now = mia_prim_clock_ms();
  uint64_t delay = mia_purge_delay_arena();
  bool lazy = mia_option_get_fast(mi_option_purge_decommits) == 0;
  if (delay == 0) force = true;
  mia_lock(&sp->lock);
  for (mia_arena_t *a = sp->arenas; a != NULL; a = a->next) {
    if (a->pinned) { a->purge_at = 0; continue; }
    if (a->purge_at == 0 || (!force && now < a->purge_at)) continue;
    bool waiting = false;
    for (size_t i = 0; i < a->segment_count; i++) {
      if (!bit_get(a->dirty_map, i) || bit_get(a->used_map, i)) continue;
      if (!force && !bit_get(a->aged_map, i)) {
        bit_set(a->aged_map, i);
        waiting = true;
        continue;
      }
      size_t j = i;
      while (j < a->segment_count && bit_get(a->dirty_map, j) && !bit_get(a->used_map, j) &&
             (force || bit_get(a->aged_map, j))) {
        bit_clear(a->dirty_map, j);
        bit_clear(a->aged_map, j);
        j++;
      }
      mia_arena_decommit(a, i, j - i, lazy);
      mia_stat_purge((j - i) * MIA_SEGMENT_SIZE);
      mia_purge_done((j - i) * MIA_SEGMENT_SIZE);
      i = j - 1;
    }
    a->purge_at = waiting && delay != UINT64_MAX ? now + delay : 0;
  }
  if (sp->abandoned_purge_at != 0 && (force || now >= sp->abandoned_purge_at))
    sp->abandoned_purge_at = mia_abandoned_purge(sp, now, force);
  mia_unlock(&sp->lock);
  mia_abandoned_scan_due(sp, now, force);
}

/* Grow a huge span in place by claiming the free segments right after it;
 * false when they are taken or past the arena's end. */
bool mia_arena_extend_segments(mia_segment_t *segment, size_t count, size_t extra, bool *is_zero) {
  mia_subproc_t *sp = segment->subproc;
  mia_lock(&sp->lock);
  mia_arena_t *arena = mia_arena_of(sp, segment);
  size_t idx = arena == NULL ? 0 : (size_t)((uint8_t *)segment - arena->base) / MIA_SEGMENT_SIZE + count;
  bool ok = arena != NULL && idx + extra <= arena->segment_count;
  for (size_t i = idx; ok && i < idx + extra; i++) ok = !bit_get(arena->used_map, i);
  ok = ok && mia_arena_commit(arena, idx, extra);
  size_t reused = 0;
  if (ok) {
    mia_arena_take_guards(arena, idx, extra, 0);
    mia_stat_add(&mia_stats_global.segments, (int64_t)extra);
    reused = mia_arena_claim(arena, idx, extra);
  }
  mia_unlock(&sp->lock);
  mia_purge_done(reused * MIA_SEGMENT_SIZE);
  *is_zero = reused == 0;
  return ok;
}

mia_arena_t *mia_arena_by_id(mia_subproc_t *sp, int id) {
  mia_lock(&sp->lock);
  mia_arena_t *a = sp->arenas;
  while (a != NULL && a->id != id) a = a->next;
  mia_unlock(&sp->lock);
  return a;
}

/* mi_subproc_destroy: every arena goes, whatever it still holds. */
void mia_arenas_destroy(mia_subproc_t *sp) {
  mia_lock(&sp->lock);
  mia_arena_t *a = sp->arenas;
  sp->arenas = NULL;
  sp->abandoned = NULL;
  mia_unlock(&sp->lock);
  while (a != NULL) {
    mia_arena_t *next = a->next;
    size_t used = 0, waiting = 0;
    for (size_t i = 0; i < a->segment_count; i++) {
      used += bit_get(a->used_map, i);
      waiting += bit_get(a->dirty_map, i) && !bit_get(a->used_map, i);
    }
    mia_stat_add(&mia_stats_global.segments, -(int64_t)used);
    mia_purge_done(waiting * MIA_SEGMENT_SIZE);   /* they no longer wait for the purge thread */
    mia_pagemap_set(a->base, a->segment_count * MIA_SEGMENT_SLICES, NULL);
    mia_stat_commit(-(int64_t)(waiting * MIA_SEGMENT_SIZE));   /* counted whole until purged */
    mia_stat_reserve(-(int64_t)a->size);
    if (!a->caller_owned) mia_prim_release(a->base, a->size);
    else if (mia_page_guard_size() != 0) mia_prim_guard_off(a->base, a->size, 0, false);   /* no guard left behind */
    mia_prim_release(a, mia_arena_meta_size(a->segment_count));
    a = next;
  }
}

/* ---- the public arena API ---- */

static mia_subproc_t *mia_current_subproc(void) {
  mi_heap_t *heap = mi_heap_main();
  return heap->subproc;
}

/* commit: writable (and charged) at once rather than a segment at a time;
 * where the kernel refuses the charge, the arena stays on demand.  A
 * refused mprotect may have made part of it writable: left so (a claim
 * there commits again, at no cost), since decommitting the arena now could
 * take a segment another thread has just claimed from it. */
mia_export int mi_reserve_os_memory_ex(size_t size, bool commit, bool allow_large, bool exclusive,
                                       mi_arena_id_t *arena_id) {
  (void)allow_large;  /* transparent huge pages follow MIALLOC_ALLOW_LARGE_OS_PAGES */
  if (arena_id != NULL) *arena_id = 0;
  if (size == 0) return EINVAL;
  mia_subproc_t *sp = mia_current_subproc();
  mia_arena_t *arena = mia_arena_reserve(sp, size);
  if (arena == NULL) return ENOMEM;
  if (commit && arena->on_demand) mia_prim_commit(arena->base, arena->size);
  arena->exclusive = exclusive;
  if (arena_id != NULL) *arena_id = arena->id;
  return 0;
}

mia_export int mi_reserve_os_memory(size_t size, bool commit, bool allow_large) {
  return mi_reserve_os_memory_ex(size, commit, allow_large, false, NULL);
}

/* Caller memory: only the 4 MiB-aligned part inside it is used, and it is
 * never purged or unmapped (it may not be anonymous memory of ours). */
mia_export bool mi_manage_os_memory_ex(void *start, size_t size, bool is_committed, bool is_large,
                                       bool is_zero, int numa_node, bool exclusive,
                                       mi_arena_id_t *arena_id) {
  (void)is_committed;
  (void)is_large;
  (void)is_zero;
  (void)numa_node;
  if (arena_id != NULL) *arena_id = 0;
  uintptr_t lo = ((uintptr_t)start + MIA_SEGMENT_SIZE - 1) & ~(MIA_SEGMENT_SIZE - 1);
  uintptr_t hi = ((uintptr_t)start + size) & ~(MIA_SEGMENT_SIZE - 1);
  if (start == NULL || (uintptr_t)start + size < (uintptr_t)start || hi <= lo) {
    mia_error(EINVAL, "mi_manage_os_memory: %p (%zu bytes) holds no aligned 4 MiB segment\n", start, size);
    return false;
  }
  mia_subproc_t *sp = mia_current_subproc();
  mia_lock(&sp->lock);
  /* dirty: we cannot know that the caller's memory is zero */
  mia_arena_t *arena = mia_arena_register(sp, (uint8_t *)lo, (hi - lo) / MIA_SEGMENT_SIZE, true, true);
  if (arena != NULL) {
    arena->exclusive = exclusive;
    for (size_t i = 0; i < arena->segment_count; i++) bit_set(arena->dirty_map, i);
  }
  mia_unlock(&sp->lock);
  if (arena == NULL) return false;
  if (arena_id != NULL) *arena_id = arena->id;
  return true;
}

mia_export bool mi_manage_os_memory(void *start, size_t size, bool is_committed, bool is_large, bool is_zero,
                                    int numa_node) {
  return mi_manage_os_memory_ex(start, size, is_committed, is_large, is_zero, numa_node, false, NULL);
}

/* Explicit huge pages come in 1 GiB units here; pages is a count of them. */
mia_export int mi_reserve_huge_os_pages_at_ex(size_t pages, int numa_node, size_t timeout_msecs, bool exclusive,
                                              mi_arena_id_t *arena_id) {
  (void)numa_node;
  (void)timeout_msecs;
  if (arena_id != NULL) *arena_id = 0;
  if (pages == 0) return 0;
  mia_arena_t *arena = mia_arena_reserve_huge(mia_current_subproc(), pages);
  if (arena == NULL) return ENOMEM;
  arena->exclusive = exclusive;
  if (arena_id != NULL) *arena_id = arena->id;
  return 0;
}

mia_export int mi_reserve_huge_os_pages_at(size_t pages, int numa_node, size_t timeout_msecs) {
  return mi_reserve_huge_os_pages_at_ex(pages, numa_node, timeout_msecs, false, NULL);
}

mia_export int mi_reserve_huge_os_pages(size_t pages, double max_secs, size_t *pages_reserved) {
  size_t msecs = max_secs > 0 ? (size_t)(max_secs * 1000.0) : 0;
  int err = mi_reserve_huge_os_pages_at(pages, -1, msecs);
  if (pages_reserved != NULL) *pages_reserved = err == 0 ? pages : 0;
  return err;
}

mia_export int mi_reserve_huge_os_pages_interleave(size_t pages, size_t numa_nodes, size_t timeout_msecs) {
  (void)numa_nodes;
  return mi_reserve_huge_os_pages_at(pages, -1, timeout_msecs);
}

mia_export void *mi_arena_area(mi_arena_id_t arena_id, size_t *size) {
  if (size != NULL) *size = 0;
  mia_arena_t *arena = mia_arena_by_id(mia_current_subproc(), arena_id);
  if (arena == NULL) return NULL;
  if (size != NULL) *size = arena->size;
  return arena->base;
}

size_t mia_arena_reserved_total(void) {
  size_t total = 0;
  for (mia_arena_t *a = mia_subproc_main.arenas; a != NULL; a = a->next) total += a->size;
  return total;
}

mia_export void mi_debug_show_arenas(bool show_inuse, bool show_abandoned, bool show_purge) {
  (void)show_inuse;
  (void)show_abandoned;
  (void)show_purge;
  mia_subproc_t *sp = mia_current_subproc();
  mia_lock(&sp->lock);
  size_t n = 0;
  for (mia_arena_t *a = sp->arenas; a != NULL; a = a->next) {
    size_t used = 0, dirty = 0;
    for (size_t i = 0; i < a->segment_count; i++) {
      used += bit_get(a->used_map, i);
      dirty += bit_get(a->dirty_map, i);
    }
    mia_message("arena %d: %zu MiB at %p, %zu of %zu segments in use, %zu free but dirty%s%s%s\n", a->id,
                a->size >> 20, (void *)a->base, used, a->segment_count, dirty, a->exclusive ? ", exclusive" : "",
                a->pinned ? ", pinned" : "", a->caller_owned ? ", caller's memory" : "");
    n++;
  }
  mia_unlock(&sp->lock);
  if (n == 0) mia_message("no arenas yet\n");
}

mia_export void mi_arenas_print(void) { mi_debug_show_arenas(true, false, false); }

/* segment.c -- a thread's 4 MiB segments, the pages cut from them, huge
 * spans, and abandonment when a thread exits.
 *
 * A segment belongs to one thread (its tld): other threads only ever touch
 * a page's atomic thread_free list.  The owner holds its tld's segment lock
 * in the entry points below, which nobody else takes but the purge thread,
 * with trylock, to purge the free slices of a thread gone idle
 * (mia_segments_purge_overdue): uncontended, one atomic operation each way,
 * and never on the fast paths.
 */
#include "internal.h"

#define MIA_ALL_SLICES (~(uint64_t)0)

/* Entry points call each other (freeing a page may purge; adopting a
 * segment frees its empty pages), hence the depth: only the owner enters. */
static void tld_enter(mia_tld_t *tld) {
  if (tld->segment_lock_depth++ == 0) mia_lock(&tld->segment_lock);
}

/* Starting the purge thread allocates, which must not find the segment
 * state half updated: it waits for the outermost entry point to leave. */
static void tld_leave(mia_tld_t *tld) {
  if (--tld->segment_lock_depth != 0) return;
  bool poke = tld->purge_poke;
  tld->purge_poke = false;
  mia_unlock(&tld->segment_lock);
  if (poke) mia_purge_poke();
  if (tld->purge_start_later != 0) mia_purge_start_deferred_run(tld);
}

/* The purge thread's pending bytes count a thread segment's free dirty
 * slices while a purge is scheduled for them, so that an idle thread's
 * freed memory starts the purge thread as freed segments do.
 *
 * Every page a thread takes and gives back changes them, and one count
 * that every thread updates is a cache line they take from each other
 * (bench/pagechurn; doc/design.md, "Statistics").  So the segment's tld
 * gathers the change (under its segment lock, as the masks) and passes
 * it on a step at a time.  The count may lag by a step per tld; it only
 * decides when the purge thread starts. */
#define MIA_PENDING_STEP ((int64_t)(16 * MIA_SLICE_SIZE))

static void pending_pass_on(mia_tld_t *tld) {
  int64_t bytes = tld->purge_pending;
  tld->purge_pending = 0;
  if (bytes < 0) {
    mia_purge_done((size_t)-bytes);
  } else if (bytes > 0) {
    /* only owners add (a purge only takes away): their tld_leave pokes */
    mia_purge_pending_add((size_t)bytes);
    tld->purge_poke = true;
  }
}

static void pending_set(mia_segment_t *seg, uint64_t mask) {
  uint64_t added = mask & ~seg->pending_mask, gone = seg->pending_mask & ~mask;
  seg->pending_mask = mask;
  if ((added | gone) == 0) return;
  int64_t bytes = ((int64_t)__builtin_popcountll(added) - (int64_t)__builtin_popcountll(gone)) * (int64_t)MIA_SLICE_SIZE;
  mia_tld_t *tld = seg->tld;
  if (tld == NULL) {   /* a segment destroyed (mia_segment_destroy): only takes away */
    mia_purge_done(bytes < 0 ? (size_t)-bytes : 0);
    return;
  }
  tld->purge_pending += bytes;
  if (tld->purge_pending >= MIA_PENDING_STEP || tld->purge_pending <= -MIA_PENDING_STEP) pending_pass_on(tld);
}

/* A tld that is done (mia_thread_data_free, or a forked child's tld of a
 * thread it does not have) passes on what it gathered. */
void mia_segments_pending_flush(mia_tld_t *tld) {
  pending_pass_on(tld);
  tld->purge_poke = false;
}

static void pending_update(mia_segment_t *seg) {
  pending_set(seg, seg->purge_at != 0 ? seg->dirty_mask & ~seg->used_mask : 0);
}

static uint64_t slice_bits(size_t idx, size_t count) {
  return (count >= 64 ? MIA_ALL_SLICES : (((uint64_t)1 << count) - 1)) << idx;
}

/* Index of the lowest run of count clear bits in mask, or 0 (slice 0 is the
 * metadata and always set, so 0 can never be a valid answer). */
static size_t find_free_slices(uint64_t used, size_t count) {
  uint64_t run = ~used;
  for (size_t i = 1; i < count && run != 0; i++) run &= ~used >> i;
  return run == 0 ? 0 : (size_t)__builtin_ctzll(run);
}

/* Best fit: the start of the shortest run of clear bits in used that holds
 * count (the lowest among equals), or 0; *len gets the run's length. */
static size_t find_best_slices(uint64_t used, size_t count, size_t *len) {
  size_t best = 0;
  *len = SIZE_MAX;
  for (uint64_t rest = ~used; rest != 0;) {
    size_t start = (size_t)__builtin_ctzll(rest);
    uint64_t above = ~(rest >> start);   /* the run's end is its lowest set bit */
    size_t run = above == 0 ? 64 - start : (size_t)__builtin_ctzll(above);
    if (run >= count && run < *len) {
      best = start;
      *len = run;
      if (run == count) break;
    }
    rest &= ~slice_bits(start, run);
  }
  return best;
}

static void list_remove(mia_segment_t **head, mia_segment_t *s) {
  if (s->prev) s->prev->next = s->next;
  else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

static void list_push(mia_segment_t **head, mia_segment_t *s) {
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}

/* Secure builds: the rest of slice 0 after the metadata is a guard, so an
 * underflow of the first page cannot reach the segment's metadata.  It
 * stays when the memory goes back to the arena, which lifts it before any
 * use but another thread segment's (arena.c). */
static void mia_segment_guard(mia_segment_t *seg) {
#if MIALLOC_SECURE
  size_t ps = mia_prim_page_size();
  size_t meta = (sizeof(mia_segment_t) + ps - 1) & ~(ps - 1);
  if (meta < MIA_SLICE_SIZE && mia_prim_guard_on((uint8_t *)seg + meta, MIA_SLICE_SIZE - meta)) seg->guard_mask |= 1;
#else
  (void)seg;
#endif
}

/* Secure builds: the last OS page of every page is a guard (see
 * mia_page_guard_size).  Guards are sticky: a freed page leaves its guard
 * in place, so a page of the same shape cut there later -- most pages are
 * one slice -- costs no system call; a page cut over slices whose guards
 * would fall inside it lifts those.  Every guard goes before the segment
 * returns to its arena, where anything may use the memory next.  A guard
 * the OS layer refuses (no markers and its budget of PROT_NONE guards
 * spent, see mia_prim_guard_on) leaves a page unguarded; its blocks never
 * use the guard's room either way. */
static void mia_slice_guard(mia_segment_t *seg, size_t slice, bool on) {
  size_t g = mia_page_guard_size();
  uint8_t *guard = (uint8_t *)seg + (slice + 1) * MIA_SLICE_SIZE - g;
  if (on) {
    mia_guard_handler_ensure();
    if (mia_prim_guard_on(guard, g)) seg->guard_mask |= (uint64_t)1 << slice;
  } else {
    mia_prim_guard_off(guard, g, 1, true);
    seg->guard_mask &= ~((uint64_t)1 << slice);
  }
}

static void mia_page_guard_place(mia_segment_t *seg, size_t idx, size_t slices) {
  if (mia_page_guard_size() == 0) return;
  for (uint64_t m = seg->guard_mask & slice_bits(idx, slices - 1); m != 0; m &= m - 1)
    mia_slice_guard(seg, (size_t)__builtin_ctzll(m), false);
  size_t last = idx + slices - 1;
  if (!((seg->guard_mask >> last) & 1)) mia_slice_guard(seg, last, true);
}

/* What a thread segment leaves guarded when it returns to its arena: its
 * page guards, and bit 0 for the metadata guard (the arena keeps them for
 * the next thread segment, or lifts them for any other use). */
static uint64_t mia_segment_guards(const mia_segment_t *seg) {
  return seg->guard_mask;
}

static void mia_segment_header_init(mia_segment_t *seg, mia_subproc_t *sp, size_t size, bool is_zero) {
  if (!is_zero) memset(seg, 0, sizeof *seg);
  seg->cookie = (uintptr_t)seg ^ mia_process_secret;
  seg->subproc = sp;
  seg->size = size;
  seg->used_mask = 1;
  seg->dirty_mask = is_zero ? 1 : MIA_ALL_SLICES;
}

/* Adopt what other threads left behind before the thread takes fresh
 * memory: an abandoned segment (reusing its memory beats reserving more;
 * its pages join the thread's theap, so the caller may find one of the
 * size it needs there).  Only the main heap adopts live blocks: abandoned
 * memory belongs to it, and a first-class heap that took some would free
 * it in mi_heap_destroy; other heaps take the segments emptied since.
 * Returns an adopted segment with room for count slices, or NULL. */
static mia_segment_t *segment_reclaim_held(mia_tld_t *tld, size_t count) {
  long tries = mia_option_get_fast(mi_option_max_segment_reclaim);
  mia_segment_t *seg;
  if (!tld->heap->is_main) {
    seg = mia_segments_reclaim_empty(tld, tries);
    return seg != NULL && find_free_slices(seg->used_mask, count) != 0 ? seg : NULL;
  }
  for (long i = 0; i < tries && mia_segment_reclaim_one(tld, &seg); i++) {
    if (seg != NULL && find_free_slices(seg->used_mask, count) != 0) return seg;
  }
  return NULL;
}

mia_segment_t *mia_segment_reclaim(mia_tld_t *tld, size_t count) {
  tld_enter(tld);
  mia_segment_t *seg = segment_reclaim_held(tld, count);
  tld_leave(tld);
  return seg;
}

/* Whether one of the thread's segments has room for a page of count slices. */
bool mia_segments_have_room(const mia_tld_t *tld, size_t count) {
  for (const mia_segment_t *seg = tld->segments; seg != NULL; seg = seg->next)
    if (find_free_slices(seg->used_mask, count) != 0) return true;
  return false;
}

/* A segment with room for count slices: an abandoned one, else a fresh one
 * from the arenas. */
static mia_segment_t *mia_segment_new(mia_tld_t *tld, size_t count) {
  mia_segment_t *seg = segment_reclaim_held(tld, count);
  if (seg != NULL) return seg;
  mia_check_tool_blindness();   /* once, on the first thread segment */
  bool is_zero;
  uint64_t guards = 0;
  seg = mia_arena_alloc_segments(tld->subproc, tld->heap->arena, 1, &is_zero, ~(uint64_t)0, &guards);
  if (seg == NULL) return NULL;
  mia_segment_header_init(seg, tld->subproc, MIA_SEGMENT_SIZE, is_zero);
  seg->guard_mask = guards;   /* still set from the memory's last use (bit 0: the metadata guard) */
  /* thread segments live long; huge spans come and go too often for two
   * system calls each (their metadata slice holds only their header) */
  if (!(guards & 1)) mia_segment_guard(seg);
  mia_stat_commit(__builtin_popcountll(seg->dirty_mask) * (int64_t)MIA_SLICE_SIZE);
  seg->tld = tld;
  seg->heap = tld->heap;
  list_push(&tld->segments, seg);
  tld->segment_count++;
  return seg;
}

static void mia_segment_release(mia_tld_t *tld, mia_segment_t *seg) {
  pending_set(seg, 0);   /* the arena counts them from here */
  list_remove(seg->in_full_list ? &tld->segments_full : &tld->segments, seg);
  tld->segment_count--;
  mia_stat_commit(-__builtin_popcountll(seg->dirty_mask) * (int64_t)MIA_SLICE_SIZE);
  mia_arena_free_segments(seg->subproc, seg, 1, mia_segment_guards(seg));
}

/* Prefer slices still dirty from an earlier page: they are resident, so
 * reusing them costs no page faults, and clean ones stay clean.  Best fit,
 * so that a short page does not split a long run a longer page needs. */
static size_t find_slices_for_page(const mia_segment_t *seg, size_t slices) {
  size_t len;
  size_t idx = find_best_slices(seg->used_mask | ~seg->dirty_mask, slices, &len);
  return idx != 0 ? idx : find_best_slices(seg->used_mask, slices, &len);
}

/* Secure builds: a place for count slices, all free and dirty, that finds
 * the page's guard set already and none inside -- where a page of the same
 * shape was freed (guards are sticky), or a shorter one ending at the same
 * slice -- and the length of the free dirty run around it; 0 if none. */
static size_t find_guarded_slices(const mia_segment_t *seg, size_t count, size_t *len) {
  uint64_t avail = ~seg->used_mask & seg->dirty_mask;
  for (uint64_t m = seg->guard_mask & avail; m != 0; m &= m - 1) {
    size_t last = (size_t)__builtin_ctzll(m);
    if (last < count) continue;   /* would reach slice 0 */
    size_t idx = last + 1 - count;
    uint64_t bits = slice_bits(idx, count);
    if ((avail & bits) != bits || (seg->guard_mask & bits) != (uint64_t)1 << last) continue;
    size_t above = last == 63 ? 0 : (size_t)__builtin_ctzll(~(avail >> (last + 1)));
    size_t below = (size_t)__builtin_clzll(~(avail << (64 - idx)));
    *len = below + count + above;
    return idx;
  }
  return 0;
}

/* The shortest run of dirty free slices that holds count among the thread's
 * first segments, before any clean one: a page that took clean slices while
 * a freed run waited in another segment cost page faults then and a purge
 * of that run later (randlife: 50,000-62,000 faults with first fit over the
 * segment list, 40,000-44,000 with dirty runs first, 35,500-36,800 with
 * them best fit).  The bound keeps a thread with thousands of half-used
 * segments from reading every header for each new page.
 *
 * In secure builds, among runs as short, one where the page's guard is in
 * place already: each guard set or lifted is a system call, and a set is a
 * TLB flush on every CPU that runs the program (aligncalloc and randlife,
 * whose big blocks take pages of every shape, made 2,200-2,900 guard calls
 * a run).  Taking such a place out of a longer run cost more in page faults
 * later than it saved (randlife: 20 % more faults). */
#define MIA_DIRTY_SCAN_SEGMENTS 32

static mia_segment_t *find_dirty_slices(mia_tld_t *tld, size_t count, size_t *idx) {
  const bool guards = mia_page_guard_size() != 0;   /* secure builds */
  mia_segment_t *best = NULL;
  size_t best_len = SIZE_MAX;
  bool best_guarded = false;
  int scanned = 0;
  for (mia_segment_t *seg = tld->segments; seg != NULL && scanned < MIA_DIRTY_SCAN_SEGMENTS;
       seg = seg->next, scanned++) {
    size_t len, at = find_best_slices(seg->used_mask | ~seg->dirty_mask, count, &len);
    if (at == 0) continue;
    bool guarded = false;
    size_t glen, gat = guards ? find_guarded_slices(seg, count, &glen) : 0;
    if (gat != 0 && glen <= len) {
      at = gat;
      len = glen;
      guarded = true;
    }
    if (len > best_len || (len == best_len && (best_guarded || !guarded))) continue;
    best = seg;
    best_len = len;
    best_guarded = guarded;
    *idx = at;
    if (len == count && (guarded || !guards)) break;
  }
  return best;
}

/* Where a page of count slices starts on the most resident memory: the
 * free run of count slices that starts with the longest row of dirty
 * slices (pages carve from their start, so that is what they use first),
 * the first of the thread's first segments among equals; NULL if none
 * starts on a dirty slice.  For pages of several slices where no run of
 * count dirty ones is free (find_dirty_slices). */
static mia_segment_t *find_dirty_led_slices(mia_tld_t *tld, size_t count, size_t *idx) {
  mia_segment_t *best = NULL;
  size_t best_lead = 0;
  int scanned = 0;
  for (mia_segment_t *seg = tld->segments; seg != NULL && scanned < MIA_DIRTY_SCAN_SEGMENTS;
       seg = seg->next, scanned++) {
    uint64_t free = ~seg->used_mask, dirty = free & seg->dirty_mask, starts = free;
    for (size_t i = 1; i < count && starts != 0; i++) starts &= free >> i;
    for (uint64_t m = starts & dirty; m != 0; m &= m - 1) {
      size_t start = (size_t)__builtin_ctzll(m);
      uint64_t above = ~(dirty >> start);
      size_t lead = above == 0 ? 64 - start : (size_t)__builtin_ctzll(above);
      if (lead <= best_lead) continue;
      best = seg;
      best_lead = lead;
      *idx = start;
    }
  }
  return best;
}

/* The first of the thread's segments with room for count slices, or NULL. */
static mia_segment_t *find_any_slices(mia_tld_t *tld, size_t count, size_t *idx) {
  for (mia_segment_t *seg = tld->segments; seg != NULL; seg = seg->next) {
    *idx = find_slices_for_page(seg, count);
    if (*idx != 0) return seg;
  }
  return NULL;
}

static mia_page_t *segment_page_alloc_held(mia_tld_t *tld, size_t slices) {
  size_t idx = 0;
  mia_segment_t *seg = find_dirty_slices(tld, slices, &idx);
  if (seg == NULL && slices > 1) seg = find_dirty_led_slices(tld, slices, &idx);
  if (seg == NULL) seg = find_any_slices(tld, slices, &idx);
  if (seg == NULL) {
    seg = mia_segment_new(tld, slices);
    if (seg == NULL) return NULL;
    idx = find_slices_for_page(seg, slices);
  }
  uint64_t bits = slice_bits(idx, slices);
  mia_assert(idx >= 1 && idx + slices <= MIA_SEGMENT_SLICES && (seg->used_mask & bits) == 0);
  mia_assert(seg->tld == tld && !seg->is_huge);
  seg->used_mask |= bits;
  mia_page_t *page = &seg->pages[idx];
  memset(page, 0, sizeof *page);
  page->slice_count = (uint16_t)slices;
  page->start = (uint8_t *)seg + idx * MIA_SLICE_SIZE;
  page->is_zero_init = (seg->dirty_mask & bits) == 0;
  page->fresh_slices = bits & ~seg->dirty_mask;
  mia_stat_commit(__builtin_popcountll(bits & ~seg->dirty_mask) * (int64_t)MIA_SLICE_SIZE);
  seg->dirty_mask |= bits;
  seg->purge_mask &= ~bits;
  if (seg->used_mask == MIA_ALL_SLICES) {
    list_remove(&tld->segments, seg);
    list_push(&tld->segments_full, seg);
    seg->in_full_list = true;
  }
  mia_pagemap_set(page->start, slices, page);
  mia_page_guard_place(seg, idx, slices);
  pending_update(seg);
  return page;
}

mia_page_t *mia_segment_page_alloc(mia_tld_t *tld, size_t slices) {
  tld_enter(tld);
  mia_page_t *page = segment_page_alloc_held(tld, slices);
  tld_leave(tld);
  return page;
}

/* The thread's next purge check comes no later than the segment's purge
 * (stored atomically: the purge thread reads it without the lock). */
static void note_purge_at(mia_tld_t *tld, const mia_segment_t *seg) {
  if (seg->purge_at != 0 && (tld->next_purge_check == 0 || seg->purge_at < tld->next_purge_check))
    __atomic_store_n(&tld->next_purge_check, seg->purge_at, __ATOMIC_RELAXED);
}

/* After a purge pass: the next check is the earliest purge still scheduled. */
static uint64_t reset_next_purge(mia_tld_t *tld) {
  uint64_t next = 0;
  for (const mia_segment_t *seg = tld->segments; seg != NULL; seg = seg->next)
    next = mia_deadline_min(next, seg->purge_at);
  __atomic_store_n(&tld->next_purge_check, next, __ATOMIC_RELAXED);
  return next;
}

static void mia_segment_schedule_purge(mia_tld_t *tld, mia_segment_t *seg, uint64_t now) {
  long delay = mia_option_get_fast(mi_option_purge_delay);
  if (delay < 0) return;
  if (seg->purge_at == 0) {
    /* the slices free now have waited long enough at the deadline */
    seg->purge_mask = seg->dirty_mask & ~seg->used_mask;
    seg->purge_at = now + (uint64_t)delay;
  }
  note_purge_at(tld, seg);
}

/* A page's blocks are carved from its start, so slices past the last block
 * it carved were never written: those that were clean when it was cut are
 * clean still, and a later page cut there needs no memory that is not
 * resident already -- nor a purge once free.  A page of a size a thread
 * used a few blocks of (a 40 KiB block in a 512 KiB page) otherwise made
 * its whole span dirty, and a later page looking for dirty room could
 * land where little of it was resident.  Not where pages end with a guard
 * (secure builds): a page of the same shape reuses a freed one's guard
 * only where the whole run is dirty (find_guarded_slices), and clean
 * tails had it set and lift guards elsewhere instead, each a system call
 * (randlife: 30 % more of them). */
static void mia_segment_keep_clean(mia_segment_t *seg, const mia_page_t *page, size_t idx) {
  if (page->fresh_slices == 0 || mia_page_guard_size() != 0) return;
  size_t carved = ((size_t)page->capacity * page->block_size + MIA_SLICE_SIZE - 1) / MIA_SLICE_SIZE;
  if (carved >= page->slice_count) return;
  uint64_t clean = page->fresh_slices & ~slice_bits(idx, carved);
  seg->dirty_mask &= ~clean;
  mia_stat_commit(-__builtin_popcountll(clean) * (int64_t)MIA_SLICE_SIZE);
}

/* Take an empty page out of its segment (held by the caller): its slices
 * are free from here on. */
static void segment_page_unlink(mia_segment_t *seg, mia_page_t *page) {
  size_t idx = (size_t)(page - seg->pages);
  uint64_t bits = slice_bits(idx, page->slice_count);
  mia_assert(seg->cookie == ((uintptr_t)seg ^ mia_process_secret));
  mia_assert(idx >= 1 && page->slice_count > 0 && (seg->used_mask & bits) == bits);
  mia_stat_page(page, -1);
  mia_segment_keep_clean(seg, page, idx);
  mia_pagemap_set(page->start, page->slice_count, NULL);
  mia_page_set_free_key(page, 0);
  page->block_size = 0;
  page->slice_count = 0;
  atomic_store_explicit(&page->theap, NULL, memory_order_relaxed);
  seg->used_mask &= ~bits;
}

static void segment_page_free_held(mia_page_t *page) {
  mia_segment_t *seg = mia_segment_of_page(page);
  mia_tld_t *tld = seg->tld;
  segment_page_unlink(seg, page);
  if (seg->in_full_list) {
    list_remove(&tld->segments_full, seg);
    list_push(&tld->segments, seg);
    seg->in_full_list = false;
  }
  /* an empty segment goes back to its arena, unless it is the thread's
   * only one: a thread cycling through a small heap would claim and
   * release it over and over */
  if (seg->used_mask == 1 && tld->segment_count > 1) {
    mia_segment_release(tld, seg);
    return;
  }
  /* most frees find the segment's purge scheduled and not due yet, which
   * the cheap clock can tell: a loop that sets up and lets go of pages
   * (64 blocks of 8 KiB allocated and freed) spent a tenth of its time
   * reading the precise one */
  if (seg->purge_at == 0 || tld->next_purge_check == 0 || mia_prim_clock_ms_upper() >= tld->next_purge_check) {
    uint64_t now = mia_prim_clock_ms();
    mia_segment_schedule_purge(tld, seg, now);
    if (now >= tld->next_purge_check) mia_segments_purge(tld, false);
  }
  pending_update(seg);
}

/* For a caller's walk that frees pages one by one while it holds the next
 * (theap.c): a purge-thread start asked for on the way waits for the walk's
 * end, when no page is held (see tld_leave). */
void mia_segment_ops_begin(mia_tld_t *tld) { tld_enter(tld); }
void mia_segment_ops_end(mia_tld_t *tld) { tld_leave(tld); }

void mia_segment_page_free(mia_page_t *page) {
  mia_tld_t *tld = mia_segment_of_page(page)->tld;
  tld_enter(tld);
  segment_page_free_held(page);
  tld_leave(tld);
}

/* Purge the free slices that stayed free for a whole delay (all of them
 * when force); the ones freed since become candidates for the next round. */
static void mia_segment_purge(mia_segment_t *seg, bool lazy, bool force, uint64_t now) {
  uint64_t free_dirty = seg->dirty_mask & ~seg->used_mask;
  uint64_t dirty_free = force ? free_dirty : (seg->purge_mask & free_dirty);
  seg->purge_mask = free_dirty & ~dirty_free;
  while (dirty_free != 0) {
    size_t start = (size_t)__builtin_ctzll(dirty_free);
    size_t end = start;
    while (end < 64 && ((dirty_free >> end) & 1)) end++;
    mia_prim_purge((uint8_t *)seg + start * MIA_SLICE_SIZE, (end - start) * MIA_SLICE_SIZE, lazy);
    mia_stat_purge((end - start) * MIA_SLICE_SIZE);
    seg->dirty_mask &= ~slice_bits(start, end - start);
    dirty_free &= ~slice_bits(start, end - start);
  }
  long delay = mia_option_get_fast(mi_option_purge_delay);
  seg->purge_at = seg->purge_mask != 0 && delay >= 0 ? now + (uint64_t)delay : 0;
}

/* Purge the free slices of this thread's segments whose delay has passed;
 * with force, everything free, and empty segments go back to the arena. */
static void segments_purge_held(mia_tld_t *tld, bool force) {
  uint64_t now = mia_prim_clock_ms();
  bool lazy = mia_option_get_fast(mi_option_purge_decommits) == 0;
  mia_segment_t *seg = tld->segments;
  while (seg != NULL) {
    mia_segment_t *following = seg->next;
    if (force && seg->used_mask == 1) {
      mia_segment_release(tld, seg);
    } else if (force || (seg->purge_at != 0 && now >= seg->purge_at)) {
      mia_segment_purge(seg, lazy, force, now);
      pending_update(seg);
    }
    seg = following;
  }
  reset_next_purge(tld);
}

void mia_segments_purge(mia_tld_t *tld, bool force) {
  tld_enter(tld);
  segments_purge_held(tld, force);
  tld_leave(tld);
  mia_arenas_purge(tld->subproc, force);
}

/* The purge thread, for a tld that stays in use while it looks (purge.c):
 * free slices whose purge is overdue by grace were left by an owner that
 * has not run a slow path since -- a thread that went idle, which would
 * keep them for good.  A held lock means the owner is at it.  All of a due
 * segment's free slices go at once: a page freed since its deadline would
 * have run the owner's purge, so each has been free for grace or longer,
 * and grace is at least a delay.  Returns when to look again, 0 when
 * nothing waits. */
uint64_t mia_segments_purge_overdue(mia_tld_t *tld, uint64_t now, uint64_t grace) {
  uint64_t check = __atomic_load_n(&tld->next_purge_check, __ATOMIC_RELAXED);
  if (check == 0 || grace == UINT64_MAX) return 0;
  if (now < check + grace) return check + grace;
  if (!mia_trylock(&tld->segment_lock)) return now + grace;
  bool lazy = mia_option_get_fast(mi_option_purge_decommits) == 0;
  for (mia_segment_t *seg = tld->segments; seg != NULL; seg = seg->next) {
    if (seg->purge_at != 0 && now >= seg->purge_at) {
      mia_segment_purge(seg, lazy, true, now);
      pending_update(seg);
    }
  }
  uint64_t next = reset_next_purge(tld);
  mia_unlock(&tld->segment_lock);
  return next == 0 ? 0 : next + grace;
}

/* ---- huge spans: whole segments, one block, freed by any thread ---- */

/* Huge spans are listed with their heap, so that mi_heap_destroy finds
 * them; frees come from any thread, hence the heap's lock. */
static void mia_huge_link(mia_segment_t *seg, mi_heap_t *heap) {
  mia_lock(&heap->lock);
  seg->heap = heap;
  list_push(&heap->huge, seg);
  mia_unlock(&heap->lock);
}

/* Take the span off its heap's list. */
static void mia_huge_unlink(mia_segment_t *seg) {
  for (;;) {
    mi_heap_t *heap = __atomic_load_n(&seg->heap, __ATOMIC_ACQUIRE);
    mia_lock(&heap->lock);
    /* a delete of the heap may have moved the span meanwhile */
    if (__atomic_load_n(&seg->heap, __ATOMIC_RELAXED) == heap) {
      list_remove(&heap->huge, seg);
      mia_unlock(&heap->lock);
      return;
    }
    mia_unlock(&heap->lock);
  }
}

void mia_huge_move_to_heap(mia_segment_t *seg, mi_heap_t *heap) {
  seg->next = seg->prev = NULL;
  mia_lock(&heap->lock);
  list_push(&heap->huge, seg);
  __atomic_store_n(&seg->heap, heap, __ATOMIC_RELEASE);
  mia_unlock(&heap->lock);
}

/* A huge span ends with the guard page of secure builds; span_guard lifts
 * or sets that guard at the span's current end (the last OS page of its
 * last segment: seg->guard_mask says whether it is set, and the arena
 * keeps it for the next span ending there). */
static void mia_huge_span_guard(mia_segment_t *seg, bool on) {
  size_t g = mia_page_guard_size();
  if (g == 0 || on == ((seg->guard_mask & MIA_GUARD_LAST_SLICE) != 0)) return;
  uint8_t *guard = (uint8_t *)seg + seg->size - g;
  if (on) {
    mia_guard_handler_ensure();
    if (!mia_prim_guard_on(guard, g)) return;
  } else {
    mia_prim_guard_off(guard, g, 1, true);
  }
  seg->guard_mask ^= MIA_GUARD_LAST_SLICE;
}

/* Where the room for a huge block ends: the span's guard page follows. */
uint8_t *mia_huge_span_end(const mia_page_t *page) {
  mia_segment_t *seg = mia_segment_of_page(page);
  return (uint8_t *)seg + seg->size - mia_page_guard_size();
}

/* A huge block's usable size runs to the OS page after its last byte, not
 * to the end of its span, which may be most of a segment longer and hold
 * what a former block left there: zeroing allocations zero the usable
 * size, and mi_rezalloc zeroes from it on.  used: the bytes from
 * page->start that the block needs. */
void mia_huge_set_used(mia_page_t *page, size_t used) {
  uintptr_t mask = mia_prim_page_size() - 1;
  size_t room = (size_t)(mia_huge_span_end(page) - page->start);
  size_t rounded = (used + mask) & ~mask;
  page->block_size = rounded < room ? rounded : room;
}

/* mi_expand of a huge block: more of the span's room, no new segment. */
bool mia_huge_expand(mia_page_t *page, size_t used) {
  if (used > (size_t)(mia_huge_span_end(page) - page->start)) return false;
  mia_huge_set_used(page, used);
  return true;
}

static void mia_huge_set_end(mia_page_t *page, mia_segment_t *seg, size_t used) {
  mia_huge_set_used(page, used);
  mia_huge_span_guard(seg, true);
}

mia_page_t *mia_huge_page_alloc(mi_heap_t *heap, size_t size, size_t alignment) {
  mia_subproc_t *sp = heap->subproc;
  size_t extra = alignment > MIA_SLICE_SIZE ? alignment : 0;
  size_t need = MIA_SLICE_SIZE + size + extra + mia_page_guard_size();
  if (need < size || !mia_prim_may_back(need)) return NULL;
  size_t count = (need + MIA_SEGMENT_SIZE - 1) / MIA_SEGMENT_SIZE;
  bool is_zero;
  uint64_t guards = 0;
  mia_segment_t *seg = mia_arena_alloc_segments(sp, heap->arena, count, &is_zero, MIA_GUARD_LAST_SLICE, &guards);
  if (seg == NULL) return NULL;
  mia_segment_header_init(seg, sp, count * MIA_SEGMENT_SIZE, is_zero);
  seg->guard_mask = guards;   /* the span's end guard, if still set */
  seg->is_huge = true;
  seg->used_mask = MIA_ALL_SLICES;
  mia_page_t *page = &seg->pages[1];
  page->slice_count = (uint16_t)(count * MIA_SEGMENT_SLICES - 1 > UINT16_MAX ? UINT16_MAX
                                                                                : count * MIA_SEGMENT_SLICES - 1);
  page->start = (uint8_t *)seg + MIA_SLICE_SIZE;
  mia_huge_set_end(page, seg, size);
  page->reserved = page->capacity = page->used = 1;
  page->bin = MIA_BIN_HUGE;
  page->is_huge = true;
  page->is_zero_init = is_zero;
  mia_page_set_free_key(page, MIA_PAGE_IN_FULL);   /* never a thread id: frees take the generic path */
  if (!is_zero) mia_block_forget_mark(page->start);
  mia_pagemap_set(page->start, count * MIA_SEGMENT_SLICES - 1, page);
  mia_stat_huge((int64_t)seg->size, 1);
  mia_huge_link(seg, heap);
  return page;
}

/* realloc of a huge block: grow the span over the free segments after it.
 * Only the block's owner (the caller of realloc) touches the page here. */
bool mia_huge_page_grow(mia_page_t *page, size_t newsize) {
  mia_segment_t *seg = mia_segment_of_page(page);
  size_t used_end = (size_t)(page->start - (uint8_t *)seg) + newsize + mia_page_guard_size();
  size_t count = seg->size / MIA_SEGMENT_SIZE;
  size_t want = (used_end + MIA_SEGMENT_SIZE - 1) / MIA_SEGMENT_SIZE;
  if (want <= count) {
    mia_huge_set_used(page, newsize);
    return true;
  }
  bool is_zero;
  if (!mia_prim_may_back(want * MIA_SEGMENT_SIZE)) return false;
  if (!mia_arena_extend_segments(seg, count, want - count, &is_zero)) return false;
  uint8_t *old_end = (uint8_t *)seg + seg->size;
  mia_huge_span_guard(seg, false);
  seg->size = want * MIA_SEGMENT_SIZE;
  mia_huge_set_end(page, seg, newsize);
  mia_pagemap_set(old_end, (want - count) * MIA_SEGMENT_SLICES, page);
  mia_stat_huge((int64_t)((want - count) * MIA_SEGMENT_SIZE), 0);
  return true;
}

/* realloc to a much smaller huge size: give the tail segments back. */
void mia_huge_page_shrink(mia_page_t *page, size_t newsize) {
  mia_segment_t *seg = mia_segment_of_page(page);
  size_t used_end = (size_t)(page->start - (uint8_t *)seg) + newsize + mia_page_guard_size();
  size_t count = seg->size / MIA_SEGMENT_SIZE;
  size_t want = (used_end + MIA_SEGMENT_SIZE - 1) / MIA_SEGMENT_SIZE;
  if (want >= count) {
    mia_huge_set_used(page, newsize);
    return;
  }
  uint8_t *tail = (uint8_t *)seg + want * MIA_SEGMENT_SIZE;
  mia_pagemap_set(tail, (count - want) * MIA_SEGMENT_SLICES, NULL);
  mia_huge_span_guard(seg, false);   /* in the tail, which goes back */
  seg->size = want * MIA_SEGMENT_SIZE;
  mia_huge_set_end(page, seg, newsize);
  mia_stat_huge(-(int64_t)((count - want) * MIA_SEGMENT_SIZE), 0);
  mia_arena_free_segments(seg->subproc, tail, count - want, 0);
}

void mia_huge_page_free(mia_page_t *page) {
  mia_segment_t *seg = mia_segment_of_page(page);
  mia_huge_unlink(seg);
  mia_huge_release(page);
}

/* mi_heap_destroy: the span is already off its heap's list. */
void mia_huge_destroy(mia_segment_t *seg) {
  mia_page_t *page = &seg->pages[1];
  if (mia_page_flags(page) & MIA_PAGE_HAS_SAMPLED) mia_prof_page_destroyed(page);
  if (mia_annotated()) mia_annot_destroyed_block(page, page->start, NULL);
  mia_huge_release(page);
}

void mia_huge_release(mia_page_t *page) {
  mia_segment_t *seg = mia_segment_of_page(page);
  size_t count = seg->size / MIA_SEGMENT_SIZE;
  mia_pagemap_set(page->start, count * MIA_SEGMENT_SLICES - 1, NULL);
  mia_stat_huge(-(int64_t)seg->size, -1);
  mia_page_set_free_key(page, 0);
  page->block_size = 0;
  mia_arena_free_segments(seg->subproc, seg, count, seg->guard_mask & MIA_GUARD_LAST_SLICE);
}

/* ---- abandonment and reclaim ---- */

static mia_page_t *mia_segment_next_page(mia_segment_t *seg, size_t *idx) {
  while (*idx < MIA_SEGMENT_SLICES) {
    mia_page_t *page = &seg->pages[*idx];
    if (((seg->used_mask >> *idx) & 1) && page->slice_count > 0) {
      *idx += page->slice_count;
      return page;
    }
    (*idx)++;
  }
  return NULL;
}

/* Free slices of a segment that are still resident, in bytes. */
static size_t mia_segment_free_dirty(const mia_segment_t *seg) {
  return (size_t)__builtin_popcountll(seg->dirty_mask & ~seg->used_mask) * MIA_SLICE_SIZE;
}

/* When an abandoned segment's free slices are due for the purge pass: the
 * arenas' purge delay after its thread left it; 0 if none is resident or
 * nothing is ever purged. */
static uint64_t mia_abandoned_due(const mia_segment_t *seg, uint64_t delay) {
  return delay == UINT64_MAX || mia_segment_free_dirty(seg) == 0 ? 0 : seg->abandoned_at + delay;
}

/* A segment joined the sub-process's abandoned list (caller holds its
 * lock): its free slices wait for a thread to adopt it, and then for the
 * purge pass.  Returns the bytes that now wait, for mia_purge_schedule. */
size_t mia_abandoned_note(mia_subproc_t *sp, mia_segment_t *seg) {
  uint64_t due = mia_abandoned_due(seg, mia_purge_delay_arena());
  if (due == 0) return 0;
  if (sp->abandoned_purge_at == 0 || due < sp->abandoned_purge_at) sp->abandoned_purge_at = due;
  return mia_segment_free_dirty(seg);
}

/* The purge pass over the abandoned list (caller holds the lock): segments
 * nobody adopted within the arenas' delay give back their free slices;
 * their pages, which hold live blocks, stay.  Without it, what the threads
 * of a burst left stayed resident until some thread needed room: for
 * good, in a program that then goes on with fewer threads.  Returns the
 * next deadline, 0 if none. */
uint64_t mia_abandoned_purge(mia_subproc_t *sp, uint64_t now, bool force) {
  uint64_t delay = mia_purge_delay_arena(), next = 0;
  bool lazy = mia_option_get_fast(mi_option_purge_decommits) == 0;
  for (mia_segment_t *seg = sp->abandoned; seg != NULL; seg = seg->next) {
    uint64_t due = mia_abandoned_due(seg, delay);
    if (due == 0) continue;
    if (force || due <= now) {
      mia_purge_done(mia_segment_free_dirty(seg));
      mia_segment_purge(seg, lazy, true, now);
    } else if (next == 0 || due < next) {
      next = due;
    }
  }
  return next;
}

/* Put a chain of abandoned segments back at the end of the list, so that
 * the next look starts with others. */
static void abandoned_append(mia_subproc_t *sp, mia_segment_t *chain) {
  mia_lock(&sp->lock);
  mia_segment_t **end = &sp->abandoned;
  while (*end != NULL) end = &(*end)->next;
  __atomic_store_n(end, chain, __ATOMIC_RELAXED);
  mia_unlock(&sp->lock);
}

/* A thread freed blocks into a page nobody owns (an exited thread's, a
 * deleted heap's).  Nobody looks at such a page until a thread adopts its
 * segment, and in a program whose threads have finished none ever does:
 * the memory of blocks that outlived their thread and were freed by
 * another stayed resident for good.  So the first such free after a scan
 * schedules the next one, an arena purge delay later (mia_abandoned_scan_due).
 * Only sp is read here: after the push the page may be freed already. */
void mia_abandoned_freed_into(mia_subproc_t *sp) {
  /* pairs with the fence in mia_abandoned_scan_due: either this load sees
   * the scan's reset, and schedules the next, or the scan's collect sees
   * the blocks just pushed */
  atomic_thread_fence(memory_order_seq_cst);
  if (atomic_load_explicit(&sp->orphans_due, memory_order_relaxed) != 0) return;
  uint64_t delay = mia_purge_delay_arena();
  if (delay == UINT64_MAX) return;
  uint64_t none = 0, due = mia_prim_clock_ms() + delay;
  if (atomic_compare_exchange_strong(&sp->orphans_due, &none, due != 0 ? due : 1)) mia_purge_poke_orphans();
}

/* Free the pages of an abandoned segment (held alone by the caller) whose
 * blocks have all been freed.  A segment left with none goes back to its
 * arena (true); the others' freed slices are purged now: the segment
 * waits for an adopter, which faults in only what its pages use. */
static bool abandoned_give_back(mia_segment_t *seg, bool lazy, uint64_t now) {
  size_t noted = mia_segment_free_dirty(seg);   /* pending since the thread left (mia_abandoned_note) */
  bool freed = false;
  size_t idx = 1;
  mia_page_t *page;
  while ((page = mia_segment_next_page(seg, &idx)) != NULL) {
    /* a page still claimed for its last owner's remote list stays: that list may point at it */
    if (!mia_page_collect_unowned(page) || mia_page_queued(page)) continue;
    segment_page_unlink(seg, page);
    freed = true;
  }
  if (!freed) return false;
  mia_purge_done(noted);
  if (seg->used_mask == 1) {
    mia_segment_destroy(seg);   /* nothing left in it to destroy */
    __atomic_fetch_add(&mia_stats_global.released_segments, 1, __ATOMIC_RELAXED);
    return true;
  }
  mia_segment_purge(seg, lazy, true, now);
  return false;
}

/* The scan mia_abandoned_freed_into scheduled, once it is due (force: if
 * one is scheduled at all).  The list is taken whole, so the lock is held
 * only to take it and to give back what stays; a thread that looks for a
 * segment to adopt meanwhile claims a fresh one. */
void mia_abandoned_scan_due(mia_subproc_t *sp, uint64_t now, bool force) {
  uint64_t due = atomic_load_explicit(&sp->orphans_due, memory_order_relaxed);
  if (due == 0 || (!force && now < due) || !atomic_compare_exchange_strong(&sp->orphans_due, &due, 0)) return;
  atomic_thread_fence(memory_order_seq_cst);   /* see mia_abandoned_freed_into */
  mia_lock(&sp->lock);
  mia_segment_t *list = sp->abandoned;
  __atomic_store_n(&sp->abandoned, NULL, __ATOMIC_RELAXED);
  mia_unlock(&sp->lock);
  bool lazy = mia_option_get_fast(mi_option_purge_decommits) == 0;
  mia_segment_t *kept = NULL, **tail = &kept;
  for (mia_segment_t *seg = list, *next; seg != NULL; seg = next) {
    next = seg->next;
    if (abandoned_give_back(seg, lazy, now)) continue;
    *tail = seg;
    tail = &seg->next;
  }
  *tail = NULL;
  if (kept != NULL) abandoned_append(sp, kept);
}

/* The exiting thread's theap has already given back its empty pages; what
 * is left holds live blocks.  Unowned pages (free_key 0) send every free to
 * the atomic thread_free list until another thread reclaims the segment. */
static void segments_abandon_held(mia_tld_t *tld, mia_segment_t **list, mia_lock_t *lock) {
  mia_subproc_t *sp = tld->subproc;
  /* on the sub-process's list the blocks belong to its main heap; on a
   * heap's own list (lock held by the caller) they stay with that heap */
  mi_heap_t *heap = list == &sp->abandoned ? &sp->heap_main : tld->heap;
  /* empty segments go straight back to their arena (purged there on time) */
  for (mia_segment_t *seg = tld->segments, *next; seg != NULL; seg = next) {
    next = seg->next;
    if (seg->used_mask == 1) mia_segment_release(tld, seg);
  }
  uint64_t now = mia_prim_clock_ms();
  size_t waiting = 0;
  mia_segment_t *lists[2] = {tld->segments, tld->segments_full};
  tld->segments = tld->segments_full = NULL;
  for (int l = 0; l < 2; l++) {
    mia_segment_t *seg = lists[l];
    while (seg != NULL) {
      mia_segment_t *next = seg->next;
      size_t idx = 1;
      mia_page_t *page;
      while ((page = mia_segment_next_page(seg, &idx)) != NULL) {
        __atomic_store_n(&page->free_key, 0, __ATOMIC_RELEASE);
        mia_page_set_flags(page, (uint8_t)(mia_page_flags(page) & (uint8_t)~MIA_PAGE_IN_FULL));
        /* no owner to notify: remote frees just push (QUEUED, if set,
         * belongs to the last owner's list, which clears it) */
        atomic_fetch_and_explicit(&page->thread_free, ~MIA_TF_FULL, memory_order_relaxed);
        page->next = page->prev = NULL;
        atomic_store_explicit(&page->theap, NULL, memory_order_release);
      }
      pending_set(seg, 0);   /* the abandoned list counts them from here */
      seg->tld = NULL;
      seg->abandoned_at = now;
      seg->in_full_list = false;
      __atomic_store_n(&seg->heap, heap, __ATOMIC_RELEASE);
      if (lock != NULL) mia_lock(lock);
      seg->prev = NULL;
      seg->next = *list;
      __atomic_store_n(list, seg, __ATOMIC_RELAXED);   /* read unlocked (mia_segment_reclaim_one) */
      if (list == &sp->abandoned) waiting += mia_abandoned_note(sp, seg);
      if (lock != NULL) mia_unlock(lock);
      __atomic_fetch_add(&mia_stats_global.abandoned_segments, 1, __ATOMIC_RELAXED);
      seg = next;
    }
  }
  tld->segment_count = 0;
  __atomic_store_n(&tld->next_purge_check, 0, __ATOMIC_RELAXED);
  if (waiting != 0) {
    mia_purge_pending_add(waiting);
    tld->purge_poke = true;
  }
}

void mia_segments_abandon(mia_tld_t *tld, mia_segment_t **list, mia_lock_t *lock) {
  tld_enter(tld);
  segments_abandon_held(tld, list, lock);
  tld_leave(tld);
}

/* mi_heap_destroy: the tld's segments go back to their arena, whatever
 * their pages hold (mia_segment_destroy). */
void mia_segments_destroy(mia_tld_t *tld) {
  tld_enter(tld);
  mia_segment_t *lists[2] = {tld->segments, tld->segments_full};
  tld->segments = tld->segments_full = NULL;
  tld->segment_count = 0;
  __atomic_store_n(&tld->next_purge_check, 0, __ATOMIC_RELAXED);
  tld_leave(tld);
  for (int l = 0; l < 2; l++) {
    for (mia_segment_t *seg = lists[l], *next; seg != NULL; seg = next) {
      next = seg->next;
      mia_segment_destroy(seg);
    }
  }
}

/* Make an abandoned segment (off its list, held alone by the caller) this
 * thread's: its pages join the thread's theap, the blocks other threads
 * freed meanwhile are collected, and empty pages are freed -- but for
 * keep_empty, one for each bin that has no page yet.  NULL when that
 * emptied it and it went back to its arena. */
static mia_segment_t *mia_segment_adopt(mia_tld_t *tld, mia_segment_t *seg, bool keep_empty) {
  mia_purge_done(mia_segment_free_dirty(seg));   /* its owner purges them now */
  seg->tld = tld;
  __atomic_store_n(&seg->heap, tld->heap, __ATOMIC_RELEASE);
  seg->next = seg->prev = NULL;
  bool full = seg->used_mask == MIA_ALL_SLICES;
  list_push(full ? &tld->segments_full : &tld->segments, seg);
  seg->in_full_list = full;
  tld->segment_count++;
  __atomic_fetch_add(&mia_stats_global.reclaimed_segments, 1, __ATOMIC_RELAXED);
  mia_theap_t *theap = tld->theap_default;
  size_t idx = 1;
  mia_page_t *page;
  while ((page = mia_segment_next_page(seg, &idx)) != NULL) {
    atomic_store_explicit(&page->theap, theap, memory_order_release);
    mia_page_set_free_key(page, theap->tid | (mia_page_flags(page) & MIA_PAGE_FLAG_MASK));
    mia_page_collect(page);
    /* a thread that needs room (keep_empty) keeps an empty page as its
     * bin's current page where it has none, as the page's last owner would
     * have (mia_page_retire): taking over a finished thread's segment, it
     * mostly allocates the same sizes, and a page kept costs nothing where
     * a fresh one is set up and its free list built again.  Segments
     * adopted to give their memory back keep nothing empty. */
    /* a page still claimed for its last owner's remote list stays too: that
     * list may still point at it */
    if (page->used > 0 || (keep_empty && theap->pages[page->bin].first == NULL) || mia_page_queued(page)) {
      mia_theap_queue_page(theap, page);
      continue;
    }
    bool last = (seg->used_mask & ~slice_bits((size_t)(page - seg->pages), page->slice_count)) == 1;
    /* freeing the last page gives the segment back, unless it is the
     * thread's only one */
    bool released = last && tld->segment_count > 1;
    mia_segment_page_free(page);
    if (last) return released ? NULL : seg;
  }
  note_purge_at(tld, seg);
  pending_update(seg);
  return seg;
}

/* Whether every page of an abandoned segment (held alone by the caller) is
 * free, once the blocks other threads freed into it are counted. */
static bool mia_segment_collect_unowned(mia_segment_t *seg) {
  bool empty = true;
  size_t idx = 1;
  mia_page_t *page;
  while ((page = mia_segment_next_page(seg, &idx)) != NULL) empty = mia_page_collect_unowned(page) && empty;
  return empty;
}

/* An abandoned segment of an exclusive arena on the main heap's list: the
 * live blocks of a deleted heap of that arena, now the main heap's.  The
 * main heap must not put new blocks there, so it does not adopt the
 * segment; once every block is freed the segment goes back to its arena
 * (adopted only to free its pages), until then to the end of the list. */
static void segment_pass_exclusive(mia_tld_t *tld, mia_segment_t *seg) {
  if (!mia_segment_collect_unowned(seg)) {
    seg->next = NULL;
    abandoned_append(tld->subproc, seg);
    return;
  }
  mia_segment_t *kept = mia_segment_adopt(tld, seg, false);
  if (kept != NULL && kept->used_mask == 1) mia_segment_release(tld, kept);   /* the thread's only one */
}

/* Adopt one abandoned segment (the main heap's threads: the live blocks in
 * it are the main heap's).  Returns false when there was none; *out is NULL
 * when the segment turned out to be empty and went back to its arena, or
 * is not the heap's to use (segment_pass_exclusive). */
static bool segment_reclaim_one_held(mia_tld_t *tld, mia_segment_t **out) {
  mia_subproc_t *sp = tld->subproc;
  *out = NULL;
  if (__atomic_load_n(&sp->abandoned, __ATOMIC_RELAXED) == NULL) return false;
  mia_lock(&sp->lock);
  mia_segment_t *seg = sp->abandoned;
  if (seg != NULL) __atomic_store_n(&sp->abandoned, seg->next, __ATOMIC_RELAXED);
  mia_unlock(&sp->lock);
  if (seg == NULL) return false;
  if (!mia_arena_serves(sp, seg, tld->heap->arena)) segment_pass_exclusive(tld, seg);
  else *out = mia_segment_adopt(tld, seg, true);
  return true;
}

bool mia_segment_reclaim_one(mia_tld_t *tld, mia_segment_t **out) {
  tld_enter(tld);
  bool found = segment_reclaim_one_held(tld, out);
  tld_leave(tld);
  return found;
}

/* A first-class heap may not adopt abandoned segments with live blocks (they
 * are the main heap's, and mi_heap_destroy would free them), but it takes
 * those whose blocks have all been freed since: else a program whose threads
 * allocate only from first-class heaps, deleting them as it goes, would
 * never see that memory again.  Looks at up to max segments from the head
 * of the list; the ones still in use go to its end, so the next look sees
 * others.  Returns an adopted segment the thread kept (its only one), or
 * NULL. */
static mia_segment_t *segments_reclaim_empty_held(mia_tld_t *tld, long max) {
  mia_subproc_t *sp = tld->subproc;
  if (max <= 0 || __atomic_load_n(&sp->abandoned, __ATOMIC_RELAXED) == NULL) return NULL;
  mia_lock(&sp->lock);
  mia_segment_t *batch = sp->abandoned, *last = NULL;
  for (mia_segment_t *s = batch; s != NULL && max-- > 0; s = s->next) last = s;
  if (last != NULL) {
    __atomic_store_n(&sp->abandoned, last->next, __ATOMIC_RELAXED);
    last->next = NULL;
  }
  mia_unlock(&sp->lock);
  mia_segment_t *keep = NULL, *keep_tail = NULL, *kept = NULL;
  for (mia_segment_t *seg = batch, *next; seg != NULL; seg = next) {
    next = seg->next;
    if (mia_segment_collect_unowned(seg) && mia_arena_serves(sp, seg, tld->heap->arena)) {
      mia_segment_t *adopted = mia_segment_adopt(tld, seg, false);
      if (adopted != NULL) kept = adopted;
      continue;
    }
    seg->next = NULL;
    if (keep_tail != NULL) keep_tail->next = seg;
    else keep = seg;
    keep_tail = seg;
  }
  if (keep != NULL) abandoned_append(sp, keep);
  return kept;
}

mia_segment_t *mia_segments_reclaim_empty(mia_tld_t *tld, long max) {
  tld_enter(tld);
  mia_segment_t *kept = segments_reclaim_empty_held(tld, max);
  tld_leave(tld);
  return kept;
}

/* mi_heap_destroy and mi_subproc_destroy: the whole segment goes back,
 * whatever its pages still hold.  Its owner is gone or off its lists. */
void mia_segment_destroy(mia_segment_t *seg) {
  size_t idx = 1;
  mia_page_t *page;
  while ((page = mia_segment_next_page(seg, &idx)) != NULL) {
    if (mia_page_flags(page) & MIA_PAGE_HAS_SAMPLED) mia_prof_page_destroyed(page);
    if (mia_annotated()) mia_page_visit_live(page, mia_annot_destroyed_block, NULL);
    mia_pagemap_set(page->start, page->slice_count, NULL);
    atomic_store_explicit(&page->theap, NULL, memory_order_relaxed);
    mia_page_set_free_key(page, 0);
    mia_stat_page(page, -1);
  }
  seg->used_mask = 1;
  seg->tld = NULL;
  pending_set(seg, 0);
  mia_stat_commit(-__builtin_popcountll(seg->dirty_mask) * (int64_t)MIA_SLICE_SIZE);
  mia_arena_free_segments(seg->subproc, seg, 1, mia_segment_guards(seg));
}

/* Call fun for every page with blocks in the segment. */
void mia_segment_visit_pages(mia_segment_t *seg, bool (*fun)(mia_page_t *page, void *arg), void *arg,
                             bool *stop) {
  size_t idx = 1;
  mia_page_t *page;
  while (!*stop && (page = mia_segment_next_page(seg, &idx)) != NULL)
    if (!fun(page, arg)) *stop = true;
}

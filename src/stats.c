/* stats.c -- process-wide statistics, the report printed by
 * mi_stats_print_out and MIALLOC_SHOW_STATS=1, and their JSON form.
 *
 * Every counter lives in mia_stats_global and is updated with atomics, only
 * on slow paths: the malloc and free fast paths (fastpath.h) never touch a
 * statistic.  The page counters (pages, bins, the pages' part of in_use)
 * are gathered per thread first and added here in steps (see "page
 * statistics" below); readers add what the threads still gather.  So the
 * current values and totals are exact for the whole process at any moment
 * no thread is inside the allocator, and so are the peaks, except the page
 * counters' with several threads (see below).  mi_stats_merge has nothing
 * to do.
 *
 * What is counted, and where:
 *
 *   arenas, reserved  an arena registered (arena.c): its count and bytes of
 *                     address space.  Arenas are not given back to the OS,
 *                     so current == peak == total.
 *   committed         bytes mialloc has made usable and touched, and not
 *                     purged since -- what can be resident because of it.
 *                     A thread's segment counts its dirty slices (segment.c:
 *                     a fresh segment's header slice, or all of a recycled
 *                     one, then each page's slices when first used again);
 *                     a huge span counts whole; a free segment waiting in
 *                     its arena counts whole until the arena purges it
 *                     (arena.c).  Purges subtract what they return
 *                     (mia_stat_purge).  An upper bound of the RSS the heap
 *                     causes: memory handed out but never written is counted
 *                     although the kernel has not backed it yet.
 *   in_use            bytes of the pages theaps hold (whole pages, including
 *                     their free blocks) plus the bytes of live huge spans.
 *   segments          4 MiB segments claimed from arenas (arena.c), also
 *                     those making up huge spans.
 *   pages, bins[b]    pages a theap took from its segments (theap.c) and
 *                     gave back (segment.c), in all and per size class.
 *   huge, huge_blocks bytes and number of live huge spans (segment.c:
 *                     allocated, grown or shrunk in place by realloc, freed).
 *   threads           threads that set up a theap (init.c); a thread that
 *                     never allocates is not counted.
 *   purges            madvise calls that returned memory, and their bytes
 *                     (segment.c for slices, arena.c for whole segments).
 *   abandoned_segments, reclaimed_segments, released_segments
 *                     segments with live blocks left by an exiting thread,
 *                     taken over later by another, or given back to their
 *                     arena once other threads freed those blocks (segment.c).
 *   foreign_frees     free/realloc of a pointer mialloc does not own (free.c).
 *   errors            error reports (output.c): each call of the error
 *                     callback, whether or not a message was printed.
 */
#include "internal.h"
#include "tls.h"

#include <stdarg.h>
#include <stdio.h>

mia_stats_t mia_stats_global;

static void mia_stat_raise_peak(mia_stat_count_t *c, int64_t now) {
  int64_t peak = __atomic_load_n(&c->peak, __ATOMIC_RELAXED);
  while (now > peak && !__atomic_compare_exchange_n(&c->peak, &peak, now, true, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED)) {
  }
}

void mia_stat_add(mia_stat_count_t *c, int64_t amount) {
  int64_t now = __atomic_add_fetch(&c->current, amount, __ATOMIC_RELAXED);
  if (amount > 0) __atomic_fetch_add(&c->total, amount, __ATOMIC_RELAXED);
  mia_stat_raise_peak(c, now);
}

static void mia_stat_inc(int64_t *counter, int64_t amount) {
  __atomic_fetch_add(counter, amount, __ATOMIC_RELAXED);
}

/* ---- page statistics, gathered per thread ---- */

/* A loop that fills and empties 25 pages made nine atomic additions per
 * page on three process-wide cache lines (pages, in_use, the bin), and
 * two threads running it took 2.5x the time per block of one (with the
 * purge count's and the heartbeat's, bench/pagechurn).  So each thread
 * gathers its changes in its own tld (stat_local: only that thread writes
 * them, with plain stores) and adds them to mia_stats_global once one
 * reaches a bound.  Readers add what the live threads still gather
 * (mia_stats_snapshot), so the counts stay exact whenever no thread is
 * inside the allocator.  For the peaks each change keeps its highest
 * value since it was last added: the process's value plus that is the
 * peak, exact with one thread; with several, readers add the threads'
 * highs, which may overstate the peak by up to a bound per thread. */
#define MIA_STAT_LOCAL_PAGES 32
#define MIA_STAT_LOCAL_BYTES ((int64_t)2 * MIA_SEGMENT_SIZE)

static uint32_t mia_stat_epoch;   /* mi_stats_reset's count: highs from before a reset are void */

static int64_t mia_stat_read(const int64_t *v) { return __atomic_load_n(v, __ATOMIC_RELAXED); }
static void mia_stat_write(int64_t *v, int64_t value) { __atomic_store_n(v, value, __ATOMIC_RELAXED); }

static void mia_stat_local_add(mia_stat_delta_t *d, int64_t amount) {
  int64_t now = d->current + amount;   /* only this thread writes it */
  mia_stat_write(&d->current, now);
  if (amount > 0) mia_stat_write(&d->total, d->total + amount);
  if (now > d->high) mia_stat_write(&d->high, now);
}

/* d's high, or, when a reset came after it was gathered, its current
 * value (the peak starts again from there, below 0 too) */
static int64_t mia_stat_high(const mia_stat_delta_t *d, bool fresh) {
  return mia_stat_read(fresh ? &d->high : &d->current);
}

static bool mia_stat_local_fresh(const mia_stat_local_t *local) {
  return __atomic_load_n(&local->epoch, __ATOMIC_RELAXED) == __atomic_load_n(&mia_stat_epoch, __ATOMIC_RELAXED);
}

/* d into c; by d's writer, or for a tld nobody writes any more */
static void mia_stat_fold(mia_stat_count_t *c, mia_stat_delta_t *d, bool fresh) {
  int64_t current = mia_stat_read(&d->current), total = mia_stat_read(&d->total);
  int64_t high = mia_stat_high(d, fresh);
  if (current == 0 && total == 0 && high == 0) return;
  mia_stat_write(&d->current, 0);
  mia_stat_write(&d->total, 0);
  mia_stat_write(&d->high, 0);
  int64_t now = __atomic_add_fetch(&c->current, current, __ATOMIC_RELAXED);
  if (total != 0) __atomic_fetch_add(&c->total, total, __ATOMIC_RELAXED);
  mia_stat_raise_peak(c, now - current + high);   /* high >= current */
}

static bool mia_stat_beyond(const mia_stat_delta_t *d, int64_t bound) {
  return d->current >= bound || d->current <= -bound;
}

static mia_noinline void mia_stat_local_flush(mia_stat_local_t *local, size_t bin, bool fresh) {
  mia_stat_fold(&mia_stats_global.pages, &local->pages, fresh);
  mia_stat_fold(&mia_stats_global.in_use, &local->in_use, fresh);
  if (bin <= MIA_BIN_HUGE) mia_stat_fold(&mia_stats_global.bins[bin], &local->bins[bin], fresh);
}

/* Every bin's: the tld is done (mia_thread_data_free, a forked child). */
void mia_stat_local_flush_all(mia_stat_local_t *local) {
  bool fresh = mia_stat_local_fresh(local);
  for (size_t bin = 0; bin <= MIA_BIN_HUGE; bin++) mia_stat_local_flush(local, bin, fresh);
}

static void mia_stat_restart_high(mia_stat_delta_t *d) { mia_stat_write(&d->high, mia_stat_high(d, false)); }

/* A reset came: the highs start again from the current values. */
static mia_noinline void mia_stat_local_restart(mia_stat_local_t *local) {
  mia_stat_restart_high(&local->pages);
  mia_stat_restart_high(&local->in_use);
  for (size_t bin = 0; bin <= MIA_BIN_HUGE; bin++) mia_stat_restart_high(&local->bins[bin]);
  __atomic_store_n(&local->epoch, __atomic_load_n(&mia_stat_epoch, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
}

void mia_stat_page(const mia_page_t *page, int delta) {
  int64_t bytes = delta * (int64_t)page->slice_count * (int64_t)MIA_SLICE_SIZE;
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) {   /* a thread on its way out, or the purge thread */
    mia_stat_add(&mia_stats_global.pages, delta);
    if (page->bin <= MIA_BIN_HUGE) mia_stat_add(&mia_stats_global.bins[page->bin], delta);
    mia_stat_add(&mia_stats_global.in_use, bytes);
    return;
  }
  /* the thread's own tld, also while its default is another heap's theap */
  mia_stat_local_t *local = &theap->tld->thread_tld->stat_local;
  if (mia_unlikely(!mia_stat_local_fresh(local))) mia_stat_local_restart(local);
  mia_stat_local_add(&local->pages, delta);
  mia_stat_local_add(&local->in_use, bytes);
  bool bin_beyond = false;
  if (page->bin <= MIA_BIN_HUGE) {
    mia_stat_local_add(&local->bins[page->bin], delta);
    bin_beyond = mia_stat_beyond(&local->bins[page->bin], MIA_STAT_LOCAL_PAGES);
  }
  if (mia_unlikely(bin_beyond || mia_stat_beyond(&local->pages, MIA_STAT_LOCAL_PAGES) ||
                   mia_stat_beyond(&local->in_use, MIA_STAT_LOCAL_BYTES)))
    mia_stat_local_flush(local, page->bin, true);
}

static void mia_stat_delta_sum(mia_stat_delta_t *sum, const mia_stat_delta_t *d, bool fresh) {
  sum->current += mia_stat_read(&d->current);
  sum->total += mia_stat_read(&d->total);
  sum->high += mia_stat_high(d, fresh);
}

/* Adds one tld's gathered changes to sum (mia_tlds_stat_sum). */
void mia_stat_local_sum(mia_stat_local_t *sum, const mia_stat_local_t *local) {
  bool fresh = mia_stat_local_fresh(local);
  mia_stat_delta_sum(&sum->pages, &local->pages, fresh);
  mia_stat_delta_sum(&sum->in_use, &local->in_use, fresh);
  for (size_t bin = 0; bin <= MIA_BIN_HUGE; bin++) mia_stat_delta_sum(&sum->bins[bin], &local->bins[bin], fresh);
}

/* Adds seg's pages to the usage in arg: the bytes of the blocks handed out
 * (huge spans: none, they are counted apart) and, per size class, the
 * blocks still free (never carved included); returns how many segments
 * seg's span covers.  Remote frees not yet taken
 * in by the owner count as freed.  Read while owners allocate: a snapshot,
 * exact when the other threads are idle. */
static size_t mia_count_usage(mia_segment_t *seg, void *arg) {
  mia_heap_usage_t *usage = arg;
  /* a segment being set up, or the rest of a span the walk got into */
  if (seg->cookie != ((uintptr_t)seg ^ mia_process_secret)) return 1;
  size_t span = seg->size / MIA_SEGMENT_SIZE;
  if (span == 0) return 1;
  if (seg->is_huge) return span;
  uint64_t used_mask = seg->used_mask;
  for (size_t idx = 1; idx < MIA_SEGMENT_SLICES;) {
    const mia_page_t *page = &seg->pages[idx];
    size_t slices = page->slice_count;
    if (((used_mask >> idx) & 1) && slices > 0 && !page->is_guarded && !page->is_huge) {
      uint32_t used = __atomic_load_n(&page->used, __ATOMIC_RELAXED);
      uint32_t pending = mia_tf_count(atomic_load_explicit(&page->thread_free, memory_order_relaxed));
      uint32_t live = pending < used ? used - pending : 0;
      uint32_t reserved = page->reserved;
      usage->live_bytes += (size_t)live * page->block_size;
      if (page->bin >= 1 && page->bin <= MIA_BIN_COUNT && reserved > live)
        usage->bin_free[page->bin] += reserved - live;
    }
    idx += slices > 0 ? slices : 1;
  }
  return span;
}

/* The pages of every sub-process, added up (mallinfo, malloc_info). */
void mia_stats_heap_usage(mia_heap_usage_t *usage) {
  memset(usage, 0, sizeof *usage);
  mia_subprocs_visit_claimed(mia_count_usage, usage);
}

/* A huge span is in use, and committed, as a whole from the moment it is
 * handed out (its first write may come any time). */
void mia_stat_huge(int64_t bytes, int blocks) {
  if (blocks != 0) mia_stat_add(&mia_stats_global.huge_blocks, blocks);
  mia_stat_add(&mia_stats_global.huge, bytes);
  mia_stat_add(&mia_stats_global.in_use, bytes);
  mia_stat_add(&mia_stats_global.committed, bytes);
}

void mia_stat_commit(int64_t bytes) {
  if (bytes != 0) mia_stat_add(&mia_stats_global.committed, bytes);
}

void mia_stat_purge(size_t bytes) {
  mia_stat_inc(&mia_stats_global.purges, 1);
  mia_stat_inc(&mia_stats_global.purged_bytes, (int64_t)bytes);
  mia_stat_add(&mia_stats_global.committed, -(int64_t)bytes);
}

/* Thinning purges OS pages of pages in use: the committed count, kept per
 * 64 KiB slice, leaves them in (the slice's own purge takes them out). */
void mia_stat_thin(size_t bytes) {
  mia_stat_inc(&mia_stats_global.purges, 1);
  mia_stat_inc(&mia_stats_global.purged_bytes, (int64_t)bytes);
}

void mia_stat_reserve(int64_t bytes) {
  mia_stat_add(&mia_stats_global.arenas, bytes > 0 ? 1 : -1);
  mia_stat_add(&mia_stats_global.reserved, bytes);
}

/* ---- reset and merge ---- */

/* held: what the live threads still gather of it (zero for the counters
 * only ever kept here), which readers add to current and total */
static void mia_stat_count_reset(mia_stat_count_t *c, const mia_stat_delta_t *held) {
  int64_t now = __atomic_load_n(&c->current, __ATOMIC_RELAXED) + held->current;
  __atomic_store_n(&c->peak, now, __ATOMIC_RELAXED);
  __atomic_store_n(&c->total, now - held->total, __ATOMIC_RELAXED);
}

/* Peaks and totals restart from the current values (current values
 * describe memory that still exists, so they are kept); event counters
 * (purges, abandoned/reclaimed segments, foreign frees, errors) restart
 * from zero. */
mia_export void mi_stats_reset(void) {
  mia_stats_t *s = &mia_stats_global;
  /* first: from here on the threads' highs start again, and a reader
   * meanwhile takes their current values instead */
  __atomic_fetch_add(&mia_stat_epoch, 1, __ATOMIC_RELAXED);
  mia_stat_local_t held = {0};
  mia_tlds_stat_sum(&held);
  static const mia_stat_delta_t none = {0, 0, 0};
  mia_stat_count_t *counts[] = {&s->arenas, &s->reserved, &s->committed,
                                &s->segments, &s->huge, &s->huge_blocks, &s->threads};
  for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) mia_stat_count_reset(counts[i], &none);
  mia_stat_count_reset(&s->in_use, &held.in_use);
  mia_stat_count_reset(&s->pages, &held.pages);
  for (size_t b = 0; b <= MIA_BIN_HUGE; b++) mia_stat_count_reset(&s->bins[b], &held.bins[b]);
  int64_t *events[] = {&s->purges, &s->purged_bytes, &s->reclaimed_segments,
                       &s->abandoned_segments, &s->released_segments, &s->foreign_frees, &s->errors};
  for (size_t i = 0; i < sizeof events / sizeof events[0]; i++)
    __atomic_store_n(events[i], 0, __ATOMIC_RELAXED);
}

/* Every report adds what the threads gather already (see the top of this
 * file). */
mia_export void mi_stats_merge(void) {}

/* c plus what the threads still gather of it; a peak this shows for the
 * first time is kept, so that a later read cannot show a lower one */
static void mia_stat_with_held(mia_stat_count_t *out, mia_stat_count_t *c, const mia_stat_delta_t *held) {
  int64_t peak = out->current + held->high;   /* held->high >= held->current */
  out->current += held->current;
  out->total += held->total;
  if (peak > out->peak) {
    out->peak = peak;
    mia_stat_raise_peak(c, peak);
  }
}

/* A consistent-enough copy: each field read atomically. */
static void mia_stats_snapshot(mia_stats_t *out) {
  mia_stat_local_t held = {0};
  mia_tlds_stat_sum(&held);
  mia_stats_t *s = &mia_stats_global;
  const int64_t *src = (const int64_t *)s;
  int64_t *dst = (int64_t *)out;
  for (size_t i = 0; i < sizeof *out / sizeof(int64_t); i++)
    dst[i] = __atomic_load_n(&src[i], __ATOMIC_RELAXED);
  mia_stat_with_held(&out->in_use, &s->in_use, &held.in_use);
  mia_stat_with_held(&out->pages, &s->pages, &held.pages);
  for (size_t b = 0; b <= MIA_BIN_HUGE; b++) mia_stat_with_held(&out->bins[b], &s->bins[b], &held.bins[b]);
}

/* ---- process information ---- */

mia_export void mi_process_info(size_t *elapsed_msecs, size_t *user_msecs, size_t *system_msecs,
                                size_t *current_rss, size_t *peak_rss, size_t *current_commit,
                                size_t *peak_commit, size_t *page_faults) {
  uint64_t user, sys, peak, faults;
  mia_prim_process_times(&user, &sys, &peak, &faults);
  uint64_t start = mia_process_start();
  uint64_t now = mia_prim_clock_ms();
  int64_t commit = __atomic_load_n(&mia_stats_global.committed.current, __ATOMIC_RELAXED);
  int64_t commit_peak = __atomic_load_n(&mia_stats_global.committed.peak, __ATOMIC_RELAXED);
  if (elapsed_msecs) *elapsed_msecs = start != 0 && now >= start ? (size_t)(now - start) : 0;
  if (user_msecs) *user_msecs = (size_t)user;
  if (system_msecs) *system_msecs = (size_t)sys;
  /* getrusage's peak comes from per-CPU counters read without summing
   * them, statm's size may be their exact sum: just after growth the peak
   * can read a few pages below the current size */
  size_t rss = current_rss || peak_rss ? mia_prim_current_rss() : 0;
  if (current_rss) *current_rss = rss;
  if (peak_rss) *peak_rss = peak > rss ? (size_t)peak : rss;
  if (current_commit) *current_commit = commit > 0 ? (size_t)commit : 0;
  if (peak_commit) *peak_commit = commit_peak > 0 ? (size_t)commit_peak : 0;
  if (page_faults) *page_faults = (size_t)faults;
}

typedef struct mia_procinfo_s {
  size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
} mia_procinfo_t;

static void mia_procinfo(mia_procinfo_t *p) {
  mi_process_info(&p->elapsed, &p->user, &p->sys, &p->rss, &p->peak_rss, &p->commit,
                  &p->peak_commit, &p->faults);
}

/* ---- the human-readable report ---- */

static void mia_fmt_size(char *buf, size_t n, int64_t bytes) {
  const char *unit = "B";
  double v = (double)bytes;
  int64_t mag = bytes < 0 ? -bytes : bytes;
  if (mag >= 1024 * 1024 * 1024) { v /= 1024.0 * 1024 * 1024; unit = "GiB"; }
  else if (mag >= 1024 * 1024) { v /= 1024.0 * 1024; unit = "MiB"; }
  else if (mag >= 1024) { v /= 1024.0; unit = "KiB"; }
  if (unit[0] == 'B') snprintf(buf, n, "%lld B", (long long)bytes);
  else snprintf(buf, n, "%.1f %s", v, unit);
}

static void mia_print_bytes(mi_output_fun *out, void *arg, const char *name,
                            const mia_stat_count_t *c, bool with_total) {
  char cur[32], peak[32], total[32];
  mia_fmt_size(cur, sizeof cur, c->current);
  mia_fmt_size(peak, sizeof peak, c->peak);
  if (with_total) mia_fmt_size(total, sizeof total, c->total);
  mia_output_to(out, arg, "  %-16s %12s %12s %12s\n", name, cur, peak, with_total ? total : "");
}

static void mia_print_count(mi_output_fun *out, void *arg, const char *name,
                            const mia_stat_count_t *c) {
  mia_output_to(out, arg, "  %-16s %12lld %12lld %12lld\n", name, (long long)c->current,
                (long long)c->peak, (long long)c->total);
}

mia_export void mi_stats_print_out(mi_output_fun *out, void *arg) {
  mia_stats_t s;
  mia_stats_snapshot(&s);
  mia_procinfo_t p;
  mia_procinfo(&p);
  char a[32], b[32], c[32], d[32];
  mia_output_to(out, arg, "mialloc statistics (version %s)\n", PACKAGE_VERSION);
  mia_output_to(out, arg, "  %-16s %12s %12s %12s\n", "", "current", "peak", "total");
  mia_print_count(out, arg, "arenas", &s.arenas);
  mia_print_bytes(out, arg, "reserved", &s.reserved, true);
  mia_print_bytes(out, arg, "committed", &s.committed, false);
  mia_print_bytes(out, arg, "in use", &s.in_use, true);
  mia_print_count(out, arg, "segments", &s.segments);
  mia_print_count(out, arg, "pages", &s.pages);
  mia_print_count(out, arg, "huge blocks", &s.huge_blocks);
  mia_print_bytes(out, arg, "huge bytes", &s.huge, true);
  mia_print_count(out, arg, "threads", &s.threads);
  mia_fmt_size(a, sizeof a, s.purged_bytes);
  mia_output_to(out, arg, "  %-16s %lld (%s returned to the OS)\n", "purges", (long long)s.purges, a);
  mia_output_to(out, arg, "  %-16s %lld segments abandoned, %lld reclaimed, %lld given back\n", "exited threads",
                (long long)s.abandoned_segments, (long long)s.reclaimed_segments, (long long)s.released_segments);
  mia_output_to(out, arg, "  %-16s %lld\n", "foreign frees", (long long)s.foreign_frees);
  mia_output_to(out, arg, "  %-16s %lld\n", "errors", (long long)s.errors);
  mia_output_to(out, arg, "pages per size class (classes that had a page):\n");
  mia_output_to(out, arg, "  %4s %12s %12s %12s %12s\n", "bin", "block size", "current", "peak", "total");
  for (size_t bin = 1; bin <= MIA_BIN_COUNT; bin++) {
    const mia_stat_count_t *bc = &s.bins[bin];
    if (bc->total == 0 && bc->current == 0) continue;
    mia_fmt_size(a, sizeof a, (int64_t)mia_bin_size[bin]);
    mia_output_to(out, arg, "  %4zu %12s %12lld %12lld %12lld\n", bin, a, (long long)bc->current,
                  (long long)bc->peak, (long long)bc->total);
  }
  mia_output_to(out, arg, "process: elapsed %zu.%03zu s, user %zu.%03zu s, system %zu.%03zu s\n",
                p.elapsed / 1000, p.elapsed % 1000, p.user / 1000, p.user % 1000, p.sys / 1000,
                p.sys % 1000);
  mia_fmt_size(a, sizeof a, (int64_t)p.rss);
  mia_fmt_size(b, sizeof b, (int64_t)p.peak_rss);
  mia_fmt_size(c, sizeof c, (int64_t)p.commit);
  mia_fmt_size(d, sizeof d, (int64_t)p.peak_commit);
  mia_output_to(out, arg, "process: rss %s (peak %s), committed %s (peak %s), page faults %zu\n", a,
                b, c, d, p.faults);
}

/* The output argument is not used: messages go to the registered output
 * function, or stderr (see mialloc.h). */
mia_export void mi_stats_print(void *out) {
  (void)out;
  mi_stats_print_out(NULL, NULL);
}

void mia_stats_print_at_exit(void) { mi_stats_print_out(NULL, NULL); }

/* ---- JSON ---- */

/* Appends to a buffer; when it does not fit, keeps counting what would have
 * been written so the caller learns the size it needs. */
typedef struct mia_json_s {
  char *buf;
  size_t size;
  size_t len;
} mia_json_t;

static void __attribute__((format(printf, 2, 3))) mia_json_put(mia_json_t *j, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t room = j->len < j->size ? j->size - j->len : 0;
  int n = vsnprintf(room > 0 ? j->buf + j->len : NULL, room, fmt, ap);
  va_end(ap);
  if (n > 0) j->len += (size_t)n;
}

static void mia_json_count(mia_json_t *j, const char *name, const mia_stat_count_t *c, bool total,
                           const char *after) {
  mia_json_put(j, "\"%s\": {\"current\": %lld, \"peak\": %lld", name, (long long)c->current,
               (long long)c->peak);
  if (total) mia_json_put(j, ", \"total\": %lld", (long long)c->total);
  mia_json_put(j, "}%s", after);
}

static void mia_stats_json(mia_json_t *j, const mia_stats_t *s, const mia_procinfo_t *p) {
  mia_json_put(j, "{\"version\": \"%s\", \"mi_version\": %d, ", PACKAGE_VERSION, mi_version());
  mia_json_count(j, "arenas", &s->arenas, true, ", ");
  mia_json_count(j, "reserved", &s->reserved, true, ", ");
  mia_json_count(j, "committed", &s->committed, false, ", ");
  mia_json_count(j, "in_use", &s->in_use, true, ", ");
  mia_json_count(j, "segments", &s->segments, true, ", ");
  mia_json_count(j, "pages", &s->pages, true, ", ");
  mia_json_put(j, "\"huge\": {");
  mia_json_count(j, "count", &s->huge_blocks, true, ", ");
  mia_json_count(j, "bytes", &s->huge, true, "}, ");
  mia_json_count(j, "threads", &s->threads, true, ", ");
  mia_json_put(j, "\"purges\": {\"count\": %lld, \"bytes\": %lld}, ", (long long)s->purges,
               (long long)s->purged_bytes);
  mia_json_put(j, "\"abandoned_segments\": %lld, \"reclaimed_segments\": %lld, \"released_segments\": %lld, "
               "\"foreign_frees\": %lld, \"errors\": %lld, ",
               (long long)s->abandoned_segments, (long long)s->reclaimed_segments,
               (long long)s->released_segments, (long long)s->foreign_frees, (long long)s->errors);
  mia_json_put(j, "\"bins\": [");
  bool first = true;
  for (size_t bin = 1; bin <= MIA_BIN_COUNT; bin++) {
    const mia_stat_count_t *bc = &s->bins[bin];
    if (bc->total == 0 && bc->current == 0) continue;
    mia_json_put(j, "%s{\"bin\": %zu, \"block_size\": %zu, \"current\": %lld, \"peak\": %lld, "
                 "\"total\": %lld}", first ? "" : ", ", bin, mia_bin_size[bin],
                 (long long)bc->current, (long long)bc->peak, (long long)bc->total);
    first = false;
  }
  mia_json_put(j, "], ");
  mia_json_put(j, "\"process\": {\"elapsed_ms\": %zu, \"user_ms\": %zu, \"system_ms\": %zu, "
               "\"rss\": %zu, \"peak_rss\": %zu, \"commit\": %zu, \"peak_commit\": %zu, "
               "\"page_faults\": %zu}}",
               p->elapsed, p->user, p->sys, p->rss, p->peak_rss, p->commit, p->peak_commit,
               p->faults);
}

/* Into buf (size bytes, NUL included); NULL if it does not fit.  With buf
 * NULL the result is allocated with mi_malloc (free it with mi_free), as
 * the reference allocator does. */
mia_export char *mi_stats_get_json(size_t size, char *buf) {
  mia_stats_t s;
  mia_procinfo_t p;
  if (buf != NULL) {
    if (size == 0) return NULL;
    mia_stats_snapshot(&s);
    mia_procinfo(&p);
    mia_json_t j = {buf, size, 0};
    mia_stats_json(&j, &s, &p);
    if (j.len >= size) {
      buf[0] = 0;
      return NULL;
    }
    return buf;
  }
  mia_stats_snapshot(&s);
  mia_procinfo(&p);
  mia_json_t measure = {NULL, 0, 0};
  mia_stats_json(&measure, &s, &p);
  char *out = mi_malloc(measure.len + 1);
  if (out == NULL) return NULL;
  /* the same snapshot again: exactly the measured length */
  mia_json_t j = {out, measure.len + 1, 0};
  mia_stats_json(&j, &s, &p);
  return out;
}

mia_export void mi_thread_stats_print_out(mi_output_fun *out, void *arg) { mi_stats_print_out(out, arg); }

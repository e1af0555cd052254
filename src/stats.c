/* stats.c -- statistics: per-theap counters merged into the process, and
 * the report printed by mi_stats_print_out and MIALLOC_SHOW_STATS=1. */
#include "internal.h"

#include <stdio.h>

mia_stats_t mia_stats_global;

/* Counters are only touched on slow paths, so atomics cost nothing that
 * matters and keep the global ones exact under threads. */
void mia_stat_add(mia_stat_count_t *c, int64_t amount) {
  int64_t now = __atomic_add_fetch(&c->current, amount, __ATOMIC_RELAXED);
  if (amount > 0) __atomic_fetch_add(&c->total, amount, __ATOMIC_RELAXED);
  int64_t peak = __atomic_load_n(&c->peak, __ATOMIC_RELAXED);
  while (now > peak && !__atomic_compare_exchange_n(&c->peak, &peak, now, true, __ATOMIC_RELAXED,
                                                    __ATOMIC_RELAXED)) {
  }
}

mia_export void mi_stats_reset(void) {
  memset(&mia_stats_global, 0, sizeof mia_stats_global);
}

mia_export void mi_stats_merge(void) {}

static void mia_fmt_size(char *buf, size_t n, int64_t bytes) {
  const char *unit = "B";
  double v = (double)bytes;
  if (bytes >= 1024 * 1024 * 1024) { v /= 1024.0 * 1024 * 1024; unit = "GiB"; }
  else if (bytes >= 1024 * 1024) { v /= 1024.0 * 1024; unit = "MiB"; }
  else if (bytes >= 1024) { v /= 1024.0; unit = "KiB"; }
  snprintf(buf, n, "%.1f %s", v, unit);
}

mia_export void mi_process_info(size_t *elapsed_msecs, size_t *user_msecs, size_t *system_msecs,
                                size_t *current_rss, size_t *peak_rss, size_t *current_commit,
                                size_t *peak_commit, size_t *page_faults) {
  uint64_t user, sys, peak, faults;
  mia_prim_process_times(&user, &sys, &peak, &faults);
  size_t rss = mia_prim_current_rss();
  if (elapsed_msecs) *elapsed_msecs = (size_t)(mia_prim_clock_ms() - mia_process_start());
  if (user_msecs) *user_msecs = (size_t)user;
  if (system_msecs) *system_msecs = (size_t)sys;
  if (current_rss) *current_rss = rss;
  if (peak_rss) *peak_rss = (size_t)peak;
  if (current_commit) *current_commit = rss;
  if (peak_commit) *peak_commit = (size_t)peak;
  if (page_faults) *page_faults = (size_t)faults;
}

mia_export void mi_stats_print_out(mi_output_fun *out, void *arg) {
  mia_stats_t *s = &mia_stats_global;
  size_t elapsed, user, sys, rss, peak, commit, peak_commit, faults;
  mi_process_info(&elapsed, &user, &sys, &rss, &peak, &commit, &peak_commit, &faults);
  char a[32], b[32];
  int v = mi_version();
  mia_output_to(out, arg, "mialloc statistics (version %d.%d.%d)\n", v / 100, (v / 10) % 10, v % 10);
  mia_output_to(out, arg, "  arenas reserved : %zu (address space)\n", mia_subproc_main.arena_count);
  mia_fmt_size(a, sizeof a, (int64_t)mia_arena_reserved_total());
  mia_output_to(out, arg, "  reserved        : %s\n", a);
  mia_fmt_size(a, sizeof a, s->segments.current * (int64_t)MIA_SEGMENT_SIZE);
  mia_fmt_size(b, sizeof b, s->segments.peak * (int64_t)MIA_SEGMENT_SIZE);
  mia_output_to(out, arg, "  segments        : %lld in use (%s), peak %lld (%s)\n",
                (long long)s->segments.current, a, (long long)s->segments.peak, b);
  mia_output_to(out, arg, "  pages           : %lld in use, peak %lld, %lld made\n",
                (long long)s->pages.current, (long long)s->pages.peak, (long long)s->pages.total);
  mia_output_to(out, arg, "  exited threads  : %lld segments abandoned, %lld reclaimed\n",
                (long long)s->abandoned_segments, (long long)s->reclaimed_segments);
  mia_fmt_size(a, sizeof a, s->huge.peak);
  mia_output_to(out, arg, "  huge allocations: %lld total, %lld live (peak %s live)\n",
                (long long)s->huge_blocks.total, (long long)s->huge_blocks.current, a);
  mia_fmt_size(a, sizeof a, s->purged_bytes);
  mia_output_to(out, arg, "  purges          : %lld (%s returned to the OS)\n", (long long)s->purges, a);
  mia_output_to(out, arg, "  threads         : %lld live, %lld peak, %lld total\n",
                (long long)s->threads.current, (long long)s->threads.peak, (long long)s->threads.total);
  mia_output_to(out, arg, "  foreign frees   : %lld\n", (long long)s->foreign_frees);
  mia_fmt_size(a, sizeof a, (int64_t)rss);
  mia_fmt_size(b, sizeof b, (int64_t)peak);
  mia_output_to(out, arg, "  process         : elapsed %zu.%03zu s, user %zu.%03zu s, system %zu.%03zu s\n",
                elapsed / 1000, elapsed % 1000, user / 1000, user % 1000, sys / 1000, sys % 1000);
  mia_output_to(out, arg, "  memory          : rss %s, peak rss %s, page faults %zu\n", a, b, faults);
}

mia_export void mi_stats_print(void *out) {
  (void)out;
  mi_stats_print_out(NULL, NULL);
}

mia_export char *mi_stats_get_json(size_t size, char *buf) {
  if (buf == NULL || size == 0) return NULL;
  mia_stats_t *s = &mia_stats_global;
  size_t elapsed, user, sys, rss, peak, commit, peak_commit, faults;
  mi_process_info(&elapsed, &user, &sys, &rss, &peak, &commit, &peak_commit, &faults);
  int n = snprintf(buf, size,
                   "{\"version\": %d, \"arenas\": %zu, \"reserved\": %zu, "
                   "\"huge\": {\"count\": %lld, \"current\": %lld, \"peak\": %lld}, "
                   "\"purges\": %lld, \"purged_bytes\": %lld, "
                   "\"threads\": {\"current\": %lld, \"peak\": %lld, \"total\": %lld}, "
                   "\"abandoned_segments\": %lld, \"reclaimed_segments\": %lld, \"foreign_frees\": %lld, "
                   "\"process\": {\"elapsed_ms\": %zu, \"user_ms\": %zu, \"system_ms\": %zu, "
                   "\"rss\": %zu, \"peak_rss\": %zu, \"page_faults\": %zu}}",
                   mi_version(), mia_subproc_main.arena_count, mia_arena_reserved_total(),
                   (long long)s->huge_blocks.total, (long long)s->huge.current, (long long)s->huge.peak,
                   (long long)s->purges, (long long)s->purged_bytes, (long long)s->threads.current,
                   (long long)s->threads.peak, (long long)s->threads.total,
                   (long long)s->abandoned_segments, (long long)s->reclaimed_segments,
                   (long long)s->foreign_frees, elapsed, user, sys, rss, peak, faults);
  if (n < 0 || (size_t)n >= size) return NULL;
  return buf;
}

void mia_stats_print_at_exit(void) { mi_stats_print_out(NULL, NULL); }

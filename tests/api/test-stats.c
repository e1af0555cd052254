/* test-stats.c -- the statistics: a known allocation pattern must show up
 * in mi_stats_get_json with the numbers it implies, reset keeps current
 * values, the human report goes to the output function it is given.
 *
 * With the argument "json" it only prints mi_stats_get_json and exits
 * (test-show-stats.sh feeds that to python3 -m json.tool).
 */
#define _GNU_SOURCE
#include "config.h"   /* which build: secure pages end with a guard page */
#include <mialloc.h>
#include "../tap.h"
#include "../json.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define KiB ((size_t)1024)
#define MiB ((size_t)1024 * 1024)
#define SLICE (64 * KiB)   /* small pages are one 64 KiB slice */

static char *stats_json(void) {
  char *j = mi_stats_get_json(0, NULL);
  if (j == NULL) {
    tap_diag("mi_stats_get_json(0, NULL) returned NULL");
    exit(1);
  }
  return j;
}

static double num(const char *json, const char *path) { return json_number(json, path, -1e18); }

/* Pages of the bin whose block size is bsize ("bins" only lists bins that
 * had a page; the answer is 0 for the others). */
static double bin_pages(const char *json, size_t bsize, const char *field) {
  for (int i = 0;; i++) {
    char path[64];
    snprintf(path, sizeof path, "bins.%d.block_size", i);
    double b = num(json, path);
    if (b < 0) return 0;
    if ((size_t)b == bsize) {
      snprintf(path, sizeof path, "bins.%d.%s", i, field);
      return num(json, path);
    }
  }
}

static char captured[16384];
static void *captured_arg;
static void capture(const char *msg, void *arg) {
  captured_arg = arg;
  strncat(captured, msg, sizeof captured - strlen(captured) - 1);
}

/* A thread that leaves one block alive in a page of its own and exits. */
static void *leave_block(void *arg) {
  void **out = arg;
  *out = malloc(5000);
  return NULL;
}

/* A thread that takes pages and waits, while they are still below the
 * count its thread gathers before adding them to the process's. */
typedef struct {
  pthread_barrier_t allocated, looked, freed;
  size_t n, size;
} gather_arg_t;

static void *gather_pages(void *arg) {
  gather_arg_t *g = arg;
  void **blocks = malloc(g->n * sizeof *blocks);
  for (size_t i = 0; i < g->n; i++) blocks[i] = malloc(g->size);
  pthread_barrier_wait(&g->allocated);
  pthread_barrier_wait(&g->looked);
  for (size_t i = 0; i < g->n; i++) free(blocks[i]);
  free(blocks);
  mi_collect(true);   /* its emptied current page goes back too */
  pthread_barrier_wait(&g->freed);
  return NULL;
}

/* Ten pages of blocks of size (in the class bsize), below the 32 a thread
 * gathers (src/stats.c); the barriers for the three steps. */
static void gather_init(gather_arg_t *g, size_t size, size_t bsize) {
#if MIALLOC_SECURE
  size_t per = (SLICE - (size_t)sysconf(_SC_PAGESIZE)) / bsize;
#else
  size_t per = SLICE / bsize;
#endif
  g->n = 10 * per;
  g->size = size;
  pthread_barrier_init(&g->allocated, NULL, 2);
  pthread_barrier_init(&g->looked, NULL, 2);
  pthread_barrier_init(&g->freed, NULL, 2);
}

static void gather_destroy(gather_arg_t *g) {
  pthread_barrier_destroy(&g->allocated);
  pthread_barrier_destroy(&g->looked);
  pthread_barrier_destroy(&g->freed);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "json") == 0) {
    void *keep = malloc(100000);
    char *j = stats_json();
    printf("%s\n", j);
    mi_free(j);
    free(keep);
    return 0;
  }
  tap_diag("allocation pattern: 1000 blocks of 3000 bytes, 3 huge blocks of 5 MiB");

  /* until the thread has filled a page of 4096-byte blocks, its sizes
   * from 2049 bytes share that page: fill it (and start another) with
   * 4096-byte blocks, so that 3000 bytes have a bin of their own and no
   * page in it yet.  Checked builds add a 16-byte record to each block;
   * their mi_good_size is the size asked for. */
  size_t record = mi_good_size(3000) == 3000 ? 16 : 0;
  enum { WARM = 40 };
  void *warm[WARM];
  for (size_t i = 0; i < WARM; i++) warm[i] = malloc(4096 - record);
  TAP_OK(mi_good_size(3000) == (record ? 3000 : 3072), "%d blocks of 4096 bytes split 3000 bytes' group: "
         "mi_good_size(3000) is %zu", WARM, mi_good_size(3000));

  /* ---- the allocated and the caller's-buffer forms ---- */
  char small[16];
  TAP_OK(mi_stats_get_json(sizeof small, small) == NULL, "a 16-byte buffer is too small: NULL");
  static char big[65536];
  TAP_OK(mi_stats_get_json(sizeof big, big) == big && json_valid(big),
         "into a large buffer: returns it, valid JSON");
  char *j0 = stats_json();
  TAP_OK(json_valid(j0), "allocated form (buf NULL) is valid JSON (%zu bytes)", strlen(j0));
  TAP_OK(strlen(j0) < sizeof big, "and fits the documented 64 KiB");
  TAP_OK(num(j0, "mi_version") == mi_version(), "mi_version matches");

  /* ---- a known pattern ---- */
  const size_t n = 1000, size = 3000;
  /* the size class: 3072 (debug builds add a 16-byte record, same class;
   * their mi_good_size is the size asked for) */
  size_t bsize = mi_good_size(size) == size ? 3072 : mi_good_size(size);
#if MIALLOC_SECURE
  size_t per_page = (SLICE - (size_t)sysconf(_SC_PAGESIZE)) / bsize;
#else
  size_t per_page = SLICE / bsize;
#endif
  size_t pages_min = (n + per_page - 1) / per_page;
  double bin_before = bin_pages(j0, bsize, "current");
  void **blocks = calloc(n, sizeof *blocks);
  for (size_t i = 0; i < n; i++) blocks[i] = malloc(size);
  void *huge[3];
  for (int i = 0; i < 3; i++) huge[i] = malloc(5 * MiB);
  char *j1 = stats_json();

  double bin_now = bin_pages(j1, bsize, "current");
  TAP_OK(bin_now - bin_before >= (double)pages_min && bin_now - bin_before <= (double)pages_min + 1,
         "bin of %zu-byte blocks gained %zu..%zu pages (got %.0f)", bsize, pages_min, pages_min + 1,
         bin_now - bin_before);
  TAP_OK(bin_pages(j1, bsize, "peak") >= bin_now, "its peak is at least its current count");
  double dpages = num(j1, "pages.current") - num(j0, "pages.current");
  TAP_OK(dpages >= (double)pages_min && dpages <= (double)pages_min + 3,
         "pages.current grew by %zu..%zu (got %.0f)", pages_min, pages_min + 3, dpages);
  TAP_OK(num(j1, "huge.count.current") - num(j0, "huge.count.current") == 3,
         "huge.count.current grew by 3");
  TAP_OK(num(j1, "huge.count.total") - num(j0, "huge.count.total") == 3, "huge.count.total grew by 3");
  double dhuge = num(j1, "huge.bytes.current") - num(j0, "huge.bytes.current");
  TAP_OK(dhuge >= 15.0 * MiB && dhuge <= 3 * 9.0 * MiB,
         "huge.bytes.current grew by 15..27 MiB: 3 spans of whole 4 MiB segments (got %.1f MiB)",
         dhuge / MiB);
  double din_use = num(j1, "in_use.current") - num(j0, "in_use.current");
  double expect_in_use = dhuge + dpages * SLICE;
  TAP_OK(din_use >= expect_in_use && din_use <= expect_in_use + 8 * SLICE,
         "in_use grew by the huge bytes plus the new pages (%.1f MiB, expected %.1f MiB)",
         din_use / MiB, expect_in_use / MiB);
  TAP_OK(num(j1, "committed.current") >= num(j1, "in_use.current"),
         "committed (%.1f MiB) >= in use (%.1f MiB)", num(j1, "committed.current") / MiB,
         num(j1, "in_use.current") / MiB);
  TAP_OK(num(j1, "reserved.current") >= num(j1, "committed.current"), "reserved >= committed");
  TAP_OK(num(j1, "segments.current") * 4.0 * MiB >= num(j1, "in_use.current"),
         "claimed segments cover what is in use");
  TAP_OK(num(j1, "arenas.current") >= 1, "at least one arena");
  TAP_OK(num(j1, "threads.current") == 1, "one thread with a heap");
  TAP_OK(num(j1, "process.commit") == num(j1, "committed.current"),
         "process.commit is the committed statistic");
  TAP_OK(num(j1, "process.rss") > 1.0 * MiB && num(j1, "process.peak_rss") > 1.0 * MiB,
         "process rss and peak rss are plausible");
  size_t elapsed = 0, rss = 0, commit = 0, peak_commit = 0, faults = 0;
  mi_process_info(&elapsed, NULL, NULL, &rss, NULL, &commit, &peak_commit, &faults);
  TAP_OK(rss > 0 && faults > 0 && commit > 15 * MiB && peak_commit >= commit,
         "mi_process_info: rss %zu, faults %zu, commit %zu <= peak %zu", rss, faults, commit,
         peak_commit);
  /* right after growth: the peak may not read below the current size */
  size_t fresh_size = 8 * MiB, peak_rss = 0, steps = 0, below = 0;
  char *fresh = malloc(fresh_size);
  for (size_t off = 0; fresh && off < fresh_size; off += 4096) {
    fresh[off] = 1;
    if (off % (256 * 1024) != 0) continue;
    mi_process_info(NULL, NULL, NULL, &rss, &peak_rss, NULL, NULL, NULL);
    steps++;
    if (peak_rss < rss) below++;
  }
  TAP_OK(fresh && steps == 32 && below == 0,
         "mi_process_info: peak rss >= rss at each of %zu steps of growth (%zu below; last %zu, %zu)", steps, below,
         peak_rss, rss);
  free(fresh);

  /* ---- everything back ---- */
  for (size_t i = 0; i < n; i++) free(blocks[i]);
  for (int i = 0; i < 3; i++) free(huge[i]);
  mi_collect(true);
  char *j2 = stats_json();
  TAP_OK(bin_pages(j2, bsize, "current") == 0, "after free + mi_collect(true) the bin has no page");
  TAP_OK(bin_pages(j2, bsize, "peak") >= bin_now, "but its peak remains");
  TAP_OK(num(j2, "huge.count.current") == num(j0, "huge.count.current"), "no huge block left");
  TAP_OK(num(j2, "in_use.peak") >= num(j1, "in_use.current"), "in_use.peak kept the high mark");
  TAP_OK(num(j2, "committed.current") <= num(j1, "committed.current") - 15.0 * MiB,
         "committed came down by at least the huge bytes (%.1f -> %.1f MiB)",
         num(j1, "committed.current") / MiB, num(j2, "committed.current") / MiB);
  TAP_OK(num(j2, "purges.count") > num(j1, "purges.count") &&
         num(j2, "purges.bytes") - num(j1, "purges.bytes") >= (double)pages_min * SLICE,
         "mi_collect(true) purged at least the pages' bytes");
  free(blocks);

  /* ---- a thread that exits with a live block ---- */
  void *left = NULL;
  pthread_t t;
  pthread_create(&t, NULL, leave_block, &left);
  pthread_join(t, NULL);
  char *j3 = stats_json();
  TAP_OK(num(j3, "threads.total") - num(j2, "threads.total") == 1 &&
         num(j3, "threads.current") == num(j2, "threads.current"),
         "the thread was counted and is gone again");
  TAP_OK(num(j3, "abandoned_segments") > num(j2, "abandoned_segments"),
         "its segment with the live block was abandoned");
  free(left);
  mi_collect(true);
  char *j4 = stats_json();
  /* its block freed from here, the scan of emptied pages gives it back
   * (released); before that, mi_collect adopted it (reclaimed) */
  TAP_OK(num(j4, "released_segments") + num(j4, "reclaimed_segments") >
             num(j3, "released_segments") + num(j3, "reclaimed_segments"),
         "mi_collect(true) took it back (%.0f given back, %.0f reclaimed)",
         num(j4, "released_segments") - num(j3, "released_segments"),
         num(j4, "reclaimed_segments") - num(j3, "reclaimed_segments"));
  TAP_OK(bin_pages(j4, mi_good_size(5000), "current") == 0,
         "the reclaimed empty page is counted off (no page left in its bin)");

  /* ---- pages a live thread took, not yet added to the process's counts ---- */
  {
    gather_arg_t g;
    gather_init(&g, 1000, 1024);
    char *before = stats_json();
    pthread_t gt;
    pthread_create(&gt, NULL, gather_pages, &g);
    pthread_barrier_wait(&g.allocated);
    char *during = stats_json();
    pthread_barrier_wait(&g.looked);
    pthread_barrier_wait(&g.freed);
    char *after = stats_json();
    pthread_join(gt, NULL);
    char *joined = stats_json();
    double grew = num(during, "pages.current") - num(before, "pages.current");
    TAP_OK(grew >= 10 && grew <= 13, "another thread's 10 new pages show in pages.current while it runs (%.0f)", grew);
    double grew_bytes = num(during, "in_use.current") - num(before, "in_use.current");
    TAP_OK(grew_bytes >= 10.0 * SLICE && grew_bytes <= 13.0 * SLICE, "and in in_use.current (%.0f KiB)",
           grew_bytes / KiB);
    TAP_OK(bin_pages(during, 1024, "current") - bin_pages(before, 1024, "current") >= 10,
           "and in their bin's count (%.0f)", bin_pages(during, 1024, "current") - bin_pages(before, 1024, "current"));
    TAP_OK(num(during, "pages.peak") >= num(during, "pages.current"), "the peak read with them is not below them");
    double left = num(after, "pages.current") - num(before, "pages.current");
    TAP_OK(left <= 2, "freed, and the thread still running: the pages are off the count (%.0f left)", left);
    double gone = num(joined, "pages.current") - num(before, "pages.current");
    TAP_OK(gone <= 2 && num(joined, "in_use.current") <= num(before, "in_use.current") + 2.0 * SLICE,
           "and after it exited (%.0f left)", gone);
    gather_destroy(&g);
    mi_free(before);
    mi_free(during);
    mi_free(after);
    mi_free(joined);
  }

  /* ---- reset ---- */
  mi_stats_reset();
  char *j5 = stats_json();
  TAP_OK(num(j5, "pages.peak") == num(j5, "pages.current") &&
         num(j5, "pages.total") == num(j5, "pages.current"),
         "after mi_stats_reset pages peak and total equal current (%.0f)", num(j5, "pages.current"));
  TAP_OK(num(j5, "in_use.peak") == num(j5, "in_use.current") &&
         num(j5, "committed.peak") == num(j5, "committed.current"),
         "in_use and committed peaks restart from current");
  TAP_OK(num(j5, "huge.count.total") == num(j5, "huge.count.current"), "huge totals restart");
  TAP_OK(num(j5, "purges.count") == 0 && num(j5, "reclaimed_segments") == 0 &&
         num(j5, "errors") == 0, "event counters restart from 0");
  TAP_OK(num(j5, "reserved.current") == num(j1, "reserved.current"), "current values are kept");
  void *h = malloc(5 * MiB);
  char *j6 = stats_json();
  TAP_OK(num(j6, "huge.count.total") == num(j5, "huge.count.total") + 1 &&
         num(j6, "huge.count.peak") == num(j5, "huge.count.current") + 1,
         "counting goes on from the reset");
  free(h);
  char *j7 = stats_json();
  TAP_OK(num(j7, "huge.count.current") == num(j5, "huge.count.current"),
         "and current values stay exact after it");
  mi_stats_merge();   /* documented as nothing to do: the counters are process-wide */
  char *j8 = stats_json();
  TAP_OK(num(j8, "pages.current") == num(j7, "pages.current") &&
         num(j8, "in_use.current") == num(j7, "in_use.current"), "mi_stats_merge changes nothing");

  /* ---- a peak a thread reached and left before anyone read ---- */
  {
    gather_arg_t g;
    gather_init(&g, 1500, 1536);
    mi_stats_reset();
    char *r0 = stats_json();
    pthread_t gt;
    pthread_create(&gt, NULL, gather_pages, &g);
    pthread_barrier_wait(&g.allocated);
    pthread_barrier_wait(&g.looked);   /* no read while it holds them */
    pthread_barrier_wait(&g.freed);
    char *r1 = stats_json();
    pthread_join(gt, NULL);
    /* at least 9 of the 10 are new: the first blocks may go to a page of
     * an exited thread's segment that it adopts, counted already */
    TAP_OK(num(r1, "pages.peak") >= num(r0, "pages.current") + 9 &&
               num(r1, "in_use.peak") >= num(r0, "in_use.current") + 9.0 * SLICE,
           "10 pages a running thread took and gave back show in the peaks (pages %.0f -> peak %.0f)",
           num(r0, "pages.current"), num(r1, "pages.peak"));
    TAP_OK(bin_pages(r1, 1536, "peak") >= bin_pages(r0, 1536, "current") + 9,
           "and in their bin's peak (%.0f, from %.0f)", bin_pages(r1, 1536, "peak"), bin_pages(r0, 1536, "current"));
    gather_destroy(&g);
    mi_free(r0);
    mi_free(r1);
  }

  /* ---- the human report ---- */
  captured[0] = 0;
  mi_stats_print_out(capture, &captured);
  TAP_OK(strstr(captured, "statistics") != NULL && strstr(captured, "committed") != NULL &&
         strstr(captured, "in use") != NULL && strstr(captured, "process: rss") != NULL,
         "mi_stats_print_out writes the report to the given function");
  TAP_OK(captured_arg == &captured, "with the given argument");
  captured[0] = 0;
  mi_register_output(capture, NULL);
  mi_stats_print(NULL);
  mi_register_output(NULL, NULL);
  TAP_OK(strstr(captured, "pages per size class") != NULL, "mi_stats_print uses the registered output");

  mi_free(j0); mi_free(j1); mi_free(j2); mi_free(j3); mi_free(j4);
  mi_free(j5); mi_free(j6); mi_free(j7); mi_free(j8);
  for (size_t i = 0; i < WARM; i++) free(warm[i]);
  return tap_done();
}

/* test-arena-purge.c -- free segments go back to the OS once they have
 * stayed free for a whole delay, not whenever an arena's deadline finds
 * them free: a program that frees a big block and allocates the next one
 * a moment later (mimalloc-bench's malloc-large) keeps reusing resident
 * memory instead of faulting it back in after every purge. */
#include "internal.h"
#include "../tap.h"

#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK (8u << 20)   /* a huge span: whole segments from the arena */

static uint64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* the process's threads, from /proc (0 if it cannot be read) */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  fclose(f);
  return n;
}

/* waits up to 5 s for the process to have `want` threads */
static bool threads_become(int want) {
  for (uint64_t start = now_ms(); now_ms() - start < 5000; usleep(10000))
    if (thread_count() == want) return true;
  return false;
}

static int64_t purged(void) { return __atomic_load_n(&mia_stats_global.purged_bytes, __ATOMIC_RELAXED); }

int main(void) {
  mi_option_set(mi_option_purge_delay, 25);
  mi_option_set(mi_option_arena_purge_mult, 10);
  mi_option_set(mi_option_purge_thread, 1);
  const uint64_t delay = 250;

  /* a steady cycle: each block stays free for 20 ms, far less than the
   * delay, before the next allocation takes its segments again; six arena
   * deadlines pass, each with a block free at that moment */
  char *blk[2] = {mi_malloc(BLOCK), mi_malloc(BLOCK)};
  memset(blk[0], 1, BLOCK);
  memset(blk[1], 2, BLOCK);
  mi_collect(true);
  int64_t before = purged();
  uint64_t start = now_ms();
  int steps = 0;
  for (; now_ms() - start < 6 * delay; steps++) {
    mi_free(blk[steps % 2]);
    usleep(20000);
    blk[steps % 2] = mi_malloc(BLOCK);
    memset(blk[steps % 2], 3, BLOCK);
  }
  int64_t cycled = purged() - before;
  tap_diag("%d frees and allocations of 8 MiB in %llu ms: %lld KiB purged", steps,
           (unsigned long long)(now_ms() - start), (long long)(cycled >> 10));
  /* one spurious purge tolerated: a stall longer than the delay on a
   * loaded machine leaves a block free through a whole one */
  TAP_OK(blk[0] != NULL && blk[1] != NULL && cycled < 2 * (int64_t)BLOCK,
         "blocks reused within the delay are not purged between uses (%lld KiB)", (long long)(cycled >> 10));

  /* the cycle left nothing waiting: blocks taken again before their
   * purge do not count towards the thread's 16 MiB (they used to, so a
   * program cycling big blocks started it sooner or later) */
  TAP_OK(thread_count() == 1, "cycling blocks below 16 MiB starts no purge thread (%d threads)", thread_count());

  /* blocks freed and left alone go back after one to two delays; 80 MiB
   * of them start the thread */
  char *more[8];
  for (int i = 0; i < 8; i++) {
    more[i] = mi_malloc(BLOCK);
    memset(more[i], 6, BLOCK);
  }
  before = purged();
  uint64_t freed_at = now_ms(), gone_at = 0;
  mi_free(blk[0]);
  mi_free(blk[1]);
  for (int i = 0; i < 8; i++) mi_free(more[i]);
  while (now_ms() - freed_at < 5000) {
    if (purged() - before >= (int64_t)BLOCK) { gone_at = now_ms(); break; }
    usleep(5000);
  }
  tap_diag("ten 8 MiB blocks freed and left alone: the first purge came after %llu ms",
           (unsigned long long)(gone_at - freed_at));
  TAP_OK(gone_at != 0, "idle freed blocks are purged by the background thread");
  TAP_OK(gone_at == 0 || gone_at - freed_at >= delay, "not before it stayed free for a whole delay");

  /* with nothing left to purge the thread exits (a second after the
   * last purge), so the process is single-threaded again */
  bool single = threads_become(1);
  TAP_OK(single, "the purge thread exits once idle (%d threads)", thread_count());

  /* and the next burst of freed memory starts a new one */
  char *big[10];
  for (int i = 0; i < 10; i++) big[i] = mi_malloc(BLOCK);
  for (int i = 0; i < 10; i++) memset(big[i], 5, BLOCK);
  before = purged();
  for (int i = 0; i < 10; i++) mi_free(big[i]);
  TAP_OK(threads_become(2), "80 MiB freed starts the purge thread again");
  freed_at = now_ms();
  while (now_ms() - freed_at < 5000 && purged() - before < 10 * (int64_t)BLOCK) usleep(5000);
  TAP_OK(purged() - before >= 10 * (int64_t)BLOCK, "and it purges them (%lld KiB)", (long long)((purged() - before) >> 10));
  TAP_OK(threads_become(1), "then exits again");
  return tap_done();
}

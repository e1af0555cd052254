/* prof-delete.c -- mi_pprof_profiler_new and mi_pprof_profiler_delete over
 * and over while three threads allocate and free.  delete destroys the
 * heap its profiler lives in right after detaching it: a callback still
 * running in another thread, or one entered after the detach, would use
 * freed memory (before the core's detach waited for callbacks, this
 * program died of SIGSEGV every time).  TAP. */
#include "mialloc.h"
#include "mialloc-prof.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../tap.h"

enum { WORKERS = 3, LIVE = 64, ROUNDS = 100 };

static atomic_bool stop;
static atomic_long allocated;

static void *worker(void *arg) {
  uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15u + 1;
  void *live[LIVE] = {0};
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned i = (unsigned)(x % LIVE);
    free(live[i]);
    live[i] = malloc(16 + (size_t)(x >> 40) % 3000);
    if (live[i] == NULL) abort();
    memset(live[i], 0x5a, 16);
    atomic_fetch_add_explicit(&allocated, 1, memory_order_relaxed);
  }
  for (int i = 0; i < LIVE; i++) free(live[i]);
  return NULL;
}

int main(void) {
  char dir[] = "/tmp/mialloc-prof-delete.XXXXXX";
  if (mkdtemp(dir) == NULL) {
    printf("1..0 # SKIP no temporary directory\n");
    return 0;
  }
  pthread_t threads[WORKERS];
  for (uintptr_t i = 0; i < WORKERS; i++) pthread_create(&threads[i], NULL, worker, (void *)(i + 1));
  int created = 0;
  long samples_seen = 0;
  for (int round = 0; round < ROUNDS; round++) {
    char base[sizeof dir + 16];
    snprintf(base, sizeof base, "%s/r%d", dir, round);
    mi_pprof_profiler_t *p = mi_pprof_profiler_new(256, base, 0, 0, 0);
    if (p == NULL) continue;
    created++;
    struct timespec ts = {0, 2 * 1000 * 1000};
    nanosleep(&ts, NULL);
    if (mi_pprof_alloc_bytes(p) > 0) samples_seen++;
    mi_pprof_profiler_delete(p);
  }
  atomic_store(&stop, true);
  for (int i = 0; i < WORKERS; i++) pthread_join(threads[i], NULL);
  TAP_OK(created == ROUNDS, "%d of %d profilers created, each after the last one's delete", created, ROUNDS);
  TAP_OK(samples_seen > ROUNDS / 2, "the profilers sampled the threads' allocations (%ld of %d)", samples_seen,
         ROUNDS);
  TAP_OK(atomic_load(&allocated) > 0, "the threads allocated meanwhile (%ld blocks)", atomic_load(&allocated));
  char cmd[sizeof dir + 16];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) tap_diag("could not remove %s", dir);
  return tap_done();
}

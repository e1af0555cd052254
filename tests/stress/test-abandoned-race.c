/* test-abandoned-race.c -- scans of abandoned segments racing everything
 * that touches them.  Short-lived workers fill blocks, publish them in a
 * shared table and exit; two long-lived threads take blocks out of the
 * table, check them and free them into the pages the workers left; new
 * workers adopt those segments; and with a purge delay of 1 ms the scans
 * that free emptied pages and give emptied segments back run all the
 * while.  A page freed while a block in it was live, or a block lost
 * between a free and a scan, shows as a block whose contents changed or
 * as memory that does not come back.  The mi_ API throughout: in
 * ThreadSanitizer builds malloc is the sanitizer's. */
#include "mialloc.h"
#include "../tap.h"
#include "../json.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { SLOTS = 4096, WORKERS = 4, ROUNDS = 40, PER_WORKER = 1500, FREERS = 2 };

static _Atomic(uint64_t *) slots[SLOTS];
static atomic_uint next_seed = 1;
static atomic_int corrupted, stop;
static atomic_long freed;

/* A block of 2..400 words, each holding the block's seed and its length. */
static uint64_t *make_block(uint64_t seed) {
  size_t words = 2 + (size_t)(seed * 2654435761u % 399);
  uint64_t *p = mi_malloc(words * sizeof(uint64_t));
  if (p == NULL) return NULL;
  p[0] = words;
  for (size_t i = 1; i < words; i++) p[i] = seed;
  return p;
}

static void check_and_free(uint64_t *p) {
  size_t words = (size_t)p[0];
  if (words < 2 || words > 400) {
    atomic_store(&corrupted, 1);
    return;   /* not freed: it is not what was stored */
  }
  for (size_t i = 2; i < words; i++)
    if (p[i] != p[1]) atomic_store(&corrupted, 1);
  mi_free(p);
  atomic_fetch_add(&freed, 1);
}

static void *worker(void *arg) {
  (void)arg;
  for (int i = 0; i < PER_WORKER; i++) {
    unsigned seed = atomic_fetch_add(&next_seed, 1);
    uint64_t *p = make_block(seed);
    if (p == NULL) continue;
    uint64_t *old = atomic_exchange(&slots[(seed * 40503u) % SLOTS], p);
    if (old != NULL) check_and_free(old);
  }
  return NULL;
}

static void *freer(void *arg) {
  unsigned i = (unsigned)(uintptr_t)arg;
  while (!atomic_load(&stop)) {
    i = i * 1103515245u + 12345u;
    uint64_t *p = atomic_exchange(&slots[(i >> 8) % SLOTS], NULL);
    if (p != NULL) check_and_free(p);
  }
  return NULL;
}

static double stat_of(const char *path) {
  char *j = mi_stats_get_json(0, NULL);
  double v = j != NULL ? json_number(j, path, -1) : -1;
  mi_free(j);
  return v;
}

int main(void) {
  mi_option_set(mi_option_purge_delay, 1);
  mi_option_set(mi_option_arena_purge_mult, 1);
  mi_option_set(mi_option_guarded_sample_rate, 0);
  double released_before = stat_of("released_segments");
  pthread_t f[FREERS];
  int freers = 0;
  for (int i = 0; i < FREERS; i++)
    if (pthread_create(&f[i], NULL, freer, (void *)(uintptr_t)(i + 7)) == 0) freers++;
  int ran = 0;
  for (int r = 0; r < ROUNDS; r++) {
    pthread_t t[WORKERS];
    int n = 0;
    for (int i = 0; i < WORKERS; i++)
      if (pthread_create(&t[n], NULL, worker, NULL) == 0) n++;
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    ran += n;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < freers; i++) pthread_join(f[i], NULL);
  for (int i = 0; i < SLOTS; i++) {
    uint64_t *p = atomic_exchange(&slots[i], NULL);
    if (p != NULL) check_and_free(p);
  }
  TAP_OK(ran == WORKERS * ROUNDS && freers == FREERS, "%d workers came and went beside %d freeing threads", ran,
         freers);
  TAP_OK(!atomic_load(&corrupted), "every one of %ld blocks kept its contents until freed", atomic_load(&freed));
  TAP_OK(atomic_load(&freed) == (long)atomic_load(&next_seed) - 1, "and every block allocated was freed once");
  /* the last frees went into segments no thread owns any more: scans (due
   * 1 ms after a free, run by the purge passes) give the emptied ones back,
   * during the run already or now */
  double released = 0;
  for (int i = 0; i < 300 && (released = stat_of("released_segments") - released_before) <= 0; i++) {
    struct timespec ts = {0, 10 * 1000000L};
    nanosleep(&ts, NULL);
    mi_collect(false);
  }
  TAP_OK(released > 0, "scans gave back %.0f emptied segments", released);
  return tap_done();
}

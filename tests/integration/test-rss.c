/* test-rss.c -- memory goes back to the OS: allocate about 1 GiB in small
 * and medium blocks, free it all, mi_collect(true), and resident memory
 * must fall back to within a few MiB of where it started.  And without
 * mi_collect, in a program that frees and then does nothing, within
 * seconds: also what exited threads left for it to free. */
#include "mialloc.h"
#include "../tap.h"
#include "../rss.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Time-driven purging of a moderate amount, before anything else in the
 * process has started the purge thread: 32 MiB of small blocks freed.  The
 * emptied segments go back to the arena, whose purge thread starts once
 * 16 MiB waits; at 64 MiB all of it stayed resident. */
static void idle_after_small_blocks(void) {
  const size_t total = 32u << 20, size = 100, count = total / size;
  void **blocks = mi_malloc(count * sizeof(void *));
  if (blocks == NULL) {
    TAP_OK(0, "an array of %zu pointers", count);
    return;
  }
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] != NULL) memset(blocks[i], 0x5a, size);
  }
  size_t busy = rss_bytes();
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  size_t idle = rss_after_idling(busy, 16u << 20);
  tap_diag("rss with 32 MiB of 100-byte blocks live %zu KiB, after idling %zu KiB", busy >> 10, idle >> 10);
  TAP_OK(idle + (16u << 20) <= busy, "an idle program gives back freed small blocks within 5 s");
  mi_free(blocks);
}

/* A thread that frees most of what it allocated and then waits, alive, for
 * something that never comes (a worker blocked on its queue).  A block
 * kept every 2 MiB keeps each of its segments its own, so the freed pages
 * stay there as free slices: only their owner purged those, on its slow
 * paths, and a thread that waits runs none. */
#define IDLE_THREAD_BYTES (32u << 20)
#define IDLE_THREAD_SIZE 1000u
#define IDLE_THREAD_KEEP_EVERY 2048u

typedef struct {
  pthread_mutex_t lock;
  pthread_cond_t cond;
  int stage;        /* 1: the thread freed its blocks; 2: it may finish */
  size_t busy;      /* RSS with all its blocks live */
  int failed;
} idle_thread_t;

static void *idle_thread_main(void *arg) {
  idle_thread_t *t = arg;
  size_t count = IDLE_THREAD_BYTES / IDLE_THREAD_SIZE;
  void **blocks = malloc(count * sizeof(void *));
  t->failed = blocks == NULL;
  for (size_t i = 0; blocks != NULL && i < count; i++) {
    blocks[i] = malloc(IDLE_THREAD_SIZE);
    if (blocks[i] == NULL) t->failed = 1;
    else memset(blocks[i], 0x3c, IDLE_THREAD_SIZE);
  }
  t->busy = rss_bytes();
  for (size_t i = 0; blocks != NULL && i < count; i++)
    if (i % IDLE_THREAD_KEEP_EVERY != 0) free(blocks[i]);
  pthread_mutex_lock(&t->lock);
  t->stage = 1;
  pthread_cond_signal(&t->cond);
  while (t->stage != 2) pthread_cond_wait(&t->cond, &t->lock);
  pthread_mutex_unlock(&t->lock);
  for (size_t i = 0; blocks != NULL && i < count; i += IDLE_THREAD_KEEP_EVERY) free(blocks[i]);
  free(blocks);
  return NULL;
}

static void idle_thread_gives_back(void) {
  idle_thread_t t = {.lock = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};
  pthread_t thread;
  if (pthread_create(&thread, NULL, idle_thread_main, &t) != 0) {
    TAP_OK(0, "a thread to allocate and go idle");
    return;
  }
  pthread_mutex_lock(&t.lock);
  while (t.stage != 1) pthread_cond_wait(&t.cond, &t.lock);
  pthread_mutex_unlock(&t.lock);
  size_t idle = rss_after_idling(t.busy, 16u << 20);
  pthread_mutex_lock(&t.lock);
  t.stage = 2;
  pthread_cond_signal(&t.cond);
  pthread_mutex_unlock(&t.lock);
  pthread_join(thread, NULL);
  TAP_OK(!t.failed, "the thread allocated %u MiB in blocks of %u bytes", IDLE_THREAD_BYTES >> 20, IDLE_THREAD_SIZE);
  tap_diag("rss with the thread's blocks live %zu KiB, with it idle %zu KiB", t.busy >> 10, idle >> 10);
  TAP_OK(idle + (16u << 20) <= t.busy, "a live thread that went idle gives back what it freed within 5 s");
}

/* Worker threads allocate results, hand them to the main thread and
 * exit; the main thread frees the results and goes idle.  The segments
 * the workers left hold nothing live by then, but no thread is left to
 * adopt them: they stayed resident for good. */
#define HANDOFF_THREADS 4
#define HANDOFF_BYTES (16u << 20)   /* per thread */
#define HANDOFF_SIZE 700u

static void *handoff_worker(void *arg) {
  void **out = arg;
  for (size_t i = 0; i < HANDOFF_BYTES / HANDOFF_SIZE; i++) {
    out[i] = malloc(HANDOFF_SIZE);
    if (out[i] != NULL) memset(out[i], 0x2e, HANDOFF_SIZE);
  }
  return NULL;
}

static void idle_after_handoff(void) {
  const size_t per_thread = HANDOFF_BYTES / HANDOFF_SIZE;
  void **results = mi_calloc(HANDOFF_THREADS * per_thread, sizeof(void *));
  pthread_t threads[HANDOFF_THREADS];
  int started = 0;
  for (int i = 0; results != NULL && i < HANDOFF_THREADS; i++)
    if (pthread_create(&threads[i], NULL, handoff_worker, results + (size_t)i * per_thread) == 0) started++;
  for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
  size_t got = 0;
  for (size_t i = 0; results != NULL && i < HANDOFF_THREADS * per_thread; i++) got += results[i] != NULL;
  TAP_OK(started == HANDOFF_THREADS && got == HANDOFF_THREADS * per_thread,
         "%d threads allocated %zu results and exited", started, got);
  size_t busy = rss_bytes();
  for (size_t i = 0; results != NULL && i < HANDOFF_THREADS * per_thread; i++) free(results[i]);
  size_t idle = rss_after_idling(busy, 48u << 20);
  tap_diag("rss with the results live %zu KiB, after freeing them and idling %zu KiB", busy >> 10, idle >> 10);
  TAP_OK(idle + (48u << 20) <= busy, "what exited threads allocated and another freed goes back within 5 s");
  mi_free(results);
}

int main(void) {
  idle_after_small_blocks();
  idle_thread_gives_back();
  idle_after_handoff();
  const size_t total = 1u << 30;
  size_t count = 0, bytes = 0;
  size_t cap = 4u << 20;
  void **blocks = mi_malloc(cap * sizeof(void *));
  memset(blocks, 0, cap * sizeof(void *));
  size_t before = rss_bytes();
  uint64_t seed = 42;
  while (bytes < total && count < cap) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    size_t size = (seed >> 33) % 100 < 80 ? 16 + (seed >> 40) % 1000 : 1024 + (seed >> 40) % 60000;
    void *p = malloc(size);
    if (p == NULL) break;
    memset(p, 0x77, size);
    blocks[count++] = p;
    bytes += size;
  }
  size_t peak = rss_bytes();
  TAP_OK(bytes >= total, "allocated %zu MiB in %zu blocks", bytes >> 20, count);
  TAP_OK(peak >= before + total * 9 / 10, "RSS rose to %zu MiB", peak >> 20);
  for (size_t i = 0; i < count; i++) free(blocks[i]);
  mi_collect(true);
  size_t after = rss_bytes();
  tap_diag("rss before %zu KiB, peak %zu KiB, after collect %zu KiB", before >> 10, peak >> 10, after >> 10);
  TAP_OK(after <= before + (8u << 20), "after free and mi_collect(true) RSS is within 8 MiB of the start");
  mi_free(blocks);

  /* time-driven purging: free 256 MiB of large blocks and then do nothing
   * (no allocation, no mi_collect): RSS must still come down */
  void *big[64];
  for (int i = 0; i < 64; i++) {
    big[i] = malloc((4u << 20) - 4096);
    memset(big[i], 0x11, (4u << 20) - 4096);
  }
  size_t busy = rss_bytes();
  for (int i = 0; i < 64; i++) free(big[i]);
  size_t idle = rss_after_idling(busy, 200u << 20);
  tap_diag("rss with 256 MiB live %zu KiB, after idling %zu KiB", busy >> 10, idle >> 10);
  TAP_OK(idle + (200u << 20) <= busy, "an idle program gives freed memory back within 5 s");
  return tap_done();
}

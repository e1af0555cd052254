/* prof-threads.c -- 8 threads allocate and free across threads while the
 * profiler (from the environment, normally MIALLOC_PROFILE_SAMPLE_RATE=1:
 * every allocation sampled) records them.  Blocks are passed through a
 * shared array of slots, so most are freed by another thread than the one
 * that allocated them.  Afterwards everything is freed; the program takes
 * an explicit snapshot and prints the profiler's in-use and allocated
 * estimates, before and after, and the bytes it allocated:
 *   "before INUSE ALLOC", "after INUSE ALLOC", "requested BYTES"
 */
/* The allocation sites must stay separate functions with their own call
 * instructions whatever CFLAGS say (automake puts the user's -O2 after the
 * per-program flags; -O2 merges and splits such small functions). */
#pragma GCC optimize("O0")

#include "mialloc.h"
#include "mialloc-prof.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define THREADS 8
#define SLOTS 4096
#define ROUNDS 20000

static _Atomic(void *) slots[SLOTS];
static _Atomic unsigned long long requested;

__attribute__((noinline)) static void *thread_alloc(size_t size) {
  void *p = malloc(size);
  if (p == NULL) abort();
  ((volatile char *)p)[0] = 1;
  return p;
}

static void *worker(void *arg) {
  unsigned long long x = (unsigned long long)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  unsigned long long mine = 0;
  for (int i = 0; i < ROUNDS; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    size_t size = 16 + (size_t)(x % 4000);
    if (x % 97 == 0) size = 100000 + (size_t)(x % 300000); /* a few large ones */
    void *p = thread_alloc(size);
    mine += size;
    void *old = atomic_exchange(&slots[(x >> 20) % SLOTS], p);
    free(old); /* most likely another thread's block */
  }
  atomic_fetch_add(&requested, mine);
  return NULL;
}

int main(void) {
  mi_pprof_profiler_t *P = mi_pprof_env_profiler();
  if (P == NULL) {
    fprintf(stderr, "run with MIALLOC_PROFILE set\n");
    return 2;
  }
  printf("before %llu %llu\n", (unsigned long long)mi_pprof_inuse_bytes(P),
         (unsigned long long)mi_pprof_alloc_bytes(P));
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < SLOTS; i++) free(atomic_exchange(&slots[i], NULL));
  mi_profiler_snapshot();
  printf("after %llu %llu\n", (unsigned long long)mi_pprof_inuse_bytes(P),
         (unsigned long long)mi_pprof_alloc_bytes(P));
  printf("requested %llu\n", (unsigned long long)atomic_load(&requested));
  return 0;
}

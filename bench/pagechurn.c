/* pagechurn.c -- do threads that take pages and give them back slow each
 * other down?  (helper, not a workload of the suite)
 *
 *   cc -O2 -pthread -std=gnu11 -o pagechurn bench/pagechurn.c
 *   LD_PRELOAD=libmialloc.so.1 ./pagechurn [SIZE [COUNT [THREADS]]]
 *
 * Each thread allocates COUNT blocks of SIZE bytes (default 400 of 4096:
 * 25 pages of mialloc's 64 KiB), frees them all, and does that again, as
 * glibc's bench-malloc-simple and servers that batch 4-8 KiB buffers do.
 * Every round sets up pages and lets them go, so whatever the allocator
 * shares between threads on that path (counters, locks) shows here and in
 * no same-thread fast-path benchmark.  It runs with one thread, then with
 * THREADS (default: the CPUs online), the same work per thread, and prints
 * the mean time per malloc+free pair of each and their ratio: 1.0 where
 * threads do not disturb each other (on as many free CPUs as threads). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PAIRS_PER_THREAD 20000000L
#define MAX_THREADS 256

static size_t block_size = 4096;
static long count = 400;

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static void *churn(void *arg) {
  (void)arg;
  void **blocks = malloc((size_t)count * sizeof *blocks);
  if (blocks == NULL) return (void *)1;
  for (long round = 0; round < PAIRS_PER_THREAD / count; round++) {
    for (long i = 0; i < count; i++) {
      blocks[i] = malloc(block_size);
      if (blocks[i] == NULL) return (void *)1;
      *(volatile char *)blocks[i] = (char)i;   /* the block is used, as a program would */
    }
    for (long i = 0; i < count; i++) free(blocks[i]);
  }
  free(blocks);
  return NULL;
}

/* ns per malloc+free pair of one thread, with threads running at once */
static double run(int threads) {
  pthread_t t[MAX_THREADS];
  double start = now_ns();
  for (int i = 0; i < threads; i++) {
    if (pthread_create(&t[i], NULL, churn, NULL) != 0) {
      fprintf(stderr, "pagechurn: pthread_create failed\n");
      exit(1);
    }
  }
  int failed = 0;
  for (int i = 0; i < threads; i++) {
    void *res;
    pthread_join(t[i], &res);
    failed |= res != NULL;
  }
  if (failed) {
    fprintf(stderr, "pagechurn: out of memory\n");
    exit(1);
  }
  long pairs = PAIRS_PER_THREAD / count * count;
  return (now_ns() - start) / (double)pairs;
}

int main(int argc, char **argv) {
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = cpus > 0 ? (int)cpus : 2;
  if (argc > 1) block_size = strtoul(argv[1], NULL, 10);
  if (argc > 2) count = strtol(argv[2], NULL, 10);
  if (argc > 3) threads = atoi(argv[3]);
  if (block_size == 0 || count <= 0 || count > PAIRS_PER_THREAD || threads < 1 || threads > MAX_THREADS) {
    fprintf(stderr, "usage: pagechurn [SIZE [COUNT [THREADS]]] (THREADS 1..%d)\n", MAX_THREADS);
    return 2;
  }
  double one = run(1), many = run(threads);
  printf("%zu bytes x %ld: 1 thread %.1f ns per pair, %d threads %.1f ns per pair each, ratio %.2f\n",
         block_size, count, one, threads, many, many / one);
  return 0;
}

/* guardcost.c -- what guarded sampling pays the kernel on this machine.
 *
 *   cc -O2 -pthread -std=gnu11 -o guardcost bench/guardcost.c
 *   ./guardcost K protect          one page closed (PROT_NONE) and opened again
 *   LD_PRELOAD=libmialloc.so.1 MIALLOC_GUARDED_SAMPLE_RATE=1 ./guardcost K sample
 *                                  malloc+free of 64 bytes, every one sampled
 *
 * K other threads of the process spin meanwhile: closing a page must flush
 * it from the TLB of every CPU that runs a thread of the process, and that
 * cross-CPU flush, not the call, is what a sample costs where the
 * hypervisor makes interrupts dear (doc/secure.md, run 30).  Prints the
 * mean time per close and open, or per malloc+free pair. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#define ROUNDS 20000
#define MAX_SPINNERS 256

static atomic_int stop;

static void *spin(void *arg) {
  (void)arg;
  volatile unsigned long n = 0;
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) n++;
  return NULL;
}

static double now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static int measure_protect(int spinners) {
  char *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (page == MAP_FAILED) return 1;
  double closing = 0, opening = 0;
  for (int i = 0; i < ROUNDS; i++) {
    page[0] = (char)i;   /* in the TLB, as a live block's page is */
    double t0 = now_ns();
    if (mprotect(page, 4096, PROT_NONE) != 0) return 1;
    double t1 = now_ns();
    if (mprotect(page, 4096, PROT_READ | PROT_WRITE) != 0) return 1;
    closing += t1 - t0;
    opening += now_ns() - t1;
  }
  printf("%d other threads: close %.2f us, open %.2f us\n", spinners, closing / ROUNDS / 1e3,
         opening / ROUNDS / 1e3);
  return 0;
}

static int measure_sample(int spinners) {
  double t0 = now_ns();
  for (int i = 0; i < ROUNDS; i++) {
    char *volatile p = malloc(64);   /* volatile: the pair is not optimised away */
    if (p == NULL) return 1;
    p[0] = (char)i;
    free(p);
  }
  printf("%d other threads: malloc+free of 64 bytes %.2f us\n", spinners, (now_ns() - t0) / ROUNDS / 1e3);
  return 0;
}

int main(int argc, char **argv) {
  int spinners = argc > 2 ? atoi(argv[1]) : -1;
  if (spinners < 0 || spinners > MAX_SPINNERS || (strcmp(argv[2], "protect") != 0 && strcmp(argv[2], "sample") != 0)) {
    fprintf(stderr, "usage: guardcost THREADS protect|sample\n");
    return 2;
  }
  pthread_t threads[MAX_SPINNERS];
  for (int i = 0; i < spinners; i++)
    if (pthread_create(&threads[i], NULL, spin, NULL) != 0) return 1;
  nanosleep(&(struct timespec){0, 20 * 1000 * 1000}, NULL);   /* let them reach their CPUs */
  int rc = strcmp(argv[2], "protect") == 0 ? measure_protect(spinners) : measure_sample(spinners);
  atomic_store(&stop, 1);
  for (int i = 0; i < spinners; i++) pthread_join(threads[i], NULL);
  return rc;
}

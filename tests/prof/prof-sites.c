/* prof-sites.c -- a program with known allocation sites, run by the
 * scripts in tests/prof with the profiler started from the environment
 * (MIALLOC_PROFILE...).  It links libmialloc-prof, so no preload is needed.
 *
 *   prof-sites accuracy     the accuracy workload; explicit snapshot, then
 *                           prints "truth SITE BYTES" lines
 *   prof-sites alloc MIB    allocate and free MIB MiB in 64 KiB blocks
 *   prof-sites inuse MIB    keep MIB MiB in 1 MiB blocks
 *   prof-sites sleep SECS   allocate 4 MiB, then sleep (time trigger)
 *   prof-sites signal SIG   allocate, kill(self, SIG), wait for the file
 *   prof-sites explicit N   N calls of mi_profiler_snapshot()
 *   prof-sites fork         parent and child each allocate and snapshot
 *   prof-sites status       "secure=N active=N" (setuid test)
 *
 * Sites are separate noinline functions so their names are the leaves of
 * the profile's stacks.
 */
/* The allocation sites must stay separate functions with their own call
 * instructions whatever CFLAGS say (automake puts the user's -O2 after the
 * per-program flags; -O2 merges and splits such small functions). */
#pragma GCC optimize("O0")

#include "mialloc.h"
#include "mialloc-prof.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

NOINLINE static void **keep(size_t n) {
  void **v = calloc(n, sizeof *v);
  if (v == NULL) abort();
  return v;
}

static void touch(void *p, size_t size) {
  if (p == NULL) abort();
  ((volatile char *)p)[0] = 1;
  ((volatile char *)p)[size - 1] = 1;
}

/* --- sites ---------------------------------------------------------------- */
NOINLINE static void **site_small32(size_t n) {
  void **v = keep(n);
  for (size_t i = 0; i < n; i++) touch(v[i] = malloc(32), 32);
  return v;
}

NOINLINE static void **site_tiny16(size_t n) {
  void **v = keep(n);
  for (size_t i = 0; i < n; i++) touch(v[i] = malloc(16), 16);
  return v;
}

NOINLINE static void **site_page4k(size_t n) {
  void **v = keep(n);
  for (size_t i = 0; i < n; i++) touch(v[i] = malloc(4096), 4096);
  return v;
}

NOINLINE static void **site_quarter256k(size_t n) {
  void **v = keep(n);
  for (size_t i = 0; i < n; i++) touch(v[i] = malloc(256 << 10), 256 << 10);
  return v;
}

NOINLINE static void **site_huge1m(size_t n) {
  void **v = keep(n);
  for (size_t i = 0; i < n; i++) touch(v[i] = malloc(1 << 20), 1 << 20);
  return v;
}

/* allocates and frees: in use ~0 at the end */
NOINLINE static void site_churn64k(size_t n) {
  for (size_t i = 0; i < n; i++) {
    void *p = malloc(64 << 10);
    touch(p, 64 << 10);
    free(p);
  }
}

/* half of what it allocates is freed again */
NOINLINE static void **site_half1k(size_t n) {
  void **v = keep(n);
  for (size_t i = 0; i < n; i++) touch(v[i] = malloc(1024), 1024);
  for (size_t i = 0; i < n; i += 2) {
    free(v[i]);
    v[i] = NULL;
  }
  return v;
}

static void release(void **v, size_t n) {
  for (size_t i = 0; i < n; i++) free(v[i]);
  free(v);
}

/* Accuracy workload.  At the default rate R = 512 KiB an object of s bytes
 * is sampled with q = 1 - exp(-s/R) and counts s/q; the estimate of a site
 * with n objects of s bytes has relative standard error
 *   sqrt((1 - q) / (q n))   ~ sqrt(R / bytes) for s << R.
 * The checked sites (>= 5 % of the heap) and their standard errors:
 *   site_small32  8 Mi x 32 B    = 256 MiB   sqrt(512K/256M)       = 4.4 %
 *   site_page4k   64 Ki x 4 KiB  = 256 MiB   sqrt(127.5/65536)     = 4.4 %
 *   site_huge1m   160 x 1 MiB    = 160 MiB   sqrt(0.1565/160)      = 3.1 %
 * so the 10 % tolerance is 2.3 standard errors or more; the total in use
 * (792 MiB with the 72 MiB of pointer arrays, which are estimated
 * exactly, being single huge blocks; variance in MiB^2: 0.5 x 536 MiB of small objects + 9 for
 * site_quarter256k + 25 for site_huge1m) has relative error
 * sqrt(302)/792 = 2.2 %, tolerance 5 %.
 * Each check therefore fails for ~2 % of random seeds; the test fixes
 * MIALLOC_PROFILE_SEED, so it is deterministic.  Sites under 5 %
 * (site_tiny16 16 MiB, site_half1k 8 MiB kept, site_quarter256k 24 MiB)
 * are only part of the total; site_churn64k frees all it allocates (1 GiB,
 * relative error of its allocated estimate sqrt(512K/1G) = 2.2 %). */
static int accuracy(void) {
  const size_t n_small = 8u << 20, n_tiny = 1u << 20, n_4k = 64u << 10, n_256k = 96, n_1m = 160,
               n_churn = 16384, n_half = 16384;
  void **a = site_small32(n_small);
  void **b = site_tiny16(n_tiny);
  void **c = site_page4k(n_4k);
  void **d = site_quarter256k(n_256k);
  void **e = site_huge1m(n_1m);
  site_churn64k(n_churn);
  void **f = site_half1k(n_half);
  mi_profiler_snapshot();
  printf("truth site_small32 %zu\n", n_small * 32);
  printf("truth site_tiny16 %zu\n", n_tiny * 16);
  printf("truth site_page4k %zu\n", n_4k * 4096);
  printf("truth site_quarter256k %zu\n", n_256k * (256 << 10));
  printf("truth site_huge1m %zu\n", n_1m * (1 << 20));
  printf("truth site_churn64k 0 alloc %zu\n", n_churn * (64 << 10));
  printf("truth site_half1k %zu\n", n_half / 2 * 1024);
  /* the arrays holding the pointers are in use too (allocated by keep) */
  printf("truth keep %zu\n", (n_small + n_tiny + n_4k + n_256k + n_1m + n_half) * sizeof(void *));
  release(a, n_small);
  release(b, n_tiny);
  release(c, n_4k);
  release(d, n_256k);
  release(e, n_1m);
  release(f, n_half);
  return 0;
}

NOINLINE static void trigger_alloc(size_t mib) { site_churn64k(mib * 16); }

NOINLINE static void trigger_inuse(size_t mib) { (void)site_huge1m(mib); /* kept until exit */ }

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(int argc, char **argv) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  const char *mode = argc > 1 ? argv[1] : "accuracy";
  long arg = argc > 2 ? strtol(argv[2], NULL, 10) : 0;
  if (strcmp(mode, "accuracy") == 0) return accuracy();
  if (strcmp(mode, "alloc") == 0) {
    trigger_alloc((size_t)arg);
  } else if (strcmp(mode, "inuse") == 0) {
    trigger_inuse((size_t)arg);
  } else if (strcmp(mode, "sleep") == 0) {
    release(site_page4k(1024), 1024);
    sleep_ms(arg * 1000);
  } else if (strcmp(mode, "signal") == 0) {
    release(site_page4k(1024), 1024);
    kill(getpid(), (int)arg);
    sleep_ms(1500); /* the profiler thread writes meanwhile */
  } else if (strcmp(mode, "explicit") == 0) {
    void **v = site_page4k(1024);
    for (long i = 0; i < arg; i++) mi_profiler_snapshot();
    release(v, 1024);
  } else if (strcmp(mode, "fork") == 0) {
    void **v = site_page4k(1024);
    mi_profiler_snapshot();
    pid_t pid = fork();
    if (pid == 0) {
      void **w = site_huge1m(8);
      mi_profiler_snapshot();
      printf("child %d\n", (int)getpid());
      release(w, 8);
      exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    printf("parent %d\n", (int)getpid());
    release(v, 1024);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
  } else if (strcmp(mode, "status") == 0) {
    release(site_page4k(64), 64);
    printf("secure=%lu active=%d\n", getauxval(AT_SECURE), mi_pprof_env_profiler() != NULL);
  } else {
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
  }
  return 0;
}

/* test-free-errno.c -- free leaves errno as it was.
 *
 * POSIX.1-2024 requires it and glibc guarantees it since 2.33, and
 * programs rely on it: `err = errno; free(buf); return err` is written as
 * `free(buf); return errno` often enough.  A free can reach system calls
 * (a purge, a lock's futex wait, starting the background purge thread),
 * and any of them failing set errno: a contended lock's futex wait returns
 * EAGAIN, a purge at the mapping limit ENOMEM.
 *
 * Three parts: frees of every kind with nothing failing; threads freeing
 * huge blocks against each other (the arena locks contend: probabilistic,
 * it may pass on broken code but cannot fail on correct code); and last,
 * deterministically, frees whose purges and purge-thread start are refused
 * by a seccomp filter.
 */
#define _GNU_SOURCE
#include <mialloc.h>
#include "../tap.h"
#include "../seccomp.h"

#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define MiB ((size_t)1 << 20)
#define SENTINEL 12345   /* not an errno value anything here could set */


/* free(p) and whether errno came back as SENTINEL. */
static bool free_keeps(void *p) {
  errno = SENTINEL;
  free(p);
  return errno == SENTINEL;
}

static void *remote_free(void *arg) {
  void **blocks = arg;
  bool ok = true;
  for (int i = 0; i < 64; i++) ok = free_keeps(blocks[i]) && ok;
  return ok ? arg : NULL;
}

static void check_plain(void) {
  TAP_OK(free_keeps(NULL), "free(NULL)");
  bool ok = true;
  for (size_t size = 1; size <= 64 * MiB; size = size * 3 + 1) {
    char *p = malloc(size);
    if (p == NULL) { ok = false; break; }
    memset(p, 1, size < 4096 ? size : 4096);
    ok = free_keeps(p) && ok;
  }
  TAP_OK(ok, "frees of blocks of 1 B .. 64 MiB");
  ok = true;
  for (size_t align = 16; align <= 8 * MiB; align *= 4) {
    void *p = aligned_alloc(align, align);
    ok = p != NULL && free_keeps(p) && ok;
  }
  TAP_OK(ok, "frees of aligned blocks (alignment 16 B .. 4 MiB)");
  void *blocks[64];
  for (int i = 0; i < 64; i++) blocks[i] = malloc((size_t)(i + 1) * 1000);
  pthread_t t;
  void *res = NULL;
  bool started = pthread_create(&t, NULL, remote_free, blocks) == 0;
  if (started) pthread_join(t, &res);
  TAP_OK(started && res == blocks, "frees from another thread than the allocating one");
}

/* ---- contended locks ---- */

#define CONTEND_THREADS 4
#define CONTEND_ROUNDS 3000

static void *contend(void *arg) {
  (void)arg;
  size_t changed = 0;
  void *keep[4] = {0};
  for (int i = 0; i < CONTEND_ROUNDS; i++) {
    size_t size = (size_t)(5 + i % 7) * MiB;   /* huge blocks: their arena's lock */
    int slot = i % 4;
    if (keep[slot] != NULL && !free_keeps(keep[slot])) changed++;
    keep[slot] = malloc(size);
    if (keep[slot] != NULL) ((char *)keep[slot])[size - 1] = 1;
  }
  for (int slot = 0; slot < 4; slot++)
    if (!free_keeps(keep[slot])) changed++;
  return (void *)changed;
}

static void check_contended(void) {
  pthread_t t[CONTEND_THREADS];
  size_t changed = 0;
  int started = 0;
  for (int i = 0; i < CONTEND_THREADS; i++)
    if (pthread_create(&t[i], NULL, contend, NULL) == 0) started++;
  for (int i = 0; i < started; i++) {
    void *res;
    pthread_join(t[i], &res);
    changed += (size_t)res;
  }
  TAP_OK(started == CONTEND_THREADS && changed == 0,
         "%d threads freeing huge blocks against each other: errno changed by %zu of %d frees",
         CONTEND_THREADS, changed, CONTEND_THREADS * (CONTEND_ROUNDS + 4));
}

/* ---- refused system calls ---- */

#define REFUSED_BLOCKS 48

static bool refuse_purges_and_threads(void) {
  static const uint32_t purge_advice[] = {4 /* MADV_DONTNEED */, 8 /* MADV_FREE */};
  static const uint32_t no_access[] = {0 /* PROT_NONE */, 1 /* PROT_READ */};
  return seccomp_refuse(__NR_clone3, ENOSYS, NULL, 0) &&   /* ENOSYS: glibc falls back to clone */
         seccomp_refuse(__NR_clone, EAGAIN, NULL, 0) &&
         seccomp_refuse(__NR_madvise, EPERM, purge_advice, 2) &&
         seccomp_refuse(__NR_mmap, EPERM, no_access, 2) &&   /* decommit: a fresh inaccessible mapping */
         seccomp_refuse(__NR_mprotect, EPERM, no_access, 2) &&
         seccomp_refuse(__NR_munmap, EPERM, NULL, 0);
}

static void check_refused(void) {
  /* purge at once, so the frees below make the calls */
  mi_option_set(mi_option_purge_delay, 0);
  char *big[REFUSED_BLOCKS], *small[4096];
  for (int i = 0; i < REFUSED_BLOCKS; i++) {   /* 96 MiB: enough to start the purge thread */
    big[i] = malloc(2 * MiB + (size_t)i * 4096);
    if (big[i] != NULL) memset(big[i], 7, 2 * MiB);
  }
  for (int i = 0; i < 4096; i++) {
    small[i] = malloc((size_t)(16 + (i % 64) * 48));
    if (small[i] != NULL) small[i][0] = 1;
  }
  if (!refuse_purges_and_threads()) {
    printf("ok %d - frees whose system calls fail # SKIP no seccomp filter here\n", ++tap_count);
    return;
  }
  pthread_t t;
  errno = 0;
  int rc = pthread_create(&t, NULL, remote_free, NULL);
  TAP_OK(rc != 0, "the filter refuses new threads (pthread_create: %d)", rc);
  if (rc == 0) pthread_join(t, NULL);
  size_t changed = 0, frees = 0;
  for (int i = 0; i < 4096; i++, frees++)
    if (!free_keeps(small[i])) changed++;
  for (int i = 0; i < REFUSED_BLOCKS; i++, frees++)
    if (!free_keeps(big[i])) changed++;
  TAP_OK(changed == 0, "frees whose purges and purge thread are refused: errno changed by %zu of %zu",
         changed, frees);
  char *again = malloc(3 * MiB);
  TAP_OK(again != NULL, "memory whose purge failed is handed out again");
  free(again);
}

int main(void) {
  check_plain();
  check_contended();
  check_refused();
  return tap_done();
}

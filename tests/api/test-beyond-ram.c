/* test-beyond-ram.c -- blocks larger than RAM plus swap.
 *
 * Under vm.overcommit_memory=0 (the kernel's default heuristic) one
 * writable mapping larger than RAM plus swap is refused, and glibc's malloc
 * answers NULL with ENOMEM; a program that probes how much it may take, or
 * that computed a wrong size, relies on it.  mialloc's arenas are
 * reservations the kernel never weighs, so mialloc must refuse such a
 * block itself -- and granting it was not free either: its page-map entries
 * cost 1/8192 of its size in RAM, so malloc(16 TiB) wrote 2 GiB of them
 * and a few such calls got the process killed by the OOM killer.
 *
 * The checks need the heuristic mode; under the other modes (1: the kernel
 * grants everything, 2: the commit limit decides) the test is skipped.
 */
#define _GNU_SOURCE
#include <mialloc.h>
#include "../tap.h"
#include "../rss.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysinfo.h>

#define MiB ((size_t)1 << 20)

static void *volatile sink;

static int overcommit_mode(void) {
  FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
  int mode = -1;
  if (f != NULL) {
    if (fscanf(f, "%d", &mode) != 1) mode = -1;
    fclose(f);
  }
  return mode;
}

static size_t ram_and_swap(void) {
  struct sysinfo si;
  if (sysinfo(&si) != 0) return 0;
  return ((size_t)si.totalram + (size_t)si.totalswap) * (si.mem_unit ? si.mem_unit : 1);
}

/* p must be NULL with errno ENOMEM; frees p otherwise. */
static void refused(void *p, int err, const char *what, size_t size) {
  TAP_OK(p == NULL && err == ENOMEM, "%s of %zu MiB: NULL, ENOMEM (got %p, errno %d)", what, size / MiB, p, err);
  if (p != NULL) free(p);
}

static void check_refusals(size_t over) {
  void *p;
  errno = 0; p = malloc(over); refused(p, errno, "malloc", over);
  errno = 0; p = malloc(over * 16); refused(p, errno, "malloc", over * 16);
  errno = 0; p = calloc(over / 4096 + 1, 4096); refused(p, errno, "calloc", over);
  errno = 0; p = mi_malloc(over); refused(p, errno, "mi_malloc", over);
  errno = 0; p = mi_zalloc(over); refused(p, errno, "mi_zalloc", over);
  errno = 0; p = memalign(2 * MiB, over); refused(p, errno, "memalign(2 MiB)", over);
  errno = 0; p = aligned_alloc(64 * MiB, over); refused(p, errno, "aligned_alloc(64 MiB)", over);
  errno = 0; p = mi_malloc_aligned(over, 8 * MiB); refused(p, errno, "mi_malloc_aligned(8 MiB)", over);
  void *q = NULL;
  int rc = posix_memalign(&q, 4096, over);
  TAP_OK(rc == ENOMEM && q == NULL, "posix_memalign of %zu MiB: ENOMEM (got %d, %p)", over / MiB, rc, q);
  if (rc == 0) free(q);
  mi_heap_t *heap = mi_heap_new();
  errno = 0; p = heap ? mi_heap_malloc(heap, over) : NULL; refused(p, errno, "mi_heap_malloc", over);
  if (heap) mi_heap_delete(heap);
}

/* A failed growth leaves the block where it was, contents and all. */
static void check_realloc(size_t over) {
  size_t n = 64 * MiB;
  unsigned char *b = malloc(n);
  if (b == NULL) { TAP_OK(0, "malloc(64 MiB) for the realloc checks"); return; }
  for (size_t i = 0; i < n; i += 4096) b[i] = (unsigned char)(i >> 12);
  errno = 0;
  void *r = realloc(b, over);
  int err = errno;
  TAP_OK(r == NULL && err == ENOMEM, "realloc(64 MiB block, %zu MiB): NULL, ENOMEM (got %p, errno %d)", over / MiB, r, err);
  if (r != NULL) b = r;
  sink = b;
  bool intact = true;
  for (size_t i = 0; i < n; i += 4096) intact = intact && b[i] == (unsigned char)(i >> 12);
  TAP_OK(intact, "the block is intact after the refused growth");
  unsigned char *g = realloc(b, 2 * n);
  TAP_OK(g != NULL && g[n - 4096] == (unsigned char)((n - 4096) >> 12), "it still grows to 128 MiB");
  free(g != NULL ? g : b);
}

int main(void) {
  int mode = overcommit_mode();
  size_t limit = ram_and_swap();
  if (mode != 0 || limit == 0) {
    printf("1..0 # SKIP vm.overcommit_memory is %d, not the heuristic mode 0\n", mode);
    return 0;
  }
  size_t over = limit + 64 * MiB;
  tap_diag("RAM plus swap: %zu MiB", limit / MiB);
  free(malloc(1));   /* the library's own start-up out of the RSS figures */
  size_t rss0 = rss_bytes();
  check_refusals(over);
  size_t rss1 = rss_bytes();
  TAP_OK(rss1 < rss0 + 16 * MiB, "the refusals cost no memory (RSS %zu -> %zu KiB)", rss0 >> 10, rss1 >> 10);
  check_realloc(over);

  /* Below the limit the kernel would grant it, and so does mialloc. */
  void *half = malloc(limit / 2);
  TAP_OK(half != NULL, "a block of half of RAM plus swap (%zu MiB) is granted", limit / 2 / MiB);
  free(half);
  return tap_done();
}

/* test-calloc-populate.c -- calloc of fresh huge memory (above 512 KiB, up
 * to 64 MiB) is faulted in writable at once, so a program that reads it
 * before writing never maps the kernel's zero page (whose copy-on-write
 * fault interrupts every other CPU running the process); a bigger calloc
 * is left to fault in as it is touched (a sparse table must not cost its
 * whole size).  Runs first thing in a fresh process: the memory is fresh.
 * Skipped in Valgrind and ASan builds (they zero every calloc themselves)
 * and where the kernel has no MADV_POPULATE_WRITE (before Linux 5.14). */
#include "config.h"
#include "mialloc.h"
#include "../tap.h"
#include "../rss.h"

#include <stdint.h>
#include <sys/mman.h>

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif

static int all_zero(const unsigned char *p, size_t n) {
  for (size_t off = 0; off < n; off += 4096)
    if (p[off] != 0) return 0;
  return p[n - 1] == 0;
}

int main(void) {
#if MIALLOC_VALGRIND || MIALLOC_ASAN
  printf("1..0 # SKIP tools builds zero every calloc themselves\n");
  return 0;
#endif
  void *probe = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED || madvise(probe, 4096, MADV_POPULATE_WRITE) != 0) {
    printf("1..0 # SKIP the kernel has no MADV_POPULATE_WRITE\n");
    return 0;
  }
  munmap(probe, 4096);

  const size_t small = 16u << 20, big = 256u << 20;
  size_t before = rss_bytes();
  unsigned char *a = mi_calloc(1, small);
  size_t after = rss_bytes();
  tap_diag("calloc(16 MiB): rss %zu -> %zu KiB", before >> 10, after >> 10);
  TAP_OK(a != NULL && after >= before + small - (1u << 20), "calloc of 16 MiB of fresh memory is resident at once");
  TAP_OK(a != NULL && all_zero(a, small), "and reads as zero");

  before = rss_bytes();
  unsigned char *b = mi_calloc(1, big);
  after = rss_bytes();
  tap_diag("calloc(256 MiB): rss %zu -> %zu KiB", before >> 10, after >> 10);
  TAP_OK(b != NULL && after < before + (16u << 20), "calloc of 256 MiB is left to fault in as it is used");
  TAP_OK(b != NULL && all_zero(b, big), "and reads as zero");
  mi_free(a);
  mi_free(b);
  return tap_done();
}

/* test-huge-grow.c -- realloc growing a block larger than the arena
 * reserve.  Such a block gets an arena of its own with address space
 * kept free after it, so it grows in place; before, every step moved
 * it and copied the whole block (a buffer grown to 1.6 GB in 16 MiB
 * steps took 36 s; glibc takes 0.4 s).  Run with a 256 MiB reserve (the
 * test starts itself again with it) so that nothing is big. */
#include "internal.h"
#include "../tap.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

int main(int argc, char **argv) {
  if (getenv("MIALLOC_ARENA_RESERVE") == NULL) {
    setenv("MIALLOC_ARENA_RESERVE", "256MiB", 1);
    execv("/proc/self/exe", argv);
    return 1;
  }
  (void)argc;
  if (mia_padded() || mia_annotated()) {
    printf("1..0 # SKIP debug and tools builds move a growing huge block (its canary or annotations go with it)\n");
    return 0;
  }
  size_t reserve = mi_option_get_size(mi_option_arena_reserve);
  TAP_OK(reserve == 256 * MIB, "the arena reserve is 256 MiB (%zu MiB)", reserve / MIB);

  size_t size = reserve + 32 * MIB;
  char *p = mi_malloc(size);
  TAP_OK(p != NULL, "a block of %zu MiB", size / MIB);
  if (p == NULL) return tap_done();
  p[0] = 7;
  int moves = 0;
  for (int step = 0; step < 16; step++) {
    size += 16 * MIB;
    char *q = mi_realloc(p, size);
    if (q == NULL) break;
    moves += q != p;
    p = q;
    p[size - 1] = 1;
  }
  TAP_OK(moves == 0, "grown by 16 MiB 16 times past the reserve: moved %d times", moves);
  TAP_OK(p[0] == 7 && p[size - 1] == 1, "its contents are kept");

  /* once it is freed its arena takes other allocations again */
  mi_free(p);
  char *a = mi_malloc(reserve / 2), *b = mi_malloc(reserve / 2), *c = mi_malloc(reserve / 2);
  TAP_OK(a != NULL && b != NULL && c != NULL, "three blocks of half the reserve after it was freed");
  mi_free(a);
  mi_free(b);
  mi_free(c);
  return tap_done();
}

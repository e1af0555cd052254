/* vg-invalid-read.c uaf|overflow -- a seeded invalid read of one byte:
 *   uaf       8 bytes into a 64-byte block after mi_free
 *   overflow  just past the end of a 100-byte block (inside the block's
 *             size-class slack: only the requested size is valid)
 * memcheck must report "Invalid read", AddressSanitizer a heap error. */
#include "mialloc.h"

#include <stdio.h>
#include <string.h>

/* the misuse is the point */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Warray-bounds"

int main(int argc, char **argv) {
  int uaf = argc < 2 || strcmp(argv[1], "overflow") != 0;
  volatile unsigned char sink;
  if (uaf) {
    unsigned char *p = mi_malloc(64);
    if (p == NULL) return 1;
    memset(p, 1, 64);
    mi_free(p);
    sink = ((volatile unsigned char *)p)[8];
  } else {
    unsigned char *p = mi_malloc(100);
    if (p == NULL) return 1;
    memset(p, 1, 100);
    sink = ((volatile unsigned char *)p)[100];
    mi_free(p);
  }
  (void)sink;
  printf("read done\n");
  return 0;
}

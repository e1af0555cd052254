/* vg-libc-api.c -- a program using only the standard allocation functions,
 * with a seeded invalid read (8 bytes into a freed 64-byte block) and a
 * seeded leak (one 100-byte block).  Run under memcheck with mialloc
 * preloaded (test-memcheck-preload.sh): memcheck must replace mialloc's
 * malloc as it replaces glibc's and report both. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* the misuse is the point */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wuse-after-free"

int main(void) {
  volatile unsigned char sink;
  unsigned char *p = malloc(64);
  if (p == NULL) return 1;
  memset(p, 1, 64);
  free(p);
  sink = ((volatile unsigned char *)p)[8];
  (void)sink;
  char *leak = malloc(100);
  if (leak == NULL) return 1;
  strcpy(leak, "leaked");
  leak = NULL;
  puts("done");
  return 0;
}

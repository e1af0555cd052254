/* vg-leak.c -- a seeded leak: one block of 100 bytes from mi_malloc whose
 * only pointer is overwritten.  memcheck must call it "definitely lost". */
#include "mialloc.h"

#include <stdio.h>
#include <string.h>

static void *volatile holder;

int main(void) {
  /* blocks before it, so the leaked one is not the first of its page (a
   * page's start address is kept in mialloc's metadata) */
  void *a = mi_malloc(100), *b = mi_malloc(100);
  holder = mi_malloc(100);
  if (a == NULL || b == NULL || holder == NULL) return 1;
  memset(holder, 0x11, 100);
  holder = NULL;   /* the leak */
  mi_free(a);
  mi_free(b);
  printf("leaked one block of 100 bytes\n");
  return 0;
}

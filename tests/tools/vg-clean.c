/* vg-clean.c -- a correct program using the mi_ API: under Valgrind's
 * memcheck (test-valgrind.sh) and AddressSanitizer (test-asan.sh) it must
 * produce no error and no leak. */
#include "mialloc.h"

#include <stdio.h>
#include <string.h>

int main(void) {
  unsigned long sum = 0;
  /* small, medium, large and huge blocks, written and read in full */
  static const size_t sizes[] = {1, 8, 24, 100, 1000, 5000, 70000, 600000, 3 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *p = mi_malloc(sizes[i]);
    if (p == NULL) return 1;
    memset(p, (int)i, sizes[i]);
    sum += p[sizes[i] - 1];
    mi_free(p);
  }
  /* calloc and zalloc hand out zeroed (defined) memory */
  unsigned char *z = mi_calloc(100, 7);
  unsigned char *y = mi_zalloc(333);
  if (z == NULL || y == NULL) return 1;
  for (int i = 0; i < 700; i++) sum += z[i];
  for (int i = 0; i < 333; i++) sum += y[i];
  /* realloc keeps the defined prefix */
  char *s = mi_malloc(10);
  if (s == NULL) return 1;
  strcpy(s, "valgrind");
  for (size_t n = 16; n < 100000; n *= 3) {
    s = mi_realloc(s, n);
    if (s == NULL || strcmp(s, "valgrind") != 0) return 1;
  }
  /* aligned blocks */
  for (size_t a = 16; a <= 4096; a *= 4) {
    unsigned char *q = mi_malloc_aligned(a + 3, a);
    if (q == NULL) return 1;
    memset(q, 1, a + 3);
    mi_free(q);
  }
  /* a first-class heap, destroyed with live blocks, and one deleted */
  mi_heap_t *h = mi_heap_new();
  for (int i = 0; i < 100; i++) {
    char *t = mi_heap_malloc(h, 50 + (size_t)i);
    if (t == NULL) return 1;
    memset(t, 'h', 50);
  }
  mi_heap_destroy(h);
  mi_heap_t *g = mi_heap_new();
  char *kept = mi_heap_strdup(g, "kept after mi_heap_delete");
  mi_heap_delete(g);
  sum += (unsigned char)kept[0];
  mi_free(kept);
  mi_free(s);
  mi_free(y);
  mi_free(z);
  mi_collect(true);
  printf("clean: %lu\n", sum);
  return 0;
}

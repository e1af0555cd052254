/* handout.h -- for tests that free a block twice on purpose: were the
 * block on a free list twice, it would come out of malloc twice. */
#ifndef MIALLOC_TEST_HANDOUT_H
#define MIALLOC_TEST_HANDOUT_H

#include <mialloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

static int handout_cmp(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* 3000 blocks of size from this thread are all different; they are freed
 * again */
#define HANDOUT_BLOCKS 3000
static bool handed_out_once(size_t size) {
  static void *blocks[HANDOUT_BLOCKS];
  for (size_t i = 0; i < HANDOUT_BLOCKS; i++) blocks[i] = mi_malloc(size);
  qsort(blocks, HANDOUT_BLOCKS, sizeof blocks[0], handout_cmp);
  bool once = blocks[0] != NULL;
  for (size_t i = 1; i < HANDOUT_BLOCKS; i++)
    if (blocks[i] == blocks[i - 1]) once = false;
  for (size_t i = 0; i < HANDOUT_BLOCKS; i++) mi_free(blocks[i]);
  return once;
}

#endif

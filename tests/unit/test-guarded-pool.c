/* test-guarded-pool.c -- guarded sampling once its slots run out.  The
 * pool has room for 8,064 live guarded blocks; past that, samples become
 * ordinary blocks.  A freed slot stays closed for 256 samples (its
 * quarantine), and those are counted whether or not they found a slot:
 * counted only when placed, a pool that filled up never saw a quarantine
 * end again, and no block was guarded for the rest of the process. */
#include "internal.h"
#include "../tap.h"

#include <stdio.h>

#define BLOCKS 9000        /* more than the pool's 8,064 slots */
#define SIZE 64

static void *blocks[BLOCKS];

static bool is_guarded(const void *p) {
  const mia_page_t *page = mia_page_of(p);
  return page != NULL && page->is_guarded;
}

static size_t allocate(size_t n) {
  size_t guarded = 0;
  for (size_t i = 0; i < n; i++) {
    blocks[i] = mi_malloc(SIZE);
    memset(blocks[i], 0x5a, SIZE);
    guarded += is_guarded(blocks[i]);
  }
  return guarded;
}

static void release(size_t n) {
  for (size_t i = 0; i < n; i++) mi_free(blocks[i]);
}

int main(void) {
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 1, 42);
  if (!mia_guarded_enabled) {
    printf("1..0 # SKIP guarded sampling is not built in\n");
    return 0;
  }
  size_t first = allocate(BLOCKS);
  TAP_OK(first >= 8000 && first < BLOCKS, "every block is sampled; %zu of %d fit the pool", first, BLOCKS);
  TAP_OK(blocks[BLOCKS - 1] != NULL && !is_guarded(blocks[BLOCKS - 1]), "past that, samples are ordinary blocks");

  /* one slot freed while the pool is full: free again after its quarantine */
  size_t g = 0;
  while (g < BLOCKS - 1 && !is_guarded(blocks[g])) g++;
  mi_free(blocks[g]);
  size_t later = 0;
  for (int i = 0; i < 300; i++) {
    void *p = mi_malloc(SIZE);
    if (is_guarded(p)) later++;
    else mi_free(p);   /* ordinary: not needed (a guarded one stays live) */
  }
  TAP_OK(later == 1, "a slot freed in a full pool is used again after its quarantine (%zu)", later);
  blocks[g] = mi_malloc(SIZE);

  /* all freed: every sample is placed again once the quarantines end */
  release(BLOCKS);
  size_t again = allocate(1000);
  TAP_OK(again >= 1000 - 256 - 1, "after the pool emptied, samples are guarded again (%zu of 1000)", again);
  release(1000);
  return tap_done();
}

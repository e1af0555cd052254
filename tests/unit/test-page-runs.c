/* test-page-runs.c -- fresh pages are carved in runs: a size class with one
 * live block makes about one OS page resident, not its whole 64 KiB page,
 * and carving still hands out every block of a page exactly once. */
#include "internal.h"
#include "../tap.h"

#include <stdlib.h>
#include <sys/mman.h>

#define SECURE MIALLOC_SECURE
/* debug builds fill every fresh block of a run, and the last one may reach
 * into the next OS page */
#define FILLED MIALLOC_DEBUG

/* a block from a regular page of h (guarded sampling, on by default in
 * secure builds, may place the odd block elsewhere: ask again) */
static void *regular_block(mi_heap_t *h, size_t size) {
  for (;;) {
    void *p = mi_heap_malloc(h, size);
    mia_page_t *page = mia_page_of(p);
    if (p == NULL || page == NULL || !page->is_guarded) return p;
  }
}

static size_t resident_os_pages(const void *start, size_t len) {
  size_t ps = mia_prim_page_size(), n = len / ps, count = 0;
  unsigned char *vec = malloc(n);
  if (vec == NULL || mincore((void *)start, len, vec) != 0) {
    free(vec);
    return SIZE_MAX;
  }
  for (size_t i = 0; i < n; i++) count += vec[i] & 1;
  free(vec);
  return count;
}

int main(void) {
  size_t ps = mia_prim_page_size();
  mi_heap_t *h = mi_heap_new();
  bool first_run_small = true, one_page = true;
  size_t classes = 0;
  for (uint8_t bin = 1; bin <= MIA_BIN_COUNT && mia_bin_size[bin] <= ps; bin++) {
    uint8_t *p = regular_block(h, mia_bin_size[bin]);
    mia_page_t *page = mia_page_of(p);
    if (page == NULL) { first_run_small = false; break; }
    size_t bsize = page->block_size;   /* debug builds pad blocks: a bigger bin */
    classes++;
    /* release builds: the first run ends with the OS page it starts in;
     * secure builds shuffle runs of 16 KiB (or 4 blocks) */
    size_t limit = SECURE ? (16 * 1024 / bsize < 4 ? 4 : 16 * 1024 / bsize) : (ps + bsize - 1) / bsize;
    if (page->capacity > limit) {
      first_run_small = false;
      tap_diag("%zu-byte blocks: first run of %u blocks (at most %zu expected)", bsize, page->capacity, limit);
    }
    size_t resident = resident_os_pages(page->start, (size_t)page->reserved * bsize / ps * ps);
    size_t allowed = SECURE ? (limit * bsize + ps - 1) / ps + 1 : 1 + FILLED;
    if (resident > allowed) {
      one_page = false;
      tap_diag("%zu-byte blocks: %zu OS pages of the page resident (at most %zu expected)", bsize, resident, allowed);
    }
  }
  TAP_OK(classes >= 20, "one block in each of %zu size classes up to an OS page", classes);
  TAP_OK(first_run_small, "a fresh page's first run of blocks is short");
  TAP_OK(one_page, "a size class with one live block holds %s", SECURE ? "about one run of OS pages" : "one OS page");

  /* every block of a page of 48-byte requests, handed out exactly once */
  mi_heap_t *h2 = mi_heap_new();
  uint8_t *first = regular_block(h2, 48);
  mia_page_t *page = mia_page_of(first);
  uint32_t reserved = page->reserved;
  size_t bsize = page->block_size;
  uint8_t *seen = calloc(reserved, 1);
  bool in_page = true, once = true;
  seen[(size_t)(first - page->start) / bsize] = 1;
  /* the order: how often the next block is the one after the last, and
   * how many different steps there are between them */
  size_t adjacent = 0, steps = 0, distinct = 0;
  ptrdiff_t seen_steps[16];
  uint8_t *prev = first;
  for (uint32_t i = 1; i < reserved; i++) {
    uint8_t *p = regular_block(h2, 48);
    if (mia_page_of(p) != page) { in_page = false; break; }
    size_t idx = (size_t)(p - page->start) / bsize;
    if (idx >= reserved || seen[idx]) once = false;
    else seen[idx] = 1;
    ptrdiff_t step = p - prev;
    bool known = false;
    for (size_t d = 0; d < distinct; d++) known |= seen_steps[d] == step;
    if (!known && distinct < 16) seen_steps[distinct++] = step;
    adjacent += step == (ptrdiff_t)bsize;
    steps++;
    prev = p;
  }
  TAP_OK(in_page && page->capacity == reserved, "%u allocations carve the whole page (capacity %u)",
         reserved, page->capacity);
  TAP_OK(once, "each of its blocks is handed out once");
  if (SECURE) {
    /* a few ascending streams drawn at random: the next block is often the
     * one after the last (locality), but not mostly, and not by one fixed
     * stride */
    TAP_OK(adjacent * 8 >= steps && adjacent * 2 <= steps && distinct >= 16,
           "fresh blocks come in a random order of ascending streams (%zu of %zu steps to the next block, "
           "%zu%s different steps)", adjacent, steps, distinct, distinct == 16 ? " or more" : "");
  } else {
    TAP_OK(adjacent == steps, "fresh blocks come in address order (%zu of %zu steps to the next block)",
           adjacent, steps);
  }
  free(seen);
  mi_heap_destroy(h2);
  mi_heap_destroy(h);
  return tap_done();
}

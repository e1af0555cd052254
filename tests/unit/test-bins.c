/* test-bins.c -- size classes: every size maps to a bin that fits it,
 * bins are monotonic, and the waste stays within the design's bounds. */
#include "internal.h"
#include "../tap.h"

int main(void) {
  mi_thread_init();
  bool fits = true, monotonic = true, aligned = true, largest = true;
  double worst = 0, worst_small = 0;
  size_t worst_size = 0;
  double sum = 0;
  size_t count = 0;
  uint8_t prev = 0;
  for (size_t size = 1; size <= MIA_LARGE_MAX; size++) {
    uint8_t bin = mia_bin_of(size);
    size_t bsize = mia_bin_size[bin];
    if (bin < 1 || bin >= MIA_BIN_HUGE || bsize < size) fits = false;
    if (bin < prev) monotonic = false;
    /* a bin's block size is the largest size that maps to it */
    if ((size == MIA_LARGE_MAX || mia_bin_of(size + 1) != bin) && bsize != size) largest = false;
    prev = bin;
    if (size >= 16 && bsize % 16 != 0) aligned = false;
    double waste = (double)(bsize - size) / (double)bsize;
    if (size > 64) {
      if (waste > worst) { worst = waste; worst_size = size; }
      sum += waste;
      count++;
    } else if (bsize - size >= 16) {
      worst_small = 1;
    }
  }
  TAP_OK(fits, "every size from 1 to 512 KiB maps to a bin that holds it");
  TAP_OK(monotonic, "bins grow with size");
  TAP_OK(largest, "each bin's block size is the largest size that maps to it");
  TAP_OK(aligned, "every bin of 16 bytes or more is a multiple of 16 (16-byte alignment)");
  TAP_OK(worst_small == 0, "16-byte steps up to 64 bytes: waste below one step");
  /* release builds keep a free mark in a freed block's second word */
  TAP_OK(mia_bin_size[mia_bin_of(1)] == 16, "the smallest block is 16 bytes (%zu)", mia_bin_size[mia_bin_of(1)]);
  /* four bins per power of two: worst case is the first size past a bin,
   * 1/5 of the block; the average over all sizes is half of that */
  TAP_OK(worst <= 0.20, "worst-case waste above 64 bytes is at most 20%% (%.1f%% at %zu)", worst * 100, worst_size);
  TAP_OK(sum / (double)count <= 0.125, "average waste above 64 bytes is at most 12.5%% (%.2f%%)",
         100 * sum / (double)count);
  TAP_OK(mia_bin_of(0) == mia_bin_of(1), "size 0 uses the smallest bin");
  TAP_OK(mia_bin_size[mia_bin_of(MIA_LARGE_MAX)] == MIA_LARGE_MAX, "the largest bin is 512 KiB");
  int bins_per_doubling = mia_bin_of(256) - mia_bin_of(128);
  TAP_OK(bins_per_doubling == 4, "four bins per power of two (%d)", bins_per_doubling);
#if MIALLOC_SECURE
  /* secure frees check "p is a block start" by a multiply and a rotate
   * (mia_block_index_exact): for every bin, every 8-byte offset of a page
   * and some past its end, the answer and the index must be the division's */
  bool exact = true;
  size_t bad_size = 0, bad_off = 0;
  static mia_page_t page;   /* only its fields are used, not its memory */
  for (uint8_t bin = 1; bin <= MIA_BIN_COUNT && exact; bin++) {
    size_t bsize = mia_bin_size[bin];
    memset(&page, 0, sizeof page);
    page.slice_count = (uint16_t)(bsize <= MIA_SMALL_MAX ? 1 : (2 * bsize) / MIA_SLICE_SIZE + 2);
    page.start = (uint8_t *)((uintptr_t)1 << 40);
    mia_page_init(&page, bsize, bin, false);
    page.capacity = page.reserved;
    size_t span = (size_t)page.reserved * bsize + 2 * bsize;
    for (size_t off = 0; off < span; off += 8) {
      uint64_t index = mia_block_index_exact(&page, page.start + off);
      bool start = off % bsize == 0 && off / bsize < page.capacity;
      if ((index < page.capacity) != start || (start && index != off / bsize)) {
        exact = false;
        bad_size = bsize;
        bad_off = off;
        break;
      }
    }
  }
  TAP_OK(exact, "secure build: the block-start test agrees with division for every bin and offset (%zu at %zu)",
         bad_size, bad_off);
#endif
  return tap_done();
}

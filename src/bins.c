/* bins.c -- the size-class table. */
#include "internal.h"

size_t mia_bin_size[MIA_BIN_HUGE + 1];

/* The block size of a bin is the largest size that maps to it.  Bins grow
 * with the size, so a binary search per bin finds it: walking all 65,536
 * word sizes up to 512 KiB took 1.5 million instructions, most of what
 * mialloc added to the start of every process. */
void mia_bins_init(void) {
  size_t lo = 1;   /* the smallest word size of the bin being sized */
  for (size_t bin = 1; bin <= MIA_BIN_COUNT; bin++) {
    size_t a = lo, b = MIA_LARGE_MAX / MIA_WORD_SIZE;
    while (a < b) {   /* the largest word size in [a, b] with a bin <= this one */
      size_t mid = a + (b - a + 1) / 2;
      if (mia_bin_of(mid * MIA_WORD_SIZE) <= bin) a = mid;
      else b = mid - 1;
    }
    mia_bin_size[bin] = a * MIA_WORD_SIZE;
    lo = a + 1;
  }
  mia_bin_size[MIA_BIN_HUGE] = MIA_LARGE_MAX + 1;
}

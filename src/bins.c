/* bins.c -- the size-class table. */
#include "internal.h"

size_t mia_bin_size[MIA_BIN_HUGE + 1];

/* The block size of a bin is the largest size that maps to it: the inverse
 * of mia_bin_of.  16-byte steps up to 64 bytes; above, the word sizes w
 * with w - 1 in [(4 + q) << (b - 2), (5 + q) << (b - 2)) share bin
 * 4b + q - 7.  Computed, not searched: this runs at the start of every
 * process, and a binary search per bin took 28,000 instructions, a tenth
 * of what mialloc adds to a process that does nothing (test-bins checks
 * the table against mia_bin_of). */
void mia_bins_init(void) {
  for (size_t bin = 1; bin <= 4; bin++) mia_bin_size[bin] = bin * 2 * MIA_WORD_SIZE;
  for (size_t bin = 5; bin <= MIA_BIN_COUNT; bin++) {
    size_t t = bin + 7, b = t >> 2, q = t & 3;
    mia_bin_size[bin] = ((5 + q) << (b - 2)) * MIA_WORD_SIZE;
  }
  mia_bin_size[MIA_BIN_HUGE] = MIA_LARGE_MAX + 1;
}

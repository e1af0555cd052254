/* bins.c -- the size-class table. */
#include "internal.h"

size_t mia_bin_size[MIA_BIN_HUGE + 1];

/* The block size of a bin is the largest size that maps to it. */
void mia_bins_init(void) {
  for (size_t w = 1; w <= MIA_LARGE_MAX / MIA_WORD_SIZE; w++) {
    uint8_t bin = mia_bin_of(w * MIA_WORD_SIZE);
    mia_bin_size[bin] = w * MIA_WORD_SIZE;
  }
  mia_bin_size[MIA_BIN_HUGE] = MIA_LARGE_MAX + 1;
}

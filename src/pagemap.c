/* pagemap.c -- from any address to the page that owns it, in O(1).
 *
 * Two levels: a static top array with one entry per 64 GiB of the 47-bit
 * user address space, and leaves with one page pointer per 64 KiB slice.
 * Top entries without a leaf point at one shared leaf that is all NULL, so
 * a lookup never branches on a missing leaf.  Leaves are reserved lazily (8 MiB of address space each,
 * RAM only for the parts that arenas use: 4 KiB per 32 MiB).
 */
#include "internal.h"

/* The shared empty leaf is zero-initialised static data (.bss): it needs
 * no set-up, so lookups work before initialisation (free of NULL or of a
 * foreign pointer before the first malloc), and reading it costs no RAM. */
static mia_page_t *mia_pagemap_empty_leaf[MIA_MAP_LEAF_COUNT];
mia_page_t **mia_pagemap_top[MIA_MAP_TOP_COUNT] = {
    [0 ... MIA_MAP_TOP_COUNT - 1] = mia_pagemap_empty_leaf};
static int mia_pagemap_lock;

#define MIA_LEAF_BYTES (MIA_MAP_LEAF_COUNT * sizeof(mia_page_t *))

/* Make sure every 64 GiB region overlapping [start, start+size) has a leaf. */
bool mia_pagemap_ensure(void *start, size_t size) {
  uintptr_t lo = (uintptr_t)start >> MIA_MAP_TOP_SHIFT;
  uintptr_t hi = ((uintptr_t)start + size - 1) >> MIA_MAP_TOP_SHIFT;
  if (hi >= MIA_MAP_TOP_COUNT) return false;
  bool ok = true;
  mia_lock(&mia_pagemap_lock);
  for (uintptr_t i = lo; i <= hi; i++) {
    if (mia_pagemap_top[i] != mia_pagemap_empty_leaf) continue;
    mia_page_t **leaf = mia_prim_reserve(MIA_LEAF_BYTES, 0, false);
    if (leaf == NULL) { ok = false; break; }
    /* publish after the (zeroed) leaf exists: lookups may race with us */
    __atomic_store_n(&mia_pagemap_top[i], leaf, __ATOMIC_RELEASE);
  }
  mia_unlock(&mia_pagemap_lock);
  return ok;
}

void mia_pagemap_set(void *start, size_t slices, mia_page_t *page) {
  uintptr_t u = (uintptr_t)start;
  for (size_t i = 0; i < slices; i++, u += MIA_SLICE_SIZE) {
    mia_page_t **leaf = mia_pagemap_top[u >> MIA_MAP_TOP_SHIFT];
    __atomic_store_n(&leaf[(u >> MIA_SLICE_SHIFT) & (MIA_MAP_LEAF_COUNT - 1)], page,
                     __ATOMIC_RELEASE);
  }
}

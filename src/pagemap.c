/* pagemap.c -- from any address to the page that owns it, in O(1).
 *
 * Two levels: a static top array with one entry per 64 GiB of the 47-bit
 * user address space, and leaves with one page pointer per 64 KiB slice.
 * Top entries without a leaf point at one shared leaf that is all NULL, so
 * a lookup never branches on a missing leaf.  Leaves are reserved lazily (8 MiB of address space each,
 * RAM only for the parts that arenas use: 4 KiB per 32 MiB; where arenas
 * commit on demand, only those parts are writable and charged).
 */
#include "internal.h"

/* The shared empty leaf reads as zero from the moment the library is
 * mapped: it needs no set-up, so lookups work before initialisation (free
 * of NULL or of a foreign pointer before the first malloc), and reading it
 * costs no RAM.  In .bss it would be writable while the loader maps it, and
 * the kernel charges writable private memory against RLIMIT_DATA: under
 * ulimit -d below about 9 MiB the library could not be loaded, nor any
 * program with it in /etc/ld.so.preload.  So it has a section of its own,
 * allocated but neither loaded nor writable, which src/empty-leaf.ld
 * gives a read-only segment.  Linked without the script (the unit tests,
 * the fuzz target) it lands after .bss, in the writable segment. */
__asm__(".pushsection .mia_empty_leaf,\"a\",@nobits\n"
        ".balign 4096\n"
        ".globl mia_pagemap_empty_leaf\n"
        ".hidden mia_pagemap_empty_leaf\n"
        ".type mia_pagemap_empty_leaf, @object\n"
        ".size mia_pagemap_empty_leaf, 8388608\n"
        "mia_pagemap_empty_leaf:\n"
        ".skip 8388608\n"
        ".popsection\n");
extern mia_page_t *mia_pagemap_empty_leaf[MIA_MAP_LEAF_COUNT] __attribute__((visibility("hidden")));
_Static_assert(sizeof mia_pagemap_empty_leaf == 8388608, "the empty leaf's size in the assembly above");
mia_page_t **mia_pagemap_top[MIA_MAP_TOP_COUNT] = {
    [0 ... MIA_MAP_TOP_COUNT - 1] = mia_pagemap_empty_leaf};
static mia_lock_t mia_pagemap_lock;

void mia_pagemap_fork(mia_fork_step_t step) { mia_lock_fork(&mia_pagemap_lock, step); }

#define MIA_LEAF_BYTES (MIA_MAP_LEAF_COUNT * sizeof(mia_page_t *))

/* defined by src/empty-leaf.ld: the leaf has its read-only segment */
extern char mia_empty_leaf_read_only[] __attribute__((weak, visibility("hidden")));

/* Linked without the script, the leaf is writable like .bss, charged against
 * the commit limit too: where arenas commit on demand, its pages become a
 * read-only mapping at the same address (reading the same zeros), which is
 * not charged.  Lookups racing with the swap read zeros either way. */
void mia_pagemap_init(void) {
  if (mia_empty_leaf_read_only != NULL || !mia_arena_commits_on_demand()) return;
  uintptr_t ps = mia_prim_page_size();
  uintptr_t lo = ((uintptr_t)mia_pagemap_empty_leaf + ps - 1) & ~(ps - 1);
  uintptr_t hi = ((uintptr_t)mia_pagemap_empty_leaf + sizeof mia_pagemap_empty_leaf) & ~(ps - 1);
  if (hi > lo) mia_prim_decommit((void *)lo, hi - lo, true);
}

/* Where arenas commit on demand, so do leaves: a leaf is mapped read-only
 * (every lookup may read any entry; reading costs no commit charge), and
 * the part that covers an arena is made writable when the arena comes. */
static bool leaf_commit(mia_page_t **leaf, uintptr_t from, uintptr_t to) {
  size_t ps = mia_prim_page_size();
  uintptr_t lo = (uintptr_t)&leaf[(from >> MIA_SLICE_SHIFT) & (MIA_MAP_LEAF_COUNT - 1)] & ~(ps - 1);
  uintptr_t hi = ((uintptr_t)&leaf[(to >> MIA_SLICE_SHIFT) & (MIA_MAP_LEAF_COUNT - 1)] + ps) & ~(ps - 1);
  return mia_prim_commit((void *)lo, hi - lo);
}

/* Make sure every 64 GiB region overlapping [start, start+size) has a leaf,
 * writable where it covers the range. */
bool mia_pagemap_ensure(void *start, size_t size) {
  uintptr_t first = (uintptr_t)start, last = first + size - 1;
  uintptr_t lo = first >> MIA_MAP_TOP_SHIFT, hi = last >> MIA_MAP_TOP_SHIFT;
  if (hi >= MIA_MAP_TOP_COUNT) return false;
  bool on_demand = mia_arena_commits_on_demand();
  bool ok = true;
  mia_lock(&mia_pagemap_lock);
  for (uintptr_t i = lo; ok && i <= hi; i++) {
    mia_page_t **leaf = mia_pagemap_top[i];
    if (leaf == mia_pagemap_empty_leaf) {
      leaf = on_demand ? mia_prim_reserve_uncommitted(MIA_LEAF_BYTES, 0, true)
                       : mia_prim_reserve(MIA_LEAF_BYTES, 0, false);
      if (leaf == NULL) { ok = false; break; }
      /* publish after the (zeroed) leaf exists: lookups may race with us */
      __atomic_store_n(&mia_pagemap_top[i], leaf, __ATOMIC_RELEASE);
    }
    uintptr_t region = i << MIA_MAP_TOP_SHIFT;
    uintptr_t region_last = region + ((uintptr_t)1 << MIA_MAP_TOP_SHIFT) - 1;
    if (on_demand) ok = leaf_commit(leaf, first > region ? first : region, last < region_last ? last : region_last);
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

/* overflow-page.c page|huge|under -- a sequential overflow off the last
 * block of a page (blocks of 4 KiB), byte by byte until the write faults
 * or reaches the end of the 64 KiB slice; or off the end of a huge block
 * (1 MiB), until the write faults or has run a segment (4 MiB) past it
 * (a page past it in debug builds, whose canary reports it at free); or
 * (under) an underflow down from the first block of a page whose slice
 * follows another page of ours or the segment's metadata.
 * secure builds: the page (or huge span) ends with a guard page, and the
 * segment's metadata is followed by one, so the first byte written past
 * the page's room, or the huge block's span (which runs on past its usable
 * size to the end of its last segment), traps (SIGSEGV) and the handler
 * names the page's last block, the huge block, or the first block the
 * underflow started from.  Other builds have no such guard: the battery
 * does not run this. */
#include "misuse.h"

static void overflow_from(unsigned char *from, unsigned char *limit) {
  volatile unsigned char *w = from;
  misuse_say("writing from %p up to %p", (void *)from, (void *)limit);
  while ((unsigned char *)w < limit) *w++ = 0x6b;
  misuse_say("wrote %zu bytes past the block", (size_t)((unsigned char *)w - from));
}

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  bool huge = argc > 1 && strcmp(argv[1], "huge") == 0;
  if (huge) {
    size_t size = ((size_t)1 << 20) + 100;
    unsigned char *p = mi_malloc(size);
    size_t usable = mi_usable_size(p);
    misuse_say("victim %p size %zu usable %zu", (void *)p, size, usable);
    /* debug builds (usable == size): a page past the canary after the
     * block, which free then reports; others: through the span's room */
    overflow_from(p + size, usable == size ? p + usable + 4096 : p + size + ((size_t)4 << 20));
    mi_free(p);
    return misuse_done();
  }
  /* the last block of a page that holds only blocks of ours and as many
   * as any page does (a full one): the highest of them in its slice */
  enum { COUNT = 64, SIZE = 4096 };
  unsigned char *blocks[COUNT];
  for (int i = 0; i < COUNT; i++) blocks[i] = mi_malloc(SIZE);
  int per_slice[COUNT], most = 0;
  for (int i = 0; i < COUNT; i++) {
    per_slice[i] = 0;
    for (int j = 0; j < COUNT; j++)
      if (((uintptr_t)blocks[j] >> 16) == ((uintptr_t)blocks[i] >> 16)) per_slice[i]++;
    if (per_slice[i] > most) most = per_slice[i];
  }
  unsigned char *victim = NULL;
  for (int i = 0; i < COUNT; i++) {
    if (per_slice[i] != most || most < 2) continue;
    bool same_slice = victim != NULL && ((uintptr_t)blocks[i] >> 16) == ((uintptr_t)victim >> 16);
    if (victim == NULL || (same_slice && blocks[i] > victim)) victim = blocks[i];
  }
  if (argc > 1 && strcmp(argv[1], "under") == 0) {
    /* a block at the start of its slice, whose slice is the segment's
     * first page or follows one of the other blocks' slices */
    unsigned char *first = NULL;
    for (int i = 0; i < COUNT; i++) {
      uintptr_t b = (uintptr_t)blocks[i];
      if ((b & 0xffff) != 0) continue;
      bool below = (b & (((uintptr_t)4 << 20) - 1)) == 0x10000;
      for (int j = 0; j < COUNT && !below; j++) below = ((uintptr_t)blocks[j] >> 16) == (b >> 16) - 1;
      if (below) first = blocks[i];
    }
    if (first == NULL) {
      misuse_say("no block at the start of a page below which lies a page of ours");
      return 1;
    }
    misuse_say("victim %p size %d", (void *)first, SIZE);
    volatile unsigned char *w = first;
    while ((unsigned char *)w > first - 0x10000) *--w = 0x6b;
    misuse_say("wrote %zu bytes before the block", (size_t)(first - (unsigned char *)w));
    return misuse_done();
  }
  if (victim == NULL) {
    misuse_say("no full page among %d blocks", COUNT);
    return 1;
  }
  misuse_say("victim %p size %d", (void *)victim, SIZE);
  uintptr_t slice_end = ((uintptr_t)victim & ~(uintptr_t)0xffff) + 0x10000;
  overflow_from(victim + SIZE, (unsigned char *)slice_end);
  for (int i = 0; i < COUNT; i++) mi_free(blocks[i]);
  return misuse_done();
}

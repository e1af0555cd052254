/* override-info.c -- glibc's calls that ask the heap about itself
 * (malloc_trim, mallinfo, mallinfo2, malloc_stats, malloc_info), answered
 * from mialloc's own figures.  Left to glibc, they would describe glibc's
 * heap, which a preloaded program no longer uses: all zeros.
 *
 * The figures, in glibc's terms: the "arena" is the memory held outside
 * huge blocks (committed), its "in use" part the bytes of the blocks handed
 * out there (a walk over the pages: glibc walks its bins too), and the
 * "mmapped" blocks are the live huge ones, which glibc would also have
 * mapped on their own.  glibc's free-chunk counts become, per size class,
 * the blocks a page holds and has not handed out.
 */
#include "internal.h"

#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>

/* malloc_trim: give back what can be given back; 1 means memory was
 * (possibly) released, as glibc answers. */
mia_export int malloc_trim(size_t pad) {
  (void)pad;
  mi_collect(true);
  return 1;
}

static size_t mia_nonnegative(int64_t v) { return v > 0 ? (size_t)v : 0; }

/* mallinfo2 from a page walk already made */
static void mia_fill_mallinfo2(struct mallinfo2 *mi, const mia_heap_usage_t *usage) {
  memset(mi, 0, sizeof *mi);
  size_t huge = mia_nonnegative(mia_stats_global.huge.current);
  size_t committed = mia_nonnegative(mia_stats_global.committed.current - (int64_t)huge);
  size_t live = usage->live_bytes;
  mi->arena = committed > live ? committed : live;
  mi->uordblks = live;
  mi->fordblks = mi->arena - live;
  mi->hblks = mia_nonnegative(mia_stats_global.huge_blocks.current);
  mi->hblkhd = huge;
}

mia_export struct mallinfo2 mallinfo2(void) {
  mia_heap_usage_t usage;
  struct mallinfo2 mi;
  mia_stats_heap_usage(&usage);
  mia_fill_mallinfo2(&mi, &usage);
  return mi;
}

static int mia_clamp_int(size_t v) { return v > 0x7fffffff ? 0x7fffffff : (int)v; }

/* glibc's older form, int-sized (it clamps rather than wrap) */
static struct mallinfo mia_mallinfo(void) {
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo m;
  memset(&m, 0, sizeof m);
  m.arena = mia_clamp_int(m2.arena);
  m.hblks = mia_clamp_int(m2.hblks);
  m.hblkhd = mia_clamp_int(m2.hblkhd);
  m.uordblks = mia_clamp_int(m2.uordblks);
  m.fordblks = mia_clamp_int(m2.fordblks);
  return m;
}

mia_export struct mallinfo mallinfo(void) { return mia_mallinfo(); }

/* glibc exports this name too; a few programs call it */
mia_export struct mallinfo __libc_mallinfo(void) { return mia_mallinfo(); }

/* malloc_stats: glibc's report on stderr, line for line, with one arena:
 * programs and people that read it find the lines they know. */
mia_export void malloc_stats(void) {
  struct mallinfo2 mi = mallinfo2();
  size_t max_regions = mia_nonnegative(mia_stats_global.huge_blocks.peak);
  size_t max_bytes = mia_nonnegative(mia_stats_global.huge.peak);
  fprintf(stderr,
          "Arena 0:\n"
          "system bytes     = %10zu\n"
          "in use bytes     = %10zu\n"
          "Total (incl. mmap):\n"
          "system bytes     = %10zu\n"
          "in use bytes     = %10zu\n"
          "max mmap regions = %10zu\n"
          "max mmap bytes   = %10zu\n",
          mi.arena, mi.uordblks, mi.arena + mi.hblkhd, mi.uordblks + mi.hblkhd, max_regions, max_bytes);
}

/* the <sizes> list: one line per size class with free blocks */
static size_t mia_info_sizes(FILE *fp, const mia_heap_usage_t *usage) {
  size_t count = 0;
  for (size_t bin = 1; bin <= MIA_BIN_COUNT; bin++) {
    size_t n = usage->bin_free[bin];
    if (n == 0) continue;
    size_t from = bin == 1 ? 1 : mia_bin_size[bin - 1] + 1;
    size_t to = mia_bin_size[bin];
    fprintf(fp, "<size from=\"%zu\" to=\"%zu\" total=\"%zu\" count=\"%zu\"/>\n", from, to, n * to, n);
    count += n;
  }
  return count;
}

/* malloc_info: glibc's XML document (version 1) with one heap.  The free
 * blocks per size class fill <sizes>; "rest" is all the memory held and
 * not handed out, "aspace total" the address space reserved, "mprotect"
 * the part of it committed.  Options other than 0 are refused, as glibc
 * refuses them. */
mia_export int malloc_info(int options, FILE *fp) {
  if (options != 0) return EINVAL;
  if (fp == NULL) return EINVAL;
  mia_heap_usage_t usage;
  struct mallinfo2 mi;
  mia_stats_heap_usage(&usage);
  mia_fill_mallinfo2(&mi, &usage);
  size_t max = mia_nonnegative(mia_stats_global.committed.peak);
  size_t reserved = mia_nonnegative(mia_stats_global.reserved.current);
  fputs("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", fp);
  size_t free_count = mia_info_sizes(fp, &usage);
  fputs("</sizes>\n", fp);
  for (int whole = 0; whole <= 1; whole++) {
    fprintf(fp, "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
                "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n",
            free_count, mi.fordblks);
    if (whole) fprintf(fp, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n", mi.hblks, mi.hblkhd);
    fprintf(fp, "<system type=\"current\" size=\"%zu\"/>\n"
                "<system type=\"max\" size=\"%zu\"/>\n"
                "<aspace type=\"total\" size=\"%zu\"/>\n"
                "<aspace type=\"mprotect\" size=\"%zu\"/>\n",
            mi.arena, max > mi.arena ? max : mi.arena, reserved, mi.arena);
    fputs(whole ? "</malloc>\n" : "</heap>\n", fp);
  }
  return 0;
}

/* annotate.c -- tell Valgrind's memcheck (--enable-valgrind) and
 * AddressSanitizer (--enable-asan) which bytes are blocks the program may
 * use, so those tools report reads and writes outside them, uses after
 * free and leaks in mialloc's memory as they do for glibc's malloc.
 *
 * A handed-out block is [p, p + size): everything after it up to the end of
 * its block is off limits.  A freed block is off limits except its first
 * word, which holds mialloc's free-list link.
 */
#include "internal.h"

#if MIALLOC_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif
#if MIALLOC_ASAN
#include <sanitizer/asan_interface.h>
#endif

#if MIALLOC_VALGRIND || MIALLOC_ASAN

/* The end of the block holding p (of a huge block's span: the room past
 * its usable size is no one's either). */
static uint8_t *mia_annot_block(const mia_page_t *page, const void *p, uint8_t **end) {
  uint8_t *block = mia_page_block_start(page, p);
  *end = page->is_huge ? mia_huge_span_end(page) : block + page->block_size;
  return block;
}

void mia_annot_alloc(void *p, size_t size, bool zero) {
  mia_page_t *page = mia_page_of(p);
  if (page == NULL || page->is_guarded) return;
  uint8_t *end;
  (void)mia_annot_block(page, p, &end);
  uint8_t *stop = (uint8_t *)p + size;
  (void)zero;
#if MIALLOC_VALGRIND
  VALGRIND_MALLOCLIKE_BLOCK(p, size, 0, zero);
  if (end > stop) VALGRIND_MAKE_MEM_NOACCESS(stop, (size_t)(end - stop));
#endif
#if MIALLOC_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, size);
  if (end > stop) ASAN_POISON_MEMORY_REGION(stop, (size_t)(end - stop));
#endif
}

void mia_annot_free(void *p) {
  mia_page_t *page = mia_page_of(p);
  if (page == NULL || page->is_guarded) return;
  uint8_t *end;
  uint8_t *block = mia_annot_block(page, p, &end);
#if MIALLOC_VALGRIND
  VALGRIND_FREELIKE_BLOCK(p, 0);
  /* the link word mialloc writes next */
  VALGRIND_MAKE_MEM_DEFINED(block, sizeof(mia_block_t));
#endif
#if MIALLOC_ASAN
  ASAN_POISON_MEMORY_REGION(block, (size_t)(end - block));
  ASAN_UNPOISON_MEMORY_REGION(block, sizeof(mia_block_t));
#endif
}

/* A zeroing allocation in a tools build, once the block is declared: the
 * slack past size is zeroed too, since a later mi_rezalloc zeroes only
 * from the usable size on, and stays inaccessible. */
void mia_annot_zero(void *p, size_t size) {
  memset(p, 0, size);
  size_t usable = mia_usable_size(p);
  if (usable <= size) return;
  uint8_t *slack = (uint8_t *)p + size;
  size_t n = usable - size;
  mia_annot_accessible(slack, n);
  memset(slack, 0, n);
#if MIALLOC_VALGRIND
  VALGRIND_MAKE_MEM_NOACCESS(slack, n);
#endif
#if MIALLOC_ASAN
  ASAN_POISON_MEMORY_REGION(slack, n);
#endif
}

/* mi_heap_destroy frees a live block wholesale (blocks of pages with
 * offset allocations are known only by their start: those are skipped). */
bool mia_annot_destroyed_block(mia_page_t *page, void *block, void *arg) {
  (void)arg;
  if (mia_page_flags(page) & MIA_PAGE_HAS_ALIGNED) return true;
  void *p = mia_prof_user_pointer(page, block);
#if MIALLOC_VALGRIND
  VALGRIND_FREELIKE_BLOCK(p, 0);
#else
  (void)p;
#endif
  return true;
}

/* Make n bytes at p accessible and defined: memory that becomes
 * mialloc's own again (a new page, segments from an arena -- fresh OS
 * memory is zero, and mialloc relies on that), or a live block mialloc
 * itself is about to read (realloc's copy may cover its unused tail). */
void mia_annot_accessible(void *p, size_t n) {
#if MIALLOC_VALGRIND
  VALGRIND_MAKE_MEM_DEFINED(p, n);
#endif
#if MIALLOC_ASAN
  ASAN_UNPOISON_MEMORY_REGION(p, n);
#endif
}

#endif

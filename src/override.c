/* override.c -- the standard C allocation entry points, so that linking or
 * preloading libmialloc replaces glibc's malloc for the whole process.
 *
 * Where the semantics are identical the glibc name is an alias of the mi_
 * function (no extra jump); where glibc differs (realloc(p, 0) frees) a thin
 * wrapper keeps glibc's behaviour, because preloaded programs expect it.
 */
#include "fastpath.h"

#include <malloc.h>
#include <stdlib.h>

/* the hot three carry the inline fast path; aliases give the other names */
mia_export void *malloc(size_t size) { return mia_malloc_inline(size); }
mia_export void *calloc(size_t count, size_t size) { return mia_calloc_inline(count, size); }
mia_export void free(void *p) { mia_free_inline(p); }

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9
#define mia_alias(target) __attribute__((alias(#target), copy(target), visibility("default"), used))
#else
#define mia_alias(target) __attribute__((alias(#target), visibility("default"), used))
#endif
void cfree(void *p) mia_alias(free);
void __libc_free(void *p) mia_alias(free);
void __libc_cfree(void *p) mia_alias(free);
void *__libc_malloc(size_t size) mia_alias(malloc);
void *__libc_calloc(size_t count, size_t size) mia_alias(calloc);

mia_export void *valloc(size_t size) { return mi_valloc(size); }
mia_export void *pvalloc(size_t size) { return mi_pvalloc(size); }
mia_export void *memalign(size_t alignment, size_t size) { return mi_memalign(alignment, size); }
mia_export void *aligned_alloc(size_t alignment, size_t size) { return mi_aligned_alloc(alignment, size); }
mia_export int posix_memalign(void **p, size_t alignment, size_t size) {
  return mi_posix_memalign(p, alignment, size);
}
mia_export size_t malloc_usable_size(void *p) { return mia_usable_size(p); }

/* glibc: realloc(p, 0) with p != NULL frees p and returns NULL. */
mia_export void *realloc(void *p, size_t size) {
  if (size == 0 && p != NULL) {
    mi_free(p);
    return NULL;
  }
  return mi_realloc(p, size);
}

mia_export void *reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) return mia_count_overflow(count, size);
  return realloc(p, total);
}

/* glibc-internal names that some programs and libraries call directly. */
void *__libc_valloc(size_t size) mia_alias(valloc);
void *__libc_pvalloc(size_t size) mia_alias(pvalloc);
void *__libc_memalign(size_t alignment, size_t size) mia_alias(memalign);
int __posix_memalign(void **p, size_t alignment, size_t size) mia_alias(posix_memalign);
mia_export void *__libc_realloc(void *p, size_t size) { return realloc(p, size); }
mia_export void *__libc_reallocarray(void *p, size_t count, size_t size) {
  return reallocarray(p, count, size);
}

/* malloc_trim: give back what can be given back; 1 means memory was
 * (possibly) released, as glibc answers. */
mia_export int malloc_trim(size_t pad) {
  (void)pad;
  mi_collect(true);
  return 1;
}

/* mallinfo/mallinfo2 answer from mialloc's own numbers, in glibc's terms:
 * arena is the memory held outside huge blocks (committed), uordblks the
 * bytes of the blocks handed out there (a walk over the pages: glibc's
 * mallinfo walks its bins too), fordblks the rest; hblks and hblkhd are
 * the live huge blocks, which glibc would have mapped on their own.  The
 * free-chunk counts have no counterpart and stay 0. */
static void mia_fill_mallinfo2(struct mallinfo2 *mi) {
  memset(mi, 0, sizeof *mi);
  int64_t huge = mia_stats_global.huge.current > 0 ? mia_stats_global.huge.current : 0;
  int64_t committed = mia_stats_global.committed.current - huge;
  size_t live = mia_stats_live_bytes();
  mi->arena = committed > 0 && (size_t)committed > live ? (size_t)committed : live;
  mi->uordblks = live;
  mi->fordblks = mi->arena - live;
  mi->hblks = mia_stats_global.huge_blocks.current > 0 ? (size_t)mia_stats_global.huge_blocks.current : 0;
  mi->hblkhd = (size_t)huge;
}

mia_export struct mallinfo2 mallinfo2(void) {
  struct mallinfo2 mi;
  mia_fill_mallinfo2(&mi);
  return mi;
}

static int mia_clamp_int(size_t v) { return v > 0x7fffffff ? 0x7fffffff : (int)v; }

mia_export struct mallinfo mallinfo(void) {
  struct mallinfo2 m2;
  struct mallinfo m;
  mia_fill_mallinfo2(&m2);
  memset(&m, 0, sizeof m);
  m.arena = mia_clamp_int(m2.arena);
  m.hblks = mia_clamp_int(m2.hblks);
  m.hblkhd = mia_clamp_int(m2.hblkhd);
  m.uordblks = mia_clamp_int(m2.uordblks);
  m.fordblks = mia_clamp_int(m2.fordblks);
  return m;
}

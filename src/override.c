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

/* mialloc-override.h -- send a source file's allocation calls to mialloc
 * by name, without preloading or relinking: every standard and common
 * allocation function becomes a macro for its mi_ counterpart.
 *
 * Include it after the system headers (a header declaring malloc after it
 * would declare mi_malloc instead) and only in code whose blocks are freed
 * by code that includes it too, or by mialloc: a block from these macros
 * handed to another library's free() goes to whatever malloc the process
 * uses.  Preloading libmialloc, or linking it, replaces malloc everywhere
 * and needs none of this.
 */
#ifndef MIALLOC_OVERRIDE_H
#define MIALLOC_OVERRIDE_H

#include <mialloc.h>

#define malloc(n)                 mi_malloc(n)
#define calloc(n, c)              mi_calloc(n, c)
#define realloc(p, n)             mi_realloc(p, n)
#define free(p)                   mi_free(p)

#define strdup(s)                 mi_strdup(s)
#define strndup(s, n)             mi_strndup(s, n)
#define realpath(f, n)            mi_realpath(f, n)

#define malloc_size(p)            mi_usable_size(p)
#define malloc_good_size(sz)      mi_malloc_good_size(sz)
#define malloc_usable_size(p)     mi_usable_size(p)
#define cfree(p)                  mi_free(p)

#define valloc(n)                 mi_valloc(n)
#define pvalloc(n)                mi_pvalloc(n)
#define reallocarray(p, s, n)     mi_reallocarray(p, s, n)
#define reallocarr(p, s, n)       mi_reallocarr(p, s, n)
#define memalign(a, n)            mi_memalign(a, n)
#define aligned_alloc(a, n)       mi_aligned_alloc(a, n)
#define posix_memalign(p, a, n)   mi_posix_memalign(p, a, n)
#define _posix_memalign(p, a, n)  mi_posix_memalign(p, a, n)

/* the Microsoft C runtime's names */
#define _expand(p, n)             mi__expand(p, n)
#define _msize(p)                 mi_usable_size(p)
#define _recalloc(p, n, c)        mi_recalloc(p, n, c)
#define _strdup(s)                mi_strdup(s)
#define _strndup(s, n)            mi_strndup(s, n)
#define _wcsdup(s)                mi_wcsdup(s)
#define _mbsdup(s)                mi_mbsdup(s)
#define _dupenv_s(b, n, v)        mi_dupenv_s(b, n, v)
#define _wdupenv_s(b, n, v)       mi_wdupenv_s(b, n, v)
#define _aligned_malloc(n, a)                  mi_malloc_aligned(n, a)
#define _aligned_realloc(p, n, a)              mi_realloc_aligned(p, n, a)
#define _aligned_recalloc(p, s, n, a)          mi_aligned_recalloc(p, s, n, a)
#define _aligned_msize(p, a, o)                mi_usable_size(p)
#define _aligned_free(p)                       mi_free(p)
#define _aligned_offset_malloc(n, a, o)        mi_malloc_aligned_at(n, a, o)
#define _aligned_offset_realloc(p, n, a, o)    mi_realloc_aligned_at(p, n, a, o)
#define _aligned_offset_recalloc(p, s, n, a, o) mi_aligned_offset_recalloc(p, s, n, a, o)

#endif /* MIALLOC_OVERRIDE_H */

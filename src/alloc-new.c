/* alloc-new.c -- C++ allocation semantics: operator new never returns NULL.
 *
 * On failure it calls the program's new-handler and retries; with no
 * handler it throws std::bad_alloc.  This file is C, so libstdc++ is reached
 * through weak references: a C program that preloads mialloc does not pull
 * in the C++ runtime, and a C++ program (the only kind that calls operator
 * new) has it loaded.  Built with -fexceptions so the exception can unwind
 * through these frames.
 */
#include "internal.h"
#include "tls.h"

typedef void (*mia_new_handler_t)(void);
extern mia_new_handler_t _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void *__cxa_allocate_exception(size_t) __attribute__((weak));
extern void __cxa_throw(void *, void *, void (*)(void *)) __attribute__((weak));
extern char _ZTISt9bad_alloc[] __attribute__((weak));        /* typeinfo */
extern void *_ZTVSt9bad_alloc[] __attribute__((weak));       /* vtable */
extern void _ZNSt9bad_allocD1Ev(void *) __attribute__((weak)); /* ~bad_alloc */

static void mia_throw_bad_alloc(void) {
  if (__cxa_allocate_exception && __cxa_throw && _ZTISt9bad_alloc && _ZTVSt9bad_alloc &&
      _ZNSt9bad_allocD1Ev) {
    void **exc = __cxa_allocate_exception(sizeof(void *));
    /* a bad_alloc object is just its vtable pointer, which points past the
     * offset-to-top and typeinfo slots */
    *exc = &_ZTVSt9bad_alloc[2];
    __cxa_throw(exc, _ZTISt9bad_alloc, _ZNSt9bad_allocD1Ev);
  }
  mia_error(ENOMEM, "out of memory in operator new and no C++ runtime to throw std::bad_alloc\n");
  mia_prim_abort();
}

/* false: give up (nothrow forms return NULL) */
static bool mia_try_new_handler(bool nothrow) {
  mia_new_handler_t handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
  if (handler == NULL) {
    if (!nothrow) mia_throw_bad_alloc();
    return false;
  }
  handler();
  return true;
}

/* heap NULL: the calling thread's default heap */
static void *mia_new_retry(mi_heap_t *heap, size_t size, size_t alignment, bool nothrow) {
  for (;;) {
    void *p = heap != NULL ? mi_heap_malloc(heap, size)
              : alignment == 0 ? mi_malloc(size) : mi_malloc_aligned(size, alignment);
    if (p != NULL) return p;
    if (!mia_try_new_handler(nothrow)) return NULL;
  }
}

/* count * size; on overflow the new-handler protocol runs once (and
 * throws without a handler) and the caller returns NULL */
static bool mia_new_total(size_t count, size_t size, size_t *total) {
  if (!__builtin_mul_overflow(count, size, total)) return true;
  mia_try_new_handler(false);
  return false;
}

mia_export void *mi_new(size_t size) {
  void *p = mi_malloc(size);
  return mia_likely(p != NULL) ? p : mia_new_retry(NULL, size, 0, false);
}

mia_export void *mi_new_nothrow(size_t size) {
  void *p = mi_malloc(size);
  return mia_likely(p != NULL) ? p : mia_new_retry(NULL, size, 0, true);
}

mia_export void *mi_new_aligned(size_t size, size_t alignment) {
  void *p = mi_malloc_aligned(size, alignment);
  return mia_likely(p != NULL) ? p : mia_new_retry(NULL, size, alignment, false);
}

mia_export void *mi_new_aligned_nothrow(size_t size, size_t alignment) {
  void *p = mi_malloc_aligned(size, alignment);
  return mia_likely(p != NULL) ? p : mia_new_retry(NULL, size, alignment, true);
}

mia_export void *mi_new_n(size_t count, size_t size) {
  size_t total;
  return mia_new_total(count, size, &total) ? mi_new(total) : NULL;
}

mia_export void *mi_new_realloc(void *p, size_t newsize) {
  for (;;) {
    void *q = mi_realloc(p, newsize);
    if (q != NULL) return q;
    if (!mia_try_new_handler(false)) return NULL;
  }
}

mia_export void *mi_new_reallocn(void *p, size_t count, size_t size) {
  size_t total;
  return mia_new_total(count, size, &total) ? mi_new_realloc(p, total) : NULL;
}

/* From a given heap (the heap STL allocators of mialloc-stl.h). */
mia_export void *mi_heap_alloc_new(mi_heap_t *heap, size_t size) {
  void *p = mi_heap_malloc(heap, size);
  return mia_likely(p != NULL) ? p : mia_new_retry(heap, size, 0, false);
}

mia_export void *mi_heap_alloc_new_n(mi_heap_t *heap, size_t count, size_t size) {
  size_t total;
  return mia_new_total(count, size, &total) ? mi_heap_alloc_new(heap, total) : NULL;
}

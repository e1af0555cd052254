/* alloc-new.c -- C++ allocation semantics: operator new never returns NULL.
 *
 * On failure it calls the program's new-handler and retries; with no
 * handler it throws std::bad_alloc.  This file is C, so libstdc++ is reached
 * through weak references: a C program that preloads mialloc does not pull
 * in the C++ runtime, and a C++ program (the only kind that calls operator
 * new) has it loaded.  Built with -fexceptions so the exception can unwind
 * through these frames.
 */
#define _GNU_SOURCE 1   /* dladdr, RTLD_NEXT, RTLD_DEFAULT */
#include "internal.h"
#include "tls.h"

#include <dlfcn.h>
#include <stdatomic.h>

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

/* A new-handler may throw std::bad_alloc, and a nothrow form must then
 * return NULL; C cannot catch.  The C++ runtime's own nothrow operator new
 * (libstdc++ since GCC 9, libc++) calls the plain one inside a try block:
 * where the plain one the process uses is mialloc's, the handler loop runs
 * in there and the runtime turns the throw into NULL.  Resolved once, on
 * the first failure that finds a handler installed. */
typedef void *(*mia_cxx_new_nothrow_t)(size_t, const void *);
typedef void *(*mia_cxx_new_aligned_nothrow_t)(size_t, size_t, const void *);
static void *_Atomic mia_cxx_nothrow[2];
static _Atomic bool mia_cxx_nothrow_resolved;

static void *mia_cxx_nothrow_lookup(const char *nothrow_name, const char *plain_name) {
  void *runtime = dlsym(RTLD_NEXT, nothrow_name);
  void *plain = dlsym(RTLD_DEFAULT, plain_name);
  Dl_info ours, theirs;
  if (runtime == NULL || plain == NULL || !dladdr((void *)mia_cxx_nothrow_lookup, &ours) ||
      !dladdr(plain, &theirs) || ours.dli_fbase != theirs.dli_fbase)
    return NULL;
  return runtime;
}

static void *mia_new_nothrow_retry(size_t size, size_t alignment) {
  mia_new_handler_t handler = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
  if (handler == NULL) return NULL;
  if (!atomic_load_explicit(&mia_cxx_nothrow_resolved, memory_order_acquire)) {
    atomic_store(&mia_cxx_nothrow[0], mia_cxx_nothrow_lookup("_ZnwmRKSt9nothrow_t", "_Znwm"));
    atomic_store(&mia_cxx_nothrow[1],
                 mia_cxx_nothrow_lookup("_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnwmSt11align_val_t"));
    atomic_store_explicit(&mia_cxx_nothrow_resolved, true, memory_order_release);
  }
  static const char tag = 0;   /* std::nothrow_t is empty: any address does */
  void *runtime = atomic_load(&mia_cxx_nothrow[alignment != 0]);
  if (runtime != NULL)
    return alignment == 0 ? ((mia_cxx_new_nothrow_t)runtime)(size, &tag)
                          : ((mia_cxx_new_aligned_nothrow_t)runtime)(size, alignment, &tag);
  /* no runtime to catch for us: a throwing handler's exception goes on up */
  return mia_new_retry(NULL, size, alignment, true);
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
  return mia_likely(p != NULL) ? p : mia_new_nothrow_retry(size, 0);
}

mia_export void *mi_new_aligned(size_t size, size_t alignment) {
  void *p = mi_malloc_aligned(size, alignment);
  return mia_likely(p != NULL) ? p : mia_new_retry(NULL, size, alignment, false);
}

mia_export void *mi_new_aligned_nothrow(size_t size, size_t alignment) {
  void *p = mi_malloc_aligned(size, alignment);
  return mia_likely(p != NULL) ? p : mia_new_nothrow_retry(size, alignment);
}

mia_export void *mi_new_n(size_t count, size_t size) {
  size_t total;
  return mia_new_total(count, size, &total) ? mi_new(total) : NULL;
}

mia_export void *mi_new_realloc(void *p, size_t newsize) {
  for (;;) {
    void *q = mi_realloc(p, newsize);
    if (q != NULL) return q;
    /* only a lack of memory is the new handler's business, not a p that
     * is no live block (EINVAL, reported) */
    if (errno != ENOMEM || !mia_try_new_handler(false)) return NULL;
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

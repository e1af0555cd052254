/* override-cxx.c -- the C++ operator new/delete family, defined by their
 * Itanium-ABI mangled names so the library needs no C++ compiler or
 * runtime.  Covers plain, array, nothrow, sized (C++14) and aligned (C++17)
 * forms.  size_t mangles as 'm' on LP64. */
#include "fastpath.h"

#if defined(__GNUC__) && !defined(__clang__) && __GNUC__ >= 9
#define mia_alias(target) __attribute__((alias(#target), copy(target), visibility("default"), used))
#else
#define mia_alias(target) __attribute__((alias(#target), visibility("default"), used))
#endif

/* delete of any form is free: the fast path inline, the rest aliases */
mia_export void _ZdlPv(void *p) { mia_free_inline(p); }

typedef struct { char unused; } mia_nothrow_t;

/* new */
mia_export void *_Znwm(size_t n) {
  void *p = mia_malloc_fast_only(n);
  return mia_likely(p != NULL) ? p : mi_new(n);
}
void *_Znam(size_t n) mia_alias(_Znwm);
mia_export void *_ZnwmRKSt9nothrow_t(size_t n, const mia_nothrow_t *tag) { (void)tag; return mi_new_nothrow(n); }
mia_export void *_ZnamRKSt9nothrow_t(size_t n, const mia_nothrow_t *tag) { (void)tag; return mi_new_nothrow(n); }
mia_export void *_ZnwmSt11align_val_t(size_t n, size_t al) { return mi_new_aligned(n, al); }
void *_ZnamSt11align_val_t(size_t n, size_t al) mia_alias(_ZnwmSt11align_val_t);
mia_export void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const mia_nothrow_t *tag) {
  (void)tag;
  return mi_new_aligned_nothrow(n, al);
}
mia_export void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, const mia_nothrow_t *tag) {
  (void)tag;
  return mi_new_aligned_nothrow(n, al);
}

/* delete */
void _ZdaPv(void *p) mia_alias(_ZdlPv);
mia_export void _ZdlPvm(void *p, size_t n) { (void)n; mia_free_inline(p); }
void _ZdaPvm(void *p, size_t n) mia_alias(_ZdlPvm);
mia_export void _ZdlPvRKSt9nothrow_t(void *p, const mia_nothrow_t *tag) { (void)tag; mi_free(p); }
mia_export void _ZdaPvRKSt9nothrow_t(void *p, const mia_nothrow_t *tag) { (void)tag; mi_free(p); }
mia_export void _ZdlPvSt11align_val_t(void *p, size_t al) { (void)al; mia_free_inline(p); }
void _ZdaPvSt11align_val_t(void *p, size_t al) mia_alias(_ZdlPvSt11align_val_t);
mia_export void _ZdlPvmSt11align_val_t(void *p, size_t n, size_t al) {
  (void)n;
  (void)al;
  mia_free_inline(p);
}
void _ZdaPvmSt11align_val_t(void *p, size_t n, size_t al) mia_alias(_ZdlPvmSt11align_val_t);
mia_export void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const mia_nothrow_t *tag) {
  (void)al;
  (void)tag;
  mi_free(p);
}
mia_export void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const mia_nothrow_t *tag) {
  (void)al;
  (void)tag;
  mi_free(p);
}

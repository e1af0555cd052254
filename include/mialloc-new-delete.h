/* mialloc-new-delete.h -- define the program's global operator new and
 * delete (every form: plain, array, nothrow, sized, aligned) on mialloc.
 *
 * Include it in exactly one C++ source file of the program.  Where the
 * program links or preloads libmialloc this is already done by the
 * library (it exports the operators); the header is for builds where the
 * library's operators are not the ones chosen, such as a static link whose
 * C++ runtime comes first, and for code written for the reference
 * allocator's header of the same purpose.
 */
#ifndef MIALLOC_NEW_DELETE_H
#define MIALLOC_NEW_DELETE_H

#if defined(__cplusplus)
#include <cstddef>
#include <new>
#include <mialloc.h>

/* A new-handler may throw std::bad_alloc: the nothrow forms return
 * nullptr then. */
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS)
#define MIALLOC_NOTHROW_NEW_(expr) \
  try {                            \
    return (expr);                 \
  } catch (...) {                  \
    return nullptr;                \
  }
#else
#define MIALLOC_NOTHROW_NEW_(expr) return (expr);
#endif

void operator delete(void *p) noexcept { mi_free(p); }
void operator delete[](void *p) noexcept { mi_free(p); }
void operator delete(void *p, const std::nothrow_t &) noexcept { mi_free(p); }
void operator delete[](void *p, const std::nothrow_t &) noexcept { mi_free(p); }

void *operator new(std::size_t n) noexcept(false) { return mi_new(n); }
void *operator new[](std::size_t n) noexcept(false) { return mi_new(n); }
void *operator new(std::size_t n, const std::nothrow_t &) noexcept { MIALLOC_NOTHROW_NEW_(mi_new_nothrow(n)) }
void *operator new[](std::size_t n, const std::nothrow_t &) noexcept { MIALLOC_NOTHROW_NEW_(mi_new_nothrow(n)) }

#if __cplusplus >= 201402L || defined(__cpp_sized_deallocation)
void operator delete(void *p, std::size_t n) noexcept { mi_free_size(p, n); }
void operator delete[](void *p, std::size_t n) noexcept { mi_free_size(p, n); }
#endif

#if __cplusplus >= 201703L || defined(__cpp_aligned_new)
void operator delete(void *p, std::align_val_t al) noexcept { mi_free_aligned(p, static_cast<std::size_t>(al)); }
void operator delete[](void *p, std::align_val_t al) noexcept { mi_free_aligned(p, static_cast<std::size_t>(al)); }
void operator delete(void *p, std::size_t n, std::align_val_t al) noexcept {
  mi_free_size_aligned(p, n, static_cast<std::size_t>(al));
}
void operator delete[](void *p, std::size_t n, std::align_val_t al) noexcept {
  mi_free_size_aligned(p, n, static_cast<std::size_t>(al));
}
void operator delete(void *p, std::align_val_t al, const std::nothrow_t &) noexcept {
  mi_free_aligned(p, static_cast<std::size_t>(al));
}
void operator delete[](void *p, std::align_val_t al, const std::nothrow_t &) noexcept {
  mi_free_aligned(p, static_cast<std::size_t>(al));
}

void *operator new(std::size_t n, std::align_val_t al) noexcept(false) {
  return mi_new_aligned(n, static_cast<std::size_t>(al));
}
void *operator new[](std::size_t n, std::align_val_t al) noexcept(false) {
  return mi_new_aligned(n, static_cast<std::size_t>(al));
}
void *operator new(std::size_t n, std::align_val_t al, const std::nothrow_t &) noexcept {
  MIALLOC_NOTHROW_NEW_(mi_new_aligned_nothrow(n, static_cast<std::size_t>(al)))
}
void *operator new[](std::size_t n, std::align_val_t al, const std::nothrow_t &) noexcept {
  MIALLOC_NOTHROW_NEW_(mi_new_aligned_nothrow(n, static_cast<std::size_t>(al)))
}
#endif
#undef MIALLOC_NOTHROW_NEW_
#endif /* __cplusplus */

#endif /* MIALLOC_NEW_DELETE_H */

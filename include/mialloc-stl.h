/* mialloc-stl.h -- C++ allocators for the standard containers, under the
 * reference allocator's names.  Included by mialloc.h in C++ (C++11 and
 * later); not meant to be included on its own.
 *
 *   std::vector<int, mi_stl_allocator<int>> v;            // the default heap
 *   mi_heap_stl_allocator<int> a;                         // a new heap ...
 *   std::vector<int, mi_heap_stl_allocator<int>> w(a);    // ... shared by copies
 *
 * mi_stl_allocator takes memory from the calling thread's default heap.
 * mi_heap_stl_allocator made with no argument creates a heap that lives as
 * long as the last allocator copy using it and is then deleted (blocks
 * still live move to the main heap); made from a mi_heap_t* it uses that
 * heap and leaves its lifetime to the caller.  mi_heap_destroy_stl_allocator
 * destroys its heap instead, freeing every block at once: deallocate does
 * nothing, so containers using it cost no free calls.  Allocation failure
 * throws std::bad_alloc (after the new-handler), as operator new does.
 */
#ifndef MIALLOC_STL_H
#define MIALLOC_STL_H

#if defined(__cplusplus) && __cplusplus >= 201103L
#include <cstddef>
#include <cstdint>
#include <memory>
#include <new>
#include <type_traits>

/* The member types every allocator here declares. */
template <class T> struct mia_stl_types {
  typedef T value_type;
  typedef std::size_t size_type;
  typedef std::ptrdiff_t difference_type;
  typedef T *pointer;
  typedef const T *const_pointer;
  typedef T &reference;
  typedef const T &const_reference;
  std::size_t max_size() const noexcept { return PTRDIFF_MAX / sizeof(T); }
};

template <class T> struct mi_stl_allocator : public mia_stl_types<T> {
  typedef std::true_type propagate_on_container_move_assignment;
  typedef std::true_type is_always_equal;
  template <class U> struct rebind { typedef mi_stl_allocator<U> other; };

  mi_stl_allocator() noexcept {}
  mi_stl_allocator(const mi_stl_allocator &) noexcept {}
  template <class U> mi_stl_allocator(const mi_stl_allocator<U> &) noexcept {}

  T *allocate(std::size_t count) { return static_cast<T *>(mi_new_n(count, sizeof(T))); }
  void deallocate(T *p, std::size_t) { mi_free(p); }
};

template <class T, class U> bool operator==(const mi_stl_allocator<T> &, const mi_stl_allocator<U> &) noexcept {
  return true;
}
template <class T, class U> bool operator!=(const mi_stl_allocator<T> &, const mi_stl_allocator<U> &) noexcept {
  return false;
}

/* What the two heap allocators share: the heap, held by a shared_ptr
 * whose deleter ends it (delete or destroy) when the allocator made it. */
template <class T, bool destroy> struct mia_heap_stl_allocator_base : public mia_stl_types<T> {
  typedef std::true_type propagate_on_container_copy_assignment;
  typedef std::true_type propagate_on_container_move_assignment;
  typedef std::true_type propagate_on_container_swap;
  typedef std::false_type is_always_equal;

  std::shared_ptr<mi_heap_t> heap;

  mia_heap_stl_allocator_base() {
    mi_heap_t *h = mi_heap_new();
    if (h == nullptr) throw std::bad_alloc();
    heap.reset(h, [](mi_heap_t *hp) {
      if (destroy) mi_heap_destroy(hp);
      else mi_heap_delete(hp);
    });
  }
  explicit mia_heap_stl_allocator_base(mi_heap_t *hp) : heap(hp, [](mi_heap_t *) {}) {}
  template <class U>
  mia_heap_stl_allocator_base(const mia_heap_stl_allocator_base<U, destroy> &other) noexcept : heap(other.heap) {}

  T *allocate(std::size_t count) { return static_cast<T *>(mi_heap_alloc_new_n(heap.get(), count, sizeof(T))); }
  void collect(bool force) { mi_heap_collect(heap.get(), force); }
};

template <class T> struct mi_heap_stl_allocator : public mia_heap_stl_allocator_base<T, false> {
  template <class U> struct rebind { typedef mi_heap_stl_allocator<U> other; };
  mi_heap_stl_allocator() : mia_heap_stl_allocator_base<T, false>() {}
  explicit mi_heap_stl_allocator(mi_heap_t *hp) : mia_heap_stl_allocator_base<T, false>(hp) {}
  template <class U>
  mi_heap_stl_allocator(const mi_heap_stl_allocator<U> &other) noexcept : mia_heap_stl_allocator_base<T, false>(other) {}
  void deallocate(T *p, std::size_t) { mi_free(p); }
};

template <class T> struct mi_heap_destroy_stl_allocator : public mia_heap_stl_allocator_base<T, true> {
  template <class U> struct rebind { typedef mi_heap_destroy_stl_allocator<U> other; };
  mi_heap_destroy_stl_allocator() : mia_heap_stl_allocator_base<T, true>() {}
  explicit mi_heap_destroy_stl_allocator(mi_heap_t *hp) : mia_heap_stl_allocator_base<T, true>(hp) {}
  template <class U>
  mi_heap_destroy_stl_allocator(const mi_heap_destroy_stl_allocator<U> &other) noexcept
      : mia_heap_stl_allocator_base<T, true>(other) {}
  void deallocate(T *, std::size_t) {}   /* freed when the heap is destroyed */
};

template <class T, class U, bool d>
bool operator==(const mia_heap_stl_allocator_base<T, d> &a, const mia_heap_stl_allocator_base<U, d> &b) noexcept {
  return a.heap == b.heap;
}
template <class T, class U, bool d>
bool operator!=(const mia_heap_stl_allocator_base<T, d> &a, const mia_heap_stl_allocator_base<U, d> &b) noexcept {
  return a.heap != b.heap;
}
#endif /* C++11 */

#endif /* MIALLOC_STL_H */

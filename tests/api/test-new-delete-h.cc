// test-new-delete-h.cc -- mialloc-new-delete.h defines the program's own
// operator new and delete on mialloc, in every form.
#include <mialloc-new-delete.h>
#include "../tap.h"

#include <dlfcn.h>

#include <cstdint>
#include <new>
#include <vector>

namespace {

volatile std::size_t v_impossible = SIZE_MAX / 2;
void *volatile sink;

// Where does the operator the program calls live?  In the executable when
// the header's definitions are the ones used.
bool defined_in_program(const void *fn) {
  Dl_info self, info;
  if (dladdr(reinterpret_cast<const void *>(&defined_in_program), &self) == 0) return false;
  if (dladdr(fn, &info) == 0) return false;
  return info.dli_fbase == self.dli_fbase;
}

struct alignas(128) Wide {
  unsigned char bytes[200];
};

}  // namespace

int main() {
  void *(*plain)(std::size_t) = &::operator new;
  void (*del)(void *) noexcept = &::operator delete;
  TAP_OK(defined_in_program(reinterpret_cast<const void *>(plain)) &&
             defined_in_program(reinterpret_cast<const void *>(del)),
         "operator new and delete are the program's own (the header's)");

  int *i = new int(42);
  TAP_OK(*i == 42 && mi_check_owned(i), "new takes mialloc memory");
  delete i;
  int *arr = new int[1000];
  TAP_OK(mi_check_owned(arr) && mi_usable_size(arr) >= 4000, "new[]");
  delete[] arr;
  Wide *w = new Wide[3];
  TAP_OK(reinterpret_cast<std::uintptr_t>(w) % 128 == 0 && mi_check_owned(w), "aligned new[] (alignas 128)");
  delete[] w;
  char *n = new (std::nothrow) char[v_impossible];
  TAP_OK(n == nullptr, "new (nothrow) of an impossible size: nullptr");
  bool caught = false;
  try {
    sink = new char[v_impossible];
  } catch (const std::bad_alloc &) {
    caught = true;
  }
  TAP_OK(caught, "new of an impossible size throws std::bad_alloc");
  std::set_new_handler([] { throw std::bad_alloc(); });
  caught = false;
  char *t1 = nullptr;
  void *t2 = nullptr;
  try {
    t1 = new (std::nothrow) char[v_impossible];
    t2 = ::operator new(v_impossible, std::align_val_t(256), std::nothrow);
  } catch (...) {
    caught = true;
  }
  std::set_new_handler(nullptr);
  TAP_OK(!caught && t1 == nullptr && t2 == nullptr, "a throwing new-handler: nothrow new returns nullptr");
  std::vector<Wide> v(10);
  TAP_OK(reinterpret_cast<std::uintptr_t>(v.data()) % 128 == 0 && mi_check_owned(v.data()),
         "a vector of over-aligned elements");
  return tap_done();
}

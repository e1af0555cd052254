// test-cxx.cc -- the C++ operator new/delete family served by mialloc:
// plain, array, nothrow, sized and aligned forms; standard containers;
// std::bad_alloc on failure; the new-handler protocol.
#include <mialloc.h>
#include "../tap.h"

#include <dlfcn.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <map>
#include <new>
#include <set>
#include <string>
#include <typeinfo>
#include <vector>

namespace {

volatile std::size_t v_impossible = SIZE_MAX / 2;
void *volatile sink;

bool aligned_to(const void *p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }
bool ours(const void *p) { return p != nullptr && mi_is_in_heap_region(p); }

struct alignas(256) Aligned256 {
  unsigned char bytes[300];
};

struct alignas(64) Aligned64 {
  long v[3];
};

struct Tracked {
  static int live;
  int value;
  Tracked() : value(0) { live++; }
  explicit Tracked(int v) : value(v) { live++; }
  ~Tracked() { live--; }
};
int Tracked::live = 0;

// The operators this program calls are mialloc's, not libstdc++'s (which
// would also end in malloc, so the block checks alone could not tell).
void test_symbols() {
  static const char *const names[] = {
      "_Znwm", "_Znam", "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t",
      "_ZnamSt11align_val_t", "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
      "_ZdlPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t"};
  for (const char *name : names) {
    void *sym = dlsym(RTLD_DEFAULT, name);
    Dl_info info;
    const char *lib = (sym != nullptr && dladdr(sym, &info) != 0 && info.dli_fname != nullptr) ? info.dli_fname : "(none)";
    TAP_OK(std::strstr(lib, "libmialloc") != nullptr, "%s resolves into libmialloc (%s)", name, lib);
  }
}

void test_plain() {
  int *i = new int(42);
  TAP_OK(ours(i) && *i == 42, "new int(42) is a mialloc block holding 42");
  delete i;

  char *a = new char[1000];
  std::memset(a, 'x', 1000);
  TAP_OK(ours(a) && mi_usable_size(a) >= 1000 && a[999] == 'x', "new char[1000] is a mialloc block, usable >= 1000");
  delete[] a;

  Tracked *t = new Tracked[17]{Tracked(1), Tracked(2)};
  TAP_OK(ours(t) && Tracked::live == 17 && t[0].value == 1 && t[1].value == 2, "new Tracked[17]: constructed, mialloc block");
  delete[] t;
  TAP_OK(Tracked::live == 0, "delete[] ran all 17 destructors");

  // a large one: huge span
  double *big = new double[2 * 1024 * 1024];
  big[0] = 1.5;
  big[2 * 1024 * 1024 - 1] = 2.5;
  TAP_OK(ours(big) && mi_usable_size(big) >= 16u * 1024 * 1024, "new double[2M] (16 MiB) is a mialloc block");
  delete[] big;

  void *z1 = ::operator new(0);
  void *z2 = ::operator new(0);
  TAP_OK(z1 != nullptr && z2 != nullptr && z1 != z2 && ours(z1), "operator new(0) gives unique non-null mialloc pointers");
  ::operator delete(z1);
  ::operator delete(z2);

  int *np = nullptr;
  delete np;
  delete[] np;
  TAP_OK(np == nullptr, "delete / delete[] of nullptr are no-ops");
}

void test_nothrow() {
  int *p = new (std::nothrow) int[100];
  TAP_OK(ours(p), "new (std::nothrow) int[100] is a mialloc block");
  for (int i = 0; i < 100; i++) p[i] = i;
  bool ok = true;
  for (int i = 0; i < 100; i++) ok = ok && p[i] == i;
  TAP_OK(ok, "nothrow array content kept");
  delete[] p;
  Tracked *t = new (std::nothrow) Tracked(9);
  TAP_OK(ours(t) && t->value == 9, "new (std::nothrow) Tracked(9)");
  delete t;
  void *raw = ::operator new(64, std::nothrow);
  TAP_OK(ours(raw), "operator new(64, nothrow)");
  ::operator delete(raw, std::nothrow);
  raw = ::operator new[](64, std::nothrow);
  TAP_OK(ours(raw), "operator new[](64, nothrow)");
  ::operator delete[](raw, std::nothrow);

  std::size_t n = v_impossible;
  char *fail = new (std::nothrow) char[n];
  TAP_OK(fail == nullptr, "new (std::nothrow) char[SIZE_MAX/2] == nullptr");
  void *fail2 = ::operator new(n, std::nothrow);
  TAP_OK(fail2 == nullptr, "operator new(SIZE_MAX/2, nothrow) == nullptr");
  void *fail3 = ::operator new(n, std::align_val_t(64), std::nothrow);
  TAP_OK(fail3 == nullptr, "operator new(SIZE_MAX/2, align 64, nothrow) == nullptr");
}

// Sized delete returns the block: repeated new/sized-delete reuses memory.
void test_sized_delete() {
  const int cycles = 20000;
  std::vector<std::uintptr_t> addrs;
  addrs.reserve(cycles);
  for (int i = 0; i < cycles; i++) {
    void *p = ::operator new(72);
    std::memset(p, 1, 72);
    addrs.push_back(reinterpret_cast<std::uintptr_t>(p));
    ::operator delete(p, 72);  // _ZdlPvm
  }
  std::set<std::uintptr_t> distinct(addrs.begin(), addrs.end());
  TAP_OK(distinct.size() < cycles / 4u, "operator delete(p, size) frees (%zu distinct addresses in %d cycles)", distinct.size(),
         cycles);
  addrs.clear();
  for (int i = 0; i < cycles; i++) {
    void *p = ::operator new[](3000);
    std::memset(p, 1, 3000);
    addrs.push_back(reinterpret_cast<std::uintptr_t>(p));
    ::operator delete[](p, 3000);  // _ZdaPvm
  }
  std::set<std::uintptr_t> distinct2(addrs.begin(), addrs.end());
  TAP_OK(distinct2.size() < cycles / 4u, "operator delete[](p, size) frees (%zu distinct addresses in %d cycles)",
         distinct2.size(), cycles);

  // the compiler's own sized delete for a complete type
  struct Obj {
    char pad[200];
  };
  addrs.clear();
  for (int i = 0; i < cycles; i++) {
    Obj *o = new Obj();
    o->pad[0] = 1;
    addrs.push_back(reinterpret_cast<std::uintptr_t>(o));
    sink = o;
    delete o;
  }
  std::set<std::uintptr_t> distinct3(addrs.begin(), addrs.end());
  TAP_OK(distinct3.size() < cycles / 4u, "new/delete of a 200-byte object reuses memory (%zu distinct addresses)",
         distinct3.size());
}

void test_aligned() {
  Aligned256 *a = new Aligned256;
  std::memset(a->bytes, 7, sizeof a->bytes);
  TAP_OK(ours(a) && aligned_to(a, 256), "new alignas(256) struct: 256-aligned mialloc block (%p)", static_cast<void *>(a));
  delete a;

  Aligned256 *arr = new Aligned256[10];
  bool ok = ours(arr) && aligned_to(arr, 256);
  for (int i = 0; i < 10; i++) ok = ok && aligned_to(&arr[i], 256);
  TAP_OK(ok, "new alignas(256) struct[10]: every element 256-aligned");
  delete[] arr;

  Aligned64 *b = new Aligned64{{1, 2, 3}};
  TAP_OK(ours(b) && aligned_to(b, 64) && b->v[2] == 3, "new alignas(64) struct");
  delete b;

  char *c = new (std::align_val_t(4096)) char[5000];
  std::memset(c, 'q', 5000);
  TAP_OK(ours(c) && aligned_to(c, 4096) && mi_usable_size(c) >= 5000, "new (align_val_t(4096)) char[5000]: aligned mialloc block");
  ::operator delete[](c, std::align_val_t(4096));

  void *d = ::operator new(100, std::align_val_t(1u << 20));
  TAP_OK(ours(d) && aligned_to(d, 1u << 20), "operator new(100, align 1 MiB)");
  ::operator delete(d, 100, std::align_val_t(1u << 20));  // sized + aligned

  void *e = ::operator new[](7, std::align_val_t(512), std::nothrow);
  TAP_OK(ours(e) && aligned_to(e, 512), "operator new[](7, align 512, nothrow)");
  ::operator delete[](e, std::align_val_t(512), std::nothrow);

  void *f = ::operator new(64, std::align_val_t(32), std::nothrow);
  TAP_OK(ours(f) && aligned_to(f, 32), "operator new(64, align 32, nothrow)");
  ::operator delete(f, std::align_val_t(32));

  // aligned new/delete churn reuses memory
  const int cycles = 5000;
  std::set<std::uintptr_t> seen;
  bool all_aligned = true;
  for (int i = 0; i < cycles; i++) {
    Aligned256 *x = new Aligned256;
    x->bytes[0] = 1;
    all_aligned = all_aligned && aligned_to(x, 256);
    seen.insert(reinterpret_cast<std::uintptr_t>(x));
    sink = x;
    delete x;
  }
  TAP_OK(all_aligned && seen.size() < cycles / 4u, "aligned new/delete churn: aligned and reused (%zu distinct)", seen.size());
}

void test_containers() {
  std::vector<int> v;
  for (int i = 0; i < 200000; i++) v.push_back(i * 7);
  bool ok = ours(v.data());
  for (int i = 0; i < 200000; i++) ok = ok && v[static_cast<std::size_t>(i)] == i * 7;
  TAP_OK(ok, "std::vector<int> of 200000: content kept, storage from mialloc");
  v.resize(10);
  v.shrink_to_fit();
  TAP_OK(ours(v.data()) && v.size() == 10 && v[9] == 63, "vector shrink_to_fit keeps content");

  std::string s;
  for (int i = 0; i < 5000; i++) s += std::to_string(i) + ",";
  TAP_OK(ours(s.data()) && s.compare(0, 6, "0,1,2,") == 0 && s.size() > 20000, "std::string growth (size %zu) in mialloc memory",
         s.size());
  std::vector<std::string> strs;
  for (int i = 0; i < 20000; i++) strs.push_back(std::string(static_cast<std::size_t>(16 + i % 300), static_cast<char>('a' + i % 26)));
  ok = true;
  for (int i = 0; i < 20000; i++) {
    const std::string &x = strs[static_cast<std::size_t>(i)];
    ok = ok && x.size() == static_cast<std::size_t>(16 + i % 300) && x[x.size() - 1] == static_cast<char>('a' + i % 26) && ours(x.data());
  }
  TAP_OK(ok, "20000 heap strings of varying size intact");

  std::map<int, std::string> m;
  for (int round = 0; round < 5; round++) {
    for (int i = 0; i < 20000; i++) m[i * 3 + round] = std::to_string(i) + std::string(static_cast<std::size_t>(i % 100), 'z');
    for (auto it = m.begin(); it != m.end();) {
      if (it->first % 2 == 0) it = m.erase(it);
      else ++it;
    }
  }
  ok = true;
  for (const auto &kv : m) {
    if (kv.first % 2 == 0) ok = false;
  }
  // verify a few values exactly
  auto it = m.find(3 * 1001 + 2);  // only round 2, i = 1001 makes key 3005 (odd)
  ok = ok && it != m.end() && it->second == std::to_string(1001) + std::string(1, 'z');
  TAP_OK(ok, "std::map churn: erase/insert rounds consistent (%zu entries)", m.size());
  m.clear();
  TAP_OK(m.empty(), "std::map cleared");
}

void test_bad_alloc() {
  std::size_t n = v_impossible;
  bool caught = false, right_type = false, has_what = false;
  try {
    char *p = new char[n];
    sink = p;
    delete[] p;
  } catch (const std::bad_alloc &e) {
    caught = true;
    const char *w = e.what();
    has_what = w != nullptr && w[0] != 0;
  }
  TAP_OK(caught, "new char[SIZE_MAX/2] throws std::bad_alloc");
  TAP_OK(has_what, "the exception's what() is usable");

  caught = false;
  try {
    void *p = ::operator new(n);
    sink = p;
    ::operator delete(p);
  } catch (const std::bad_alloc &e) {
    caught = true;
    right_type = typeid(e) == typeid(std::bad_alloc);
    has_what = e.what() != nullptr && std::strlen(e.what()) > 0;
  } catch (...) {
    tap_diag("operator new threw something that is not a std::bad_alloc");
  }
  TAP_OK(caught && right_type, "operator new(SIZE_MAX/2) throws exactly std::bad_alloc");
  TAP_OK(has_what, "its what() is usable (%s)", has_what ? "non-empty" : "empty");

  caught = false;
  try {
    void *p = ::operator new(n, std::align_val_t(4096));
    sink = p;
  } catch (const std::bad_alloc &) {
    caught = true;
  }
  TAP_OK(caught, "operator new(SIZE_MAX/2, align 4096) throws std::bad_alloc");

  // the allocator keeps working after the throw
  std::vector<long> after(1000, 5);
  TAP_OK(ours(after.data()) && after[999] == 5, "allocation works after a bad_alloc");
}

int handler_calls;
void one_shot_handler() {
  handler_calls++;
  std::set_new_handler(nullptr);  // next failure: throw
}

int counting_calls;
void counting_handler() {
  if (++counting_calls >= 3) std::set_new_handler(nullptr);
}

void throwing_handler() {
  handler_calls++;
  throw std::bad_alloc();
}

void test_new_handler() {
  std::size_t n = v_impossible;
  handler_calls = 0;
  std::set_new_handler(one_shot_handler);
  bool caught = false;
  try {
    char *p = new char[n];
    sink = p;
  } catch (const std::bad_alloc &) {
    caught = true;
  }
  TAP_OK(handler_calls == 1, "new-handler called exactly once before giving up (%d calls)", handler_calls);
  TAP_OK(caught, "after the handler uninstalled itself the retry throws std::bad_alloc");
  TAP_OK(std::get_new_handler() == nullptr, "the handler uninstalled itself");

  counting_calls = 0;
  std::set_new_handler(counting_handler);
  caught = false;
  try {
    void *p = ::operator new(n);
    sink = p;
  } catch (const std::bad_alloc &) {
    caught = true;
  }
  TAP_OK(counting_calls == 3 && caught, "handler retried until it uninstalled itself (3 calls, got %d), then bad_alloc",
         counting_calls);

  // nothrow forms call the handler too, then return nullptr
  handler_calls = 0;
  std::set_new_handler(one_shot_handler);
  char *q = new (std::nothrow) char[n];
  TAP_OK(q == nullptr && handler_calls == 1, "new (nothrow) calls the handler once, then returns nullptr (%d calls)",
         handler_calls);

  // a handler may throw std::bad_alloc itself: the nothrow forms (and
  // mi_new_nothrow) must still return nullptr, not let it through
  handler_calls = 0;
  std::set_new_handler(throwing_handler);
  bool escaped = false;
  void *r1 = nullptr, *r2 = nullptr, *r3 = nullptr, *r4 = nullptr;
  try {
    r1 = new (std::nothrow) char[n];
    r2 = ::operator new(n, std::align_val_t(64), std::nothrow);
    r3 = mi_new_nothrow(n);
    r4 = mi_new_aligned_nothrow(n, 128);
  } catch (...) {
    escaped = true;
  }
  TAP_OK(!escaped && r1 == nullptr && r2 == nullptr && r3 == nullptr && r4 == nullptr && handler_calls == 4,
         "a throwing new-handler: the nothrow forms return nullptr (%d handler calls, escaped %d)", handler_calls,
         escaped);
  void *after = new (std::nothrow) char[100];
  TAP_OK(ours(after) && std::get_new_handler() == throwing_handler,
         "after the caught throw, nothrow new allocates as before");
  delete[] static_cast<char *>(after);

  // a handler is not called when allocation succeeds
  handler_calls = 0;
  std::set_new_handler(one_shot_handler);
  int *ok = new int[10];
  TAP_OK(ours(ok) && handler_calls == 0, "successful new does not call the handler");
  delete[] ok;
  std::set_new_handler(nullptr);
}

// mialloc-stl.h: allocators for the standard containers
void test_stl_allocators() {
  {
    std::vector<int, mi_stl_allocator<int>> v;
    for (int i = 0; i < 10000; i++) v.push_back(i);
    bool values = true;
    for (int i = 0; i < 10000; i++) values = values && v[static_cast<std::size_t>(i)] == i;
    TAP_OK(values && ours(v.data()) && mi_heap_contains_block(mi_heap_get_default(), v.data()),
           "mi_stl_allocator: a vector's buffer comes from the default heap");
    std::map<int, std::string, std::less<int>, mi_stl_allocator<std::pair<const int, std::string>>> m;
    for (int i = 0; i < 100; i++) m[i] = std::to_string(i);
    TAP_OK(m.size() == 100 && m[42] == "42" && mi_stl_allocator<int>() == mi_stl_allocator<char>(),
           "mi_stl_allocator rebinds for node containers; all instances compare equal");
  }
  {
    mi_heap_stl_allocator<int> a;
    std::vector<int, mi_heap_stl_allocator<int>> v(a);
    for (int i = 0; i < 5000; i++) v.push_back(i * 3);
    mi_heap_t *h = a.heap.get();
    TAP_OK(h != nullptr && mi_heap_contains_block(h, v.data()) && v[4999] == 14997,
           "mi_heap_stl_allocator: the vector's buffer is in the allocator's own heap");
    mi_heap_stl_allocator<long> b(a);
    mi_heap_stl_allocator<int> other;
    TAP_OK(b.heap == a.heap && a != other, "copies share the heap; separately made allocators differ");
    other.collect(true);
  }
  {
    mi_heap_t *h = mi_heap_new();
    {
      mi_heap_stl_allocator<int> a(h);
      std::vector<int, mi_heap_stl_allocator<int>> v(a);
      v.assign(1000, 7);
      TAP_OK(mi_heap_contains_block(h, v.data()), "mi_heap_stl_allocator(h) allocates from h");
    }
    void *p = mi_heap_malloc(h, 64);   // the allocator left h alive
    TAP_OK(p != nullptr && mi_heap_contains_block(h, p), "the caller's heap outlives the allocator");
    mi_heap_destroy(h);
  }
  {
    std::vector<std::string, mi_heap_destroy_stl_allocator<std::string>> *v =
        new std::vector<std::string, mi_heap_destroy_stl_allocator<std::string>>();
    for (int i = 0; i < 2000; i++) v->push_back(std::string(40, 'x'));
    mi_heap_t *h = v->get_allocator().heap.get();
    std::size_t used = 0;
    mi_heap_visit_blocks(
        h, true,
        [](const mi_heap_t *, const mi_heap_area_t *, void *block, std::size_t, void *arg) {
          if (block != nullptr) ++*static_cast<std::size_t *>(arg);
          return true;
        },
        &used);
    // 2000 push_backs outgrow about 11 buffers; deallocate frees none of them
    TAP_OK(used >= 10, "mi_heap_destroy_stl_allocator: outgrown buffers stay in its heap (%zu blocks)", used);
    std::weak_ptr<mi_heap_t> w = v->get_allocator().heap;
    delete v;
    TAP_OK(w.expired(), "deleting the container released the last allocator copy, which destroyed the heap");
  }
  {
    bool caught = false;
    try {
      mi_stl_allocator<Aligned64> a;
      sink = a.allocate(v_impossible / 8);
    } catch (const std::bad_alloc &) {
      caught = true;
    }
    TAP_OK(caught, "mi_stl_allocator throws std::bad_alloc when out of memory");
  }
}

}  // namespace

int main() {
  test_symbols();
  test_plain();
  test_nothrow();
  test_sized_delete();
  test_aligned();
  test_containers();
  test_bad_alloc();
  test_new_handler();
  test_stl_allocators();
  return tap_done();
}

/* stack.c -- call stack capture inside malloc.
 *
 * On x86-64 the profiler's own CFI walk (unwind.c) comes first; these are
 * the unwinders for the stacks it declines, and for other machines.
 * Choice: libunwind's unw_backtrace where configure found libunwind (Debian:
 * libunwind8), else glibc's backtrace().  Both unwind with the DWARF CFI, so
 * they work for code built without frame pointers (all of Debian).  They
 * differ in cost: backtrace (libgcc_s's _Unwind_Backtrace) interprets each
 * frame's CFI program anew, about 1,800 instructions a frame and 18,000 a
 * sample in the benchmarks; unw_backtrace keeps a per-thread cache of each
 * return address's frame layout and, once warm, walks a frame in about a
 * hundred (callgrind, same 16-frame stack: 1,450 against 23,000).
 *
 * Why each is safe inside malloc:
 *   - the first call of each does the one-time work (backtrace dlopens libgcc_s,
 *     which allocates and takes the loader lock; unw_backtrace creates its
 *     pthread key and the main thread's cache).  prof_stack_init makes those
 *     calls when the profiler starts, outside any allocation.  Started from
 *     the environment (at start-up), libunwind's key is one of the first a
 *     process creates, so pthread_setspecific keeps it in the thread's
 *     static array and never allocates; a profiler started late may get a
 *     key past that array, whose first use in a thread allocates (under the
 *     guard below, inside a sample, where nested allocations are allowed);
 *   - a thread's first unw_backtrace maps its cache with mmap, not malloc;
 *     a cache miss looks the frame up with dl_iterate_phdr under libunwind's
 *     own lock (signals blocked), never malloc's.  backtrace finds unwind
 *     tables with _dl_find_object (glibc >= 2.35, libgcc >= 12), lock free;
 *   - the caller (on_alloc) holds a thread-local reentrancy guard, so if
 *     anything underneath did allocate, that allocation would not be sampled
 *     recursively.
 * Walking frame pointers would be cheaper still but returns truncated or
 * wrong stacks through libraries built without them.
 *
 * The capture drops its own leading frames: every frame whose address lies
 * in libmialloc-prof or libmialloc (the allocator's entry points and slow
 * path) is skipped, so the leaf is the caller of malloc/new.  When either
 * library is linked into the executable itself (static linking) its range
 * cannot be told apart from the program's and nothing is skipped by range;
 * the protobuf writer's drop_frames then hides the allocator's frames.
 */
#include "internal.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

typedef struct range_s {
  uintptr_t lo, hi;
} range_t;

static range_t skip_ranges[2];
static unsigned skip_count;

typedef struct find_arg_s {
  uintptr_t base;
  range_t found;
} find_arg_t;

static int find_object(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_arg_t *f = arg;
  uintptr_t lo = UINTPTR_MAX, hi = 0;
  bool match = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uintptr_t s = info->dlpi_addr + ph->p_vaddr, e = s + ph->p_memsz;
    if (s < lo) lo = s;
    if (e > hi) hi = e;
    if (f->base >= s && f->base < e) match = true;
  }
  if (!match) return 0;
  /* the main program (empty name) is never skipped */
  if (info->dlpi_name == NULL || info->dlpi_name[0] == 0) return 1;
  f->found.lo = lo;
  f->found.hi = hi;
  return 1;
}

static void add_skip_object(const void *addr) {
  find_arg_t f = {.base = (uintptr_t)addr};
  dl_iterate_phdr(find_object, &f);
  if (f.found.hi > f.found.lo && skip_count < 2) skip_ranges[skip_count++] = f.found;
}

#if MIALLOC_PROF_LIBUNWIND
__thread unsigned prof_thread_captures __attribute__((tls_model("initial-exec")));
#endif

void prof_stack_init(void) {
  static bool done;
  if (done) return;
  done = true;
  void *warm[4];
  backtrace(warm, 4); /* the one-time work now, not inside malloc */
#if MIALLOC_PROF_LIBUNWIND
  unw_backtrace(warm, 4);
#endif
  add_skip_object((const void *)&prof_stack_init);
  add_skip_object((const void *)&mi_malloc);
}

static bool skipped(uintptr_t pc) {
  for (unsigned i = 0; i < skip_count; i++)
    if (pc >= skip_ranges[i].lo && pc < skip_ranges[i].hi) return true;
  return false;
}

unsigned prof_stack_trim(void *const *raw, int n, uintptr_t *frames, unsigned max) {
  int i = 1; /* raw[0] is in the capturing function (on_alloc) itself */
  while (i < n && skipped((uintptr_t)raw[i])) i++;
  unsigned depth = 0;
  for (; i < n && depth < max; i++) frames[depth++] = (uintptr_t)raw[i];
  return depth;
}

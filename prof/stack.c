/* stack.c -- call stack capture inside malloc.
 *
 * Choice: glibc's backtrace(), which unwinds with libgcc_s's DWARF unwinder
 * (_Unwind_Backtrace), so it works for code built without frame pointers
 * (all of Debian).  Why it is safe inside malloc:
 *   - the first call dlopens libgcc_s, which allocates and takes the loader
 *     lock; prof_stack_init makes that first call at start-up, outside any
 *     allocation, so later calls neither load nor allocate;
 *   - with glibc >= 2.35 and libgcc >= 12 (Debian 12: 2.36 and 12.2) the
 *     unwinder finds unwind tables with _dl_find_object, which is lock free
 *     and does not allocate (older combinations used dl_iterate_phdr, which
 *     takes the loader's write lock: still no malloc, so no deadlock with
 *     the allocator);
 *   - the caller (on_alloc) holds a thread-local reentrancy guard, so if
 *     anything underneath did allocate, that allocation would not be sampled
 *     recursively.
 * Walking frame pointers would be cheaper but returns truncated or wrong
 * stacks through libraries built without them; libunwind would add a
 * dependency for no gain here.
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
#include <execinfo.h>
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

void prof_stack_init(void) {
  static bool done;
  if (done) return;
  done = true;
  void *warm[4];
  backtrace(warm, 4); /* loads libgcc_s now, not inside malloc */
  add_skip_object((const void *)&prof_stack_init);
  add_skip_object((const void *)&mi_malloc);
}

static bool skipped(uintptr_t pc) {
  for (unsigned i = 0; i < skip_count; i++)
    if (pc >= skip_ranges[i].lo && pc < skip_ranges[i].hi) return true;
  return false;
}

unsigned prof_stack_capture(uintptr_t *frames, unsigned max) {
  void *raw[PROF_MAX_FRAMES + 16];
  int n = backtrace(raw, (int)(sizeof raw / sizeof raw[0]));
  int i = 1; /* raw[0] is this function */
  while (i < n && skipped((uintptr_t)raw[i])) i++;
  unsigned depth = 0;
  for (; i < n && depth < max; i++) frames[depth++] = (uintptr_t)raw[i];
  return depth;
}

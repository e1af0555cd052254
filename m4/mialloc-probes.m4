# mialloc-probes.m4 -- configure probes, each named for what it decides.

# MIALLOC_CHECK_CFLAGS: add each warning/visibility flag the compiler accepts.
AC_DEFUN([MIALLOC_CHECK_CFLAGS], [
  MIALLOC_CFLAGS=""
  for flag in -std=gnu11 -Wall -Wextra -Wno-unknown-pragmas -fvisibility=hidden \
              -fno-semantic-interposition -ftls-model=initial-exec -fno-plt; do
    AC_MSG_CHECKING([whether $CC accepts $flag])
    save_CFLAGS=$CFLAGS
    CFLAGS="$CFLAGS -Werror $flag"
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[]], [[return 0;]])],
      [AC_MSG_RESULT([yes]); MIALLOC_CFLAGS="$MIALLOC_CFLAGS $flag"],
      [AC_MSG_RESULT([no])])
    CFLAGS=$save_CFLAGS
  done
  AC_SUBST([MIALLOC_CFLAGS])
])

# MIALLOC_PROBE_TLS_MODEL: decide how malloc finds the thread's default theap.
#
#  thread-local  a __thread pointer with the initial-exec TLS model.  Initial-exec
#                avoids __tls_get_addr, which may itself call malloc for a dlopen'ed
#                module.  It is safe when the library is dlopen'ed because the
#                variable is one pointer: it fits in the static TLS surplus that
#                glibc keeps for exactly this case.  The probe checks that a
#                dlopen'ed library with such a variable really loads.
#  fixed-slot    an unused word of glibc's x86-64 thread control block
#                (%fs:0x40, tcbhead_t.unused_vgetcpu_cache[1]).  One instruction,
#                needs no TLS at all, but it depends on a glibc-private layout, so
#                it is never chosen by auto: a glibc upgrade could reuse the word
#                under an installed binary.
#  pthread-keys  pthread_getspecific; portable, one library call per lookup.
#
# auto picks thread-local when the probe shows it works, else pthread-keys.
# thread-local and fixed-slot cost the same in the fast path (measured with
# callgrind: 38.4 instructions per malloc+free pair each; both read one GOT
# word and one %fs-relative word), so the fixed slot's dependence on a
# glibc-private layout buys nothing.
AC_DEFUN([MIALLOC_PROBE_TLS_MODEL], [
  AC_ARG_WITH([tls-model],
    [AS_HELP_STRING([--with-tls-model=MODEL],
      [how to find the thread's theap: auto, thread-local, fixed-slot, pthread-keys @<:@auto@:>@])],
    [], [with_tls_model=auto])

  AC_CACHE_CHECK([whether initial-exec TLS works in a dlopen'ed library],
                 [mialloc_cv_tls_ie_dlopen], [
    mialloc_cv_tls_ie_dlopen=no
    cat > conftest_tls_lib.c <<_PROBE
static __thread void *slot __attribute__((tls_model("initial-exec")));
void *probe_get(void) { return slot; }
void probe_set(void *p) { slot = p; }
_PROBE
    cat > conftest_tls_main.c <<_PROBE
#include <dlfcn.h>
int main(int argc, char **argv) {
  (void)argc;
  void *h = dlopen(argv[[1]], RTLD_NOW);
  if (!h) return 1;
  void *(*get)(void) = (void *(*)(void))dlsym(h, "probe_get");
  void (*set)(void *) = (void (*)(void *))dlsym(h, "probe_set");
  if (!get || !set || get() != 0) return 2;
  set(&h);
  return get() == &h ? 0 : 3;
}
_PROBE
    if test "$cross_compiling" != yes &&
       $CC $CFLAGS -shared -fPIC -o conftest_tls_lib.so conftest_tls_lib.c >&AS_MESSAGE_LOG_FD 2>&1 &&
       $CC $CFLAGS -o conftest_tls_main conftest_tls_main.c $LIBS -ldl >&AS_MESSAGE_LOG_FD 2>&1 &&
       ./conftest_tls_main "`pwd`/conftest_tls_lib.so" >&AS_MESSAGE_LOG_FD 2>&1; then
      mialloc_cv_tls_ie_dlopen=yes
    fi
    rm -f conftest_tls_lib.c conftest_tls_lib.so conftest_tls_main.c conftest_tls_main
  ])

  AC_CACHE_CHECK([whether the glibc x86-64 TCB has a free slot at %fs:0x40],
                 [mialloc_cv_tls_fixed_slot], [
    AC_RUN_IFELSE([AC_LANG_SOURCE([[
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#if !defined(__x86_64__) || !defined(__GLIBC__)
#error "fixed slot only known for glibc on x86-64"
#endif
static void *get(void) { void *v; __asm__ volatile("mov %%fs:0x40, %0" : "=r"(v)); return v; }
static void set(void *v) { __asm__ volatile("mov %0, %%fs:0x40" :: "r"(v) : "memory"); }
static void *thread_main(void *arg) {
  if (get() != 0) return (void *)1;
  set(arg);
  char *p = malloc(100); memset(p, 1, 100); free(p);
  return get() == arg ? 0 : (void *)2;
}
int main(void) {
  int x, y;
  if (get() != 0) return 1;
  set(&x);
  pthread_t t; void *r;
  if (pthread_create(&t, 0, thread_main, &y) != 0) return 2;
  if (pthread_join(t, &r) != 0 || r != 0) return 3;
  return get() == &x ? 0 : 4;
}
]])], [mialloc_cv_tls_fixed_slot=yes], [mialloc_cv_tls_fixed_slot=no],
      [mialloc_cv_tls_fixed_slot=no])
  ])

  case "$with_tls_model" in
    auto)
      AS_IF([test "x$mialloc_cv_tls_ie_dlopen" = xyes],
            [mialloc_tls_model=thread-local], [mialloc_tls_model=pthread-keys]) ;;
    thread-local)
      AS_IF([test "x$mialloc_cv_tls_ie_dlopen" = xyes], [],
            [AC_MSG_ERROR([--with-tls-model=thread-local: initial-exec TLS does not work here])])
      mialloc_tls_model=thread-local ;;
    fixed-slot)
      AS_IF([test "x$mialloc_cv_tls_fixed_slot" = xyes], [],
            [AC_MSG_ERROR([--with-tls-model=fixed-slot: no free TCB slot on this platform])])
      mialloc_tls_model=fixed-slot ;;
    pthread-keys) mialloc_tls_model=pthread-keys ;;
    *) AC_MSG_ERROR([unknown --with-tls-model=$with_tls_model]) ;;
  esac
  AS_CASE([$mialloc_tls_model],
    [thread-local], [AC_DEFINE([MIALLOC_TLS_THREAD_LOCAL], [1], [theap found through initial-exec __thread])],
    [fixed-slot],   [AC_DEFINE([MIALLOC_TLS_FIXED_SLOT], [1], [theap found in a fixed TCB slot])],
    [pthread-keys], [AC_DEFINE([MIALLOC_TLS_PTHREAD_KEYS], [1], [theap found with pthread_getspecific])])
  AC_SUBST([MIALLOC_TLS_MODEL], [$mialloc_tls_model])
])

# MIALLOC_PROBE_PACKED_RELOCS: link the libraries with packed relative
# relocations (DT_RELR, glibc 2.36 and binutils 2.38 on)?  The page map's
# top level is 2048 pointers to the shared empty leaf: as classic RELA
# entries they are 48 KiB of relocation table that every process using
# mialloc reads at start-up; packed, under 1 KiB.  --fatal-warnings, because
# a linker that does not know the option only warns.
AC_DEFUN([MIALLOC_PROBE_PACKED_RELOCS], [
  AC_CACHE_CHECK([whether the linker packs relative relocations], [mialloc_cv_packed_relocs], [
    save_LDFLAGS=$LDFLAGS
    LDFLAGS="$LDFLAGS -Wl,-z,pack-relative-relocs -Wl,--fatal-warnings"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[static int x; int *p = &x;]], [[return *p;]])],
      [mialloc_cv_packed_relocs=yes], [mialloc_cv_packed_relocs=no])
    LDFLAGS=$save_LDFLAGS])
  mialloc_packed_relocs=$mialloc_cv_packed_relocs
  MIALLOC_LDFLAGS=""
  AS_IF([test "x$mialloc_packed_relocs" = xyes],
        [MIALLOC_LDFLAGS="-Wl,-z,pack-relative-relocs"])
  AC_SUBST([MIALLOC_LDFLAGS])
])

# MIALLOC_PROBE_EMPTY_LEAF_SEGMENT: can the linker give the page map's
# empty leaf (8 MiB read as zero, src/pagemap.c) a read-only segment of its
# own (src/empty-leaf.ld)?  Otherwise it is writable while the loader maps
# it, and under ulimit -d below about 9 MiB the library cannot be loaded.
AC_DEFUN([MIALLOC_PROBE_EMPTY_LEAF_SEGMENT], [
  AC_CACHE_CHECK([whether the linker gives the empty page-map leaf a read-only segment],
                 [mialloc_cv_empty_leaf_segment], [
    save_LDFLAGS=$LDFLAGS
    LDFLAGS="$LDFLAGS -Wl,-T,$srcdir/src/empty-leaf.ld -Wl,--fatal-warnings"
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[
__asm__(".pushsection .mia_empty_leaf,\"a\",@nobits\n.balign 4096\nprobe_leaf: .skip 8192\n.popsection\n");
extern char probe_leaf[];]], [[return probe_leaf[8191];]])],
      [mialloc_cv_empty_leaf_segment=yes], [mialloc_cv_empty_leaf_segment=no])
    LDFLAGS=$save_LDFLAGS])
  MIALLOC_EMPTY_LEAF_LDFLAGS=""
  AS_IF([test "x$mialloc_cv_empty_leaf_segment" = xyes],
        [MIALLOC_EMPTY_LEAF_LDFLAGS='-Wl,-T,$(srcdir)/src/empty-leaf.ld'])
  AC_SUBST([MIALLOC_EMPTY_LEAF_LDFLAGS])
])

# MIALLOC_PROBE_CPUID: may start-up code ask the CPU for its copy/clear features?
AC_DEFUN([MIALLOC_PROBE_CPUID], [
  AC_CACHE_CHECK([whether cpuid can be used], [mialloc_cv_have_cpuid], [
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[#include <cpuid.h>]], [[
      unsigned a, b, c, d;
      return __get_cpuid_count(7, 0, &a, &b, &c, &d) ? (int)b : 0;]])],
      [mialloc_cv_have_cpuid=yes], [mialloc_cv_have_cpuid=no])])
  mialloc_have_cpuid=$mialloc_cv_have_cpuid
  AS_IF([test "x$mialloc_have_cpuid" = xyes],
        [AC_DEFINE([MIALLOC_HAVE_CPUID], [1], [cpuid is available])])
])

# MIALLOC_PROBE_THREAD_POINTER: can the thread pointer serve as a free thread id?
AC_DEFUN([MIALLOC_PROBE_THREAD_POINTER], [
  AC_CACHE_CHECK([whether __builtin_thread_pointer works], [mialloc_cv_thread_pointer], [
    AC_LINK_IFELSE([AC_LANG_PROGRAM([[]], [[return __builtin_thread_pointer() != 0;]])],
      [mialloc_cv_thread_pointer=yes], [mialloc_cv_thread_pointer=no])])
  mialloc_have_thread_pointer=$mialloc_cv_thread_pointer
  AS_IF([test "x$mialloc_have_thread_pointer" = xyes],
        [AC_DEFINE([MIALLOC_HAVE_THREAD_POINTER], [1], [__builtin_thread_pointer works])])
])

# MIALLOC_PROBE_PROF_UNWINDER: how libmialloc-prof captures call stacks.
# libunwind's unw_backtrace keeps a per-thread cache of each return
# address's frame layout, so a warm capture costs about a tenth of glibc's
# backtrace (which interprets the DWARF CFI of every frame anew); without
# libunwind the profiler falls back to backtrace.
AC_DEFUN([MIALLOC_PROBE_PROF_UNWINDER], [
  mialloc_prof_unwinder=backtrace
  AS_IF([test "x$with_libunwind" != xno], [
    AC_CACHE_CHECK([whether libunwind's unw_backtrace links], [mialloc_cv_libunwind], [
      mialloc_save_LIBS=$LIBS
      LIBS="-lunwind $LIBS"
      AC_LINK_IFELSE([AC_LANG_PROGRAM([[#define UNW_LOCAL_ONLY
#include <libunwind.h>]], [[void *pc[8]; return unw_backtrace(pc, 8) < 0;]])],
        [mialloc_cv_libunwind=yes], [mialloc_cv_libunwind=no])
      LIBS=$mialloc_save_LIBS])
    AS_IF([test "x$mialloc_cv_libunwind" = xyes], [
      mialloc_prof_unwinder=libunwind
      PROF_UNWIND_LIBS=-lunwind
      AC_DEFINE([MIALLOC_PROF_LIBUNWIND], [1], [libmialloc-prof unwinds with libunwind's unw_backtrace])],
      [test "x$with_libunwind" = xyes],
      [AC_MSG_ERROR([--with-libunwind: libunwind not found (Debian: libunwind-dev)])])])
  AC_SUBST([PROF_UNWIND_LIBS])
  MIALLOC_PROBE_PROF_CFI_WALK
])

# MIALLOC_PROBE_PROF_CFI_WALK: whether libmialloc-prof walks the DWARF CFI
# itself, with rules cached for the whole process (prof/unwind.c), before
# falling back to the unwinder above.  It reads x86-64 frames, and needs
# dl_iterate_phdr's unload count to notice when cached rules go stale.
AC_DEFUN([MIALLOC_PROBE_PROF_CFI_WALK], [
  AC_CACHE_CHECK([whether the profiler can walk the CFI itself], [mialloc_cv_prof_cfi_walk], [
    AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[#define _GNU_SOURCE 1
#include <link.h>
#if !defined(__x86_64__) || !defined(__linux__)
#error x86-64 Linux only
#endif]], [[struct dl_phdr_info i; return (int)i.dlpi_subs + (int)sizeof(ElfW(Phdr));]])],
      [mialloc_cv_prof_cfi_walk=yes], [mialloc_cv_prof_cfi_walk=no])])
  AS_IF([test "x$mialloc_cv_prof_cfi_walk" = xyes], [
    mialloc_prof_unwinder="own CFI walk, else $mialloc_prof_unwinder"
    AC_DEFINE([MIALLOC_PROF_CFI_UNWIND], [1], [libmialloc-prof walks the x86-64 CFI with a process-wide cache])])
])

# MIALLOC_PROBE_CLANG_DWARF: whether clang's debug info should be DWARF 4.
#
# Valgrind before 3.20 (Debian 12 ships 3.19) cannot read the DWARF 5 that
# clang emits by default: it gives up on the whole library ("Possibly
# corrupted debuginfo file"), so memcheck cannot replace mialloc's malloc in
# a preloaded program and reports nothing.  gcc's DWARF 5 reads fine.  With
# clang, and debug info asked for, -gdwarf-4 keeps Valgrind working.
AC_DEFUN([MIALLOC_PROBE_CLANG_DWARF], [
  AC_MSG_CHECKING([whether debug info needs -gdwarf-4 for Valgrind (clang)])
  AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[
#ifndef __clang__
#error not clang
#endif
]], [[return 0;]])], [mialloc_is_clang=yes], [mialloc_is_clang=no])
  mialloc_dwarf4=no
  AS_CASE([" $CFLAGS "], [*" -g "*|*" -g3 "*|*" -ggdb "*], [
    AS_IF([test "x$mialloc_is_clang" = xyes], [
      save_CFLAGS=$CFLAGS
      CFLAGS="$CFLAGS -Werror -gdwarf-4"
      AC_COMPILE_IFELSE([AC_LANG_PROGRAM([[]], [[return 0;]])], [mialloc_dwarf4=yes])
      CFLAGS=$save_CFLAGS])])
  AS_IF([test "x$mialloc_dwarf4" = xyes], [MIALLOC_CFLAGS="$MIALLOC_CFLAGS -gdwarf-4"])
  AC_MSG_RESULT([$mialloc_dwarf4])
])

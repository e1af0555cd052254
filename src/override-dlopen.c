/* override-dlopen.c -- dlopen without RTLD_DEEPBIND, so that plugins use
 * the process's malloc.
 *
 * A library opened with RTLD_DEEPBIND looks its symbols up in its own
 * dependencies before the global scope: its malloc and free are glibc's
 * while the program's are mialloc's, and the first block that crosses
 * between them crashes the process (Debian's php opens every extension
 * so; jemalloc, tcmalloc and mimalloc fail the same way).  glibc no longer
 * has malloc hooks that could send those calls back here, so dlopen clears
 * the flag and the plugin binds malloc like everything else.
 * MIALLOC_DLOPEN_DEEPBIND=1 keeps the flag, for a program that needs its
 * plugins' other symbols kept apart from the program's.
 *
 * glibc's dlopen searches a bare library name in its caller's RUNPATH and
 * names the caller by the return address it finds: the override must not
 * be a frame of its own.  It is a jump, written in assembly; on other
 * architectures dlopen is not overridden.
 */
#define _GNU_SOURCE 1   /* RTLD_NEXT, RTLD_DEEPBIND */
#include "internal.h"

#include <dlfcn.h>

#if defined(__x86_64__) && defined(RTLD_DEEPBIND)

typedef void *(*mia_dlopen_fn)(const char *, int);

/* What the jump reads: glibc's dlopen, once found, and the mask for the
 * mode.  The mask is stored first: x86-64 keeps stores in order, so a
 * jump that reads the function also reads its mask. */
__attribute__((used)) mia_dlopen_fn mia_dlopen_next;
__attribute__((used)) int mia_dlopen_mode_mask = ~0;

/* The first dlopen: find the next one (glibc's) and decide on the flag.
 * Two threads doing this at once store the same values.  Not static: the
 * assembly below calls it by name, so it is declared for it alone. */
mia_dlopen_fn mia_dlopen_resolve(void);
__attribute__((used)) mia_dlopen_fn mia_dlopen_resolve(void) {
  mia_dlopen_fn next = (mia_dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
  bool keep = mia_option_get_fast(mi_option_dlopen_deepbind) != 0;
  __atomic_store_n(&mia_dlopen_mode_mask, keep ? ~0 : ~RTLD_DEEPBIND, __ATOMIC_RELAXED);
  __atomic_store_n(&mia_dlopen_next, next, __ATOMIC_RELEASE);
  if (next == NULL) mia_warning("dlopen: glibc's dlopen was not found; libraries cannot be opened\n");
  else if (!keep) mia_verbose("dlopen clears RTLD_DEEPBIND, so plugins use mialloc (MIALLOC_DLOPEN_DEEPBIND=1 keeps it)\n");
  return next;
}

#if defined(__CET__)
#define MIA_ASM_ENDBR "endbr64\n"
#else
#define MIA_ASM_ENDBR ""
#endif

/* dlopen(file, mode): mode &= mask, then jump to glibc's with the
 * caller's return address still on the stack.  The first call finds
 * glibc's (the arguments saved around the call, the stack kept aligned). */
__asm__(".text\n"
        ".globl dlopen\n"
        ".type dlopen, @function\n"
        "dlopen:\n"
        ".cfi_startproc\n"
        MIA_ASM_ENDBR
        "  movq mia_dlopen_next(%rip), %rax\n"
        "  testq %rax, %rax\n"
        "  jz 2f\n"
        "1:\n"
        "  andl mia_dlopen_mode_mask(%rip), %esi\n"
        "  jmp *%rax\n"
        "2:\n"
        "  pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  subq $8, %rsp\n"
        ".cfi_adjust_cfa_offset 8\n"
        "  call mia_dlopen_resolve\n"
        "  addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "  testq %rax, %rax\n"
        "  jnz 1b\n"
        "  ret\n"
        ".cfi_endproc\n"
        ".size dlopen, .-dlopen\n");

#endif

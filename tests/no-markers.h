/* no-markers.h -- refuse guard markers in this process and its children,
 * as a kernel before Linux 6.13 does: a seccomp filter makes madvise with
 * MADV_GUARD_INSTALL or MADV_GUARD_REMOVE fail with EINVAL, so mialloc's
 * fallbacks (PROT_NONE guard pages) can be tested on a kernel that has
 * markers.  Used by tests/misuse/no-guard-markers and tests/unit/test-guards. */
#ifndef MIALLOC_TESTS_NO_MARKERS_H
#define MIALLOC_TESTS_NO_MARKERS_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define NO_MARKERS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define NO_MARKERS_ARCH AUDIT_ARCH_AARCH64
#endif

#define NO_MARKERS_INSTALL 102   /* MADV_GUARD_INSTALL */
#define NO_MARKERS_REMOVE  103   /* MADV_GUARD_REMOVE */

/* false where the filter cannot be installed (no seccomp, or an
 * architecture this does not know) */
static inline bool no_guard_markers(void) {
#ifdef NO_MARKERS_ARCH
  /* the advice is the third argument; its low 32 bits hold the value
   * (little-endian: the word at the argument's offset) */
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_MARKERS_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_MARKERS_INSTALL, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, NO_MARKERS_REMOVE, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINVAL & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("no-guard-markers: seccomp");
    return false;
  }
  return true;
#else
  fprintf(stderr, "no-guard-markers: unknown architecture\n");
  return false;
#endif
}

#endif

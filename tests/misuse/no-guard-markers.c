/* no-guard-markers.c PROG ARGS... -- run PROG as on a kernel without guard
 * markers (before Linux 6.13): a seccomp filter makes madvise with
 * MADV_GUARD_INSTALL or MADV_GUARD_REMOVE fail with EINVAL, as such a
 * kernel does, so guarded sampling must take its mprotect path.  The
 * misuse battery runs its guarded cases both ways (run.sh).  Exits 77
 * where it cannot install the filter (no seccomp, or an architecture it
 * does not know). */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#endif

#define GUARD_INSTALL 102   /* MADV_GUARD_INSTALL */
#define GUARD_REMOVE  103   /* MADV_GUARD_REMOVE */

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: no-guard-markers PROG ARGS...\n");
    return 2;
  }
#ifdef THIS_ARCH
  /* the advice is the third argument; its low 32 bits hold the value
   * (little-endian: the word at the argument's offset) */
  struct sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_madvise, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2])),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GUARD_INSTALL, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, GUARD_REMOVE, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EINVAL & SECCOMP_RET_DATA)),
  };
  struct sock_fprog prog = {.len = sizeof filter / sizeof filter[0], .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("no-guard-markers: seccomp");
    return 77;
  }
  execv(argv[1], argv + 1);
  perror("no-guard-markers: exec");
  return 126;
#else
  fprintf(stderr, "no-guard-markers: unknown architecture\n");
  return 77;
#endif
}

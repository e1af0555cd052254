/* seccomp.h -- make one system call fail in this process and its children,
 * as an older kernel or a sandbox's filter does, so mialloc's fallbacks can
 * be tested on a kernel that has the call:
 *   no_guard_markers()  madvise with MADV_GUARD_INSTALL or MADV_GUARD_REMOVE
 *                       fails with EINVAL, as before Linux 6.13 (page guards
 *                       and guarded sampling then use PROT_NONE pages);
 *   refuse_getrandom()  getrandom fails with ENOSYS.
 * Used by tests/misuse/no-guard-markers, tests/unit/test-guards and
 * tests/unit/test-secrets.  Both return false where the filter cannot be
 * installed (no seccomp, or an architecture this does not know). */
#ifndef MIALLOC_TESTS_SECCOMP_H
#define MIALLOC_TESTS_SECCOMP_H

#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#if defined(__x86_64__)
#define SECCOMP_TEST_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define SECCOMP_TEST_ARCH AUDIT_ARCH_AARCH64
#endif

/* System call nr fails with err: always (nargs 0), or when the low 32 bits
 * of its third argument are one of arg2[0..nargs) (at most 4). */
static inline bool seccomp_refuse(long nr, int err, const uint32_t *arg2, unsigned nargs) {
#ifdef SECCOMP_TEST_ARCH
  if (nargs > 4) return false;
  struct sock_filter filter[12];
  unsigned n = 0;
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch));
  filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SECCOMP_TEST_ARCH, 1, 0);
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr));
  /* not nr: skip to the allow after the argument tests */
  filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, (uint32_t)nr, 0, (uint8_t)(nargs ? nargs + 1 : 1));
  if (nargs > 0) {
    /* the low 32 bits of an argument: the word at its offset (little-endian) */
    filter[n++] = (struct sock_filter)BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[2]));
    for (unsigned i = 0; i < nargs; i++)   /* a match jumps to the refusal */
      filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, arg2[i], (uint8_t)(nargs - i), 0);
  } else {
    filter[n++] = (struct sock_filter)BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0);
  }
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW);
  filter[n++] = (struct sock_filter)BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((uint32_t)err & SECCOMP_RET_DATA));
  struct sock_fprog prog = {.len = (unsigned short)n, .filter = filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
    perror("seccomp");
    return false;
  }
  return true;
#else
  (void)nr;
  (void)err;
  (void)arg2;
  (void)nargs;
  fprintf(stderr, "seccomp: unknown architecture\n");
  return false;
#endif
}

static inline bool no_guard_markers(void) {
  static const uint32_t advice[] = {102 /* MADV_GUARD_INSTALL */, 103 /* MADV_GUARD_REMOVE */};
  return seccomp_refuse(__NR_madvise, EINVAL, advice, 2);
}

static inline bool refuse_getrandom(void) { return seccomp_refuse(__NR_getrandom, ENOSYS, NULL, 0); }

#endif

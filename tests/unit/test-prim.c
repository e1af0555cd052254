/* test-prim.c -- the OS primitive layer. */
#include "internal.h"
#include "../tap.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../seccomp.h"

/* In a child whose clock_gettime system call a filter refuses: the
 * start-up clock falls back to libc's (the vDSO, which makes no system
 * call).  Exit 0: it did; 1: it did not; 77: no filter, or no vDSO clock. */
static int startup_clock_refused_child(void) {
  if (!seccomp_refuse(__NR_clock_gettime, EPERM, NULL, 0)) return 77;
  struct timespec ts;
  if (clock_gettime(CLOCK_MONOTONIC, &ts) != 0) return 77;
  uint64_t s0 = mia_prim_clock_ms(), s1 = mia_prim_clock_ms_startup(), s2 = mia_prim_clock_ms();
  return s0 <= s1 && s1 <= s2 ? 0 : 1;
}

static void *thread_id_of(void *arg) {
  (void)arg;
  return (void *)mia_prim_thread_id();
}

int main(void) {
  TAP_OK(mia_prim_page_size() == (size_t)sysconf(_SC_PAGESIZE), "page size matches sysconf");

  size_t size = 8u << 20;
  uint8_t *p = mia_prim_reserve(size, 4u << 20, false);
  TAP_OK(p != NULL && ((uintptr_t)p & ((4u << 20) - 1)) == 0, "reserve honours a 4 MiB alignment");
  size_t rss0 = mia_prim_current_rss();
  memset(p, 0x5a, size);
  size_t rss1 = mia_prim_current_rss();
  TAP_OK(rss1 >= rss0 + size / 2, "touching reserved memory raises RSS (%zu -> %zu)", rss0, rss1);
  TAP_OK(mia_prim_purge(p, size, false), "purge succeeds");
  size_t rss2 = mia_prim_current_rss();
  TAP_OK(rss2 + size / 2 <= rss1, "purge (MADV_DONTNEED) lowers RSS (%zu -> %zu)", rss1, rss2);
  TAP_OK(p[0] == 0 && p[size - 1] == 0, "purged memory reads as zero");
  TAP_OK(mia_prim_protect(p, 4096, MIA_PROT_READ) && mia_prim_protect(p, 4096, MIA_PROT_RW),
         "protect read-only and back");
  p[0] = 1;
  TAP_OK(mia_prim_purge(p, size, true), "lazy purge (MADV_FREE) succeeds");
  mia_prim_release(p, size);

  uint64_t t0 = mia_prim_clock_ns();
  usleep(20000);
  uint64_t t1 = mia_prim_clock_ns();
  TAP_OK(t1 - t0 >= 15000000u, "monotonic clock advances with sleep (%llu ns)", (unsigned long long)(t1 - t0));
  TAP_OK(mia_prim_clock_ms() >= t1 / 1000000u, "millisecond clock agrees");
  uint64_t s0 = mia_prim_clock_ms(), s1 = mia_prim_clock_ms_startup(), s2 = mia_prim_clock_ms();
  TAP_OK(s0 <= s1 && s1 <= s2, "start-up clock (a system call) is the same clock (%llu <= %llu <= %llu)",
         (unsigned long long)s0, (unsigned long long)s1, (unsigned long long)s2);
  /* the cheap clock, read after the precise one, is never below it, and
   * above it by a few ticks at most */
  bool bounds = true;
  uint64_t most = 0;
  for (int i = 0; i < 20000 && bounds; i++) {
    uint64_t before_ms = mia_prim_clock_ms(), upper = mia_prim_clock_ms_upper();
    bounds = upper >= before_ms;
    if (bounds && upper - before_ms > most) most = upper - before_ms;
    if (i % 1000 == 0) usleep(1500);
  }
  TAP_OK(bounds && most <= 100, "the cheap clock is an upper bound of the precise one, %llu ms above at most",
         (unsigned long long)most);
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) _exit(startup_clock_refused_child());
  int st = 0;
  waitpid(pid, &st, 0);
  if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
    printf("ok %d - start-up clock with its system call refused # SKIP no seccomp filter or no vDSO clock here\n",
           ++tap_count);
  else
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "start-up clock with its system call refused: libc's clock instead (status %d)", st);

  pthread_t t;
  void *other;
  pthread_create(&t, NULL, thread_id_of, NULL);
  pthread_join(t, &other);
  TAP_OK(mia_prim_thread_id() != 0 && (uintptr_t)other != mia_prim_thread_id(),
         "thread ids differ between threads");
  TAP_OK((mia_prim_thread_id() & MIA_PAGE_FLAG_MASK) == 0, "thread id leaves the flag bits free");
  TAP_OK(mia_prim_gettid() == getpid(), "gettid of the main thread is the pid");
  TAP_OK(mia_prim_numa_node_count() >= 1, "at least one NUMA node (%zu)", mia_prim_numa_node_count());

  char buf[256];
  bool thp_file = mia_prim_read_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf);
  mia_thp_mode_t want = !thp_file                          ? MIA_THP_NEVER
                       : strstr(buf, "[always]") != NULL  ? MIA_THP_ALWAYS
                       : strstr(buf, "[madvise]") != NULL ? MIA_THP_MADVISE
                                                          : MIA_THP_NEVER;
  TAP_OK(mia_prim_thp_mode() == want, "the huge page mode is the kernel's (%d)", (int)want);
  TAP_OK(mia_prim_read_file("/proc/self/statm", buf, sizeof buf) && buf[0] >= '0' && buf[0] <= '9',
         "read_file reads /proc");
  TAP_OK(!mia_prim_read_file("/nonexistent/file", buf, sizeof buf), "read_file fails cleanly");

  setenv("MIALLOC_TEST_VAR", "hello", 1);
  TAP_OK(mia_prim_getenv("mialloc_test_var", buf, sizeof buf) && strcmp(buf, "hello") == 0,
         "getenv matches names case-insensitively");
  TAP_OK(!mia_prim_getenv("MIALLOC_TEST_VA", buf, sizeof buf), "getenv needs the whole name");
  char small[3];
  TAP_OK(mia_prim_getenv("MIALLOC_TEST_VAR", small, sizeof small) && strcmp(small, "he") == 0,
         "getenv truncates to the buffer");
  TAP_OK(mia_prim_env_has_prefix("mialloc_test_") && mia_prim_env_has_prefix("MIALLOC_TEST_VAR"),
         "env_has_prefix finds a variable by the start of its name, case-insensitively");
  TAP_OK(!mia_prim_env_has_prefix("MIALLOC_TEST_VAR_LONGER") && !mia_prim_env_has_prefix("NO_SUCH_PREFIX_Q7_"),
         "env_has_prefix is false where no name starts so");

  uint64_t r1 = 0, r2 = 0;
  TAP_OK(mia_prim_random_buf(&r1, sizeof r1) && mia_prim_random_buf(&r2, sizeof r2) && r1 != r2,
         "random bytes differ");
  TAP_OK(!mia_prim_is_privileged(), "an ordinary test run is not privileged");
  uint64_t user, sys, peak, faults;
  mia_prim_process_times(&user, &sys, &peak, &faults);
  TAP_OK(peak > 0 && faults > 0, "process times report peak RSS and faults");
  return tap_done();
}

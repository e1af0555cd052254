/* test-guards.c -- page guards (mia_prim_guard_on/off), what secure builds
 * put after every page and huge span.  A guard must trap, also in a forked
 * child, and lift cleanly; and guards must not use up the process's
 * mapping limit (vm.max_map_count): a guard marker takes no mapping, and
 * where the kernel has no markers -- checked again in a child whose
 * seccomp filter refuses them, as a kernel before 6.13 does -- PROT_NONE
 * guards stop at a budget of an eighth of the limit.  Secure builds also
 * check a heap of some hundreds of pages end to end, the budget spent too. */
#include "internal.h"
#include "../tap.h"
#include "../seccomp.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SLICE (64 * 1024)
#define PAGE 4096

static long map_count(void) {
  char buf[4096];
  long lines = 0;
  int fd = open("/proc/self/maps", O_RDONLY);
  if (fd < 0) return -1;
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
    for (ssize_t i = 0; i < n; i++) lines += buf[i] == '\n';
  close(fd);
  return lines;
}

static long map_limit(void) {
  char buf[32];
  long limit = 0;
  if (mia_prim_read_file("/proc/sys/vm/max_map_count", buf, sizeof buf))
    for (const char *s = buf; *s >= '0' && *s <= '9'; s++) limit = limit * 10 + (*s - '0');
  return limit > 0 ? limit : 65530;
}

static bool kernel_markers(void) {
  void *p = mmap(NULL, PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  bool ok = p != MAP_FAILED && madvise(p, PAGE, 102 /* MADV_GUARD_INSTALL */) == 0;
  if (p != MAP_FAILED) munmap(p, PAGE);
  return ok;
}

/* Does a write to p kill a forked child with SIGSEGV? */
static bool write_traps(volatile uint8_t *p) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    signal(SIGSEGV, SIG_DFL);
    *p = 1;
    _exit(0);
  }
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

/* Not in ASan builds: ASan's handler comes before ours and ends the
 * process its own way. */
#if !MIALLOC_ASAN
/* A SIGSEGV sent rather than caused by a fault, while mialloc's handler
 * (guard pages, guarded sampling) is installed, must still end the
 * process: raised, sent by kill, and raised again by a handler installed
 * after ours that puts ours back first, as Python's faulthandler does.
 * Ours used to restore the default action and return, which ends the
 * process for a fault (the access is retried) but let a sent signal go. */
static struct sigaction later_prev;

static void later_handler(int sig) {
  sigaction(SIGSEGV, &later_prev, NULL);
  raise(sig);
}

static bool dies_of_sent_segv(int how) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    if (how == 2) {
      struct sigaction sa;
      memset(&sa, 0, sizeof sa);
      sa.sa_handler = later_handler;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGSEGV, &sa, &later_prev);
    }
    if (how == 1) kill(getpid(), SIGSEGV);
    else raise(SIGSEGV);
    _exit(0);
  }
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFSIGNALED(st) && WTERMSIG(st) == SIGSEGV;
}

/* A program that handles stack overflows (Rust, Go, a C server) installs
 * its SIGSEGV handler with SA_ONSTACK and an alternate stack.  When ours
 * comes after it (guarded sampling's first sample) it must run on that
 * stack too: on the overflowed one it could not even start, and the
 * process died without the program's handler running. */
static void overflow_handler(int sig, siginfo_t *info, void *ctx) {
  (void)sig, (void)info, (void)ctx;
  _exit(3);
}

static mia_prim_fault_fun *overflow_prev_fun;

static void overflow_ours(int sig, void *addr, void *info, void *ctx) {
  (void)addr;
  if (overflow_prev_fun != NULL) overflow_prev_fun(sig, addr, info, ctx);
}

static int recurse(int n) {
  volatile char pad[1024];
  pad[0] = (char)n;
  return n == 0 ? pad[0] : recurse(n + 1) + pad[0];
}

static bool overflow_reaches_program_handler(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    static char alt[64 * 1024];
    stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = overflow_handler;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    if (sigaltstack(&ss, NULL) != 0 || sigaction(SIGSEGV, &sa, NULL) != 0) _exit(1);
    void (*plain)(int);
    if (!mia_prim_on_segv(overflow_ours, &overflow_prev_fun, &plain)) _exit(1);
    _exit(recurse(1) == 0 ? 0 : 2);
  }
  int st;
  return pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 3;
}

static void check_sent_segv(void) {
  mia_guard_handler_ensure();
  struct sigaction cur;
  sigaction(SIGSEGV, NULL, &cur);
  TAP_OK((cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction != NULL, "mialloc's SIGSEGV handler is installed");
  TAP_OK(cur.sa_flags & SA_ONSTACK, "it runs on the thread's alternate signal stack where there is one (SA_ONSTACK)");
  TAP_OK(overflow_reaches_program_handler(),
         "a stack overflow reaches the program's own SA_ONSTACK handler installed before mialloc's");
  TAP_OK(dies_of_sent_segv(0), "raise(SIGSEGV) with mialloc's handler installed ends the process (SIGSEGV)");
  TAP_OK(dies_of_sent_segv(1), "kill(getpid(), SIGSEGV) with mialloc's handler installed ends the process (SIGSEGV)");
  TAP_OK(dies_of_sent_segv(2), "a later handler that puts mialloc's back and raises SIGSEGV again ends the process");
}
#endif

/* Secure builds: a heap of n blocks above the guarded sampling window, so
 * only page guards are placed (n / 11 pages: 11 blocks of 5000 bytes fit
 * in a one-slice page); its mappings may grow by max_growth at most. */
static void check_secure_heap(const char *how, size_t n, long max_growth) {
#if MIALLOC_SECURE
  void **blocks = mi_malloc(n * sizeof *blocks);
  long before = map_count();
  bool ok = blocks != NULL;
  for (size_t i = 0; ok && i < n; i++) {
    blocks[i] = mi_malloc(5000);
    ok = blocks[i] != NULL;
    if (ok) memset(blocks[i], (int)i, 5000);
  }
  long grown = map_count() - before;
  TAP_OK(ok, "%s: secure heap of %zu blocks of 5000 bytes", how, n);
  TAP_OK(grown <= max_growth, "%s: its page guards take %ld more mappings (at most %ld)", how, grown, max_growth);
  bool intact = ok;
  for (size_t i = 0; ok && i < n; i++) {
    intact = intact && ((uint8_t *)blocks[i])[4999] == (uint8_t)i;
    mi_free(blocks[i]);
  }
  TAP_OK(intact, "%s: every block kept its contents", how);
  mi_free(blocks);
#else
  (void)how;
  (void)n;
  (void)max_growth;
#endif
}

/* One guard at the end of each of n slices: they trap, cost no mapping
 * (markers) or about two each (PROT_NONE), and lift in one call. */
static void check_guards(const char *how, bool markers) {
  size_t n = 256;
  uint8_t *r = mia_prim_reserve(n * SLICE, 0, false);
  TAP_OK(r != NULL, "%s: reserve %zu slices", how, n);
  if (r == NULL) return;
  memset(r, 0x5a, n * SLICE);
  long before = map_count();
  size_t set = 0;
  for (size_t i = 0; i < n; i++) set += mia_prim_guard_on(r + (i + 1) * SLICE - PAGE, PAGE);
  long grown = map_count() - before;
  TAP_OK(set == n, "%s: %zu of %zu guards set", how, set, n);
  if (markers)
    TAP_OK(grown <= 2, "%s: markers take no mappings (%ld more for %zu guards)", how, grown, n);
  else
    TAP_OK(grown >= (long)n && grown <= 2 * (long)n + 2, "%s: PROT_NONE guards split the mapping (%ld more)", how, grown);
  TAP_OK(write_traps(r + SLICE - PAGE) && write_traps(r + n * SLICE - 1),
         "%s: a write to a guard traps (SIGSEGV), in a forked child too", how);
  TAP_OK(r[SLICE - PAGE - 1] == 0x5a && r[SLICE] == 0x5a, "%s: the bytes around a guard are kept", how);
  mia_prim_guard_off(r, n * SLICE, set, true);
  bool usable = true;
  for (size_t i = 0; i < n; i++) {
    uint8_t *g = r + (i + 1) * SLICE - PAGE;
    g[0] = 7;
    usable = usable && g[0] == 7;
  }
  TAP_OK(usable && !write_traps(r + SLICE - PAGE), "%s: lifted guards are ordinary memory again", how);
  TAP_OK(map_count() - before <= 2, "%s: lifting gives the mappings back (%ld more)", how, map_count() - before);
  mia_prim_release(r, n * SLICE);
}

/* Without markers: guards stop at an eighth of the mapping limit, and a
 * lifted guard goes back to the budget. */
static void check_budget(const char *how) {
  long budget = map_limit() / 8;
  size_t n = (size_t)budget + 64;
  uint8_t *r = mia_prim_reserve(n * 2 * PAGE, 0, false);
  TAP_OK(r != NULL, "%s: reserve room for %zu guards", how, n);
  if (r == NULL) return;
  long before = map_count();
  size_t set = 0;
  while (set < n && mia_prim_guard_on(r + (2 * set + 1) * PAGE, PAGE)) set++;
  long grown = map_count() - before;
  /* the process may hold a few guards already (a secure build's heap) */
  TAP_OK(set < n && (long)set >= budget - 64, "%s: guards are refused past the budget (%zu set, budget %ld)", how, set,
         budget);
  TAP_OK(grown <= 2 * (long)set + 2 && grown <= map_limit() / 4 + 2,
         "%s: they use at most a quarter of the mapping limit (%ld of %ld)", how, grown, map_limit());
  /* more pages than the heap held before: they go unguarded, and work */
  check_secure_heap("no markers, budget spent", 12000, 64);
  for (size_t i = 0; i < 10; i++) mia_prim_guard_off(r + (2 * i + 1) * PAGE, PAGE, 1, true);
  size_t again = 0;
  while (again < 20 && mia_prim_guard_on(r + (2 * again + 1) * PAGE, PAGE)) again++;
  TAP_OK(again == 10, "%s: ten lifted guards make room for ten more (%zu)", how, again);
  mia_prim_guard_off(r, n * 2 * PAGE, set, true);
  mia_prim_release(r, n * 2 * PAGE);
}

int main(void) {
#if !MIALLOC_ASAN
  check_sent_segv();
#endif
  bool markers = kernel_markers();
  tap_diag("the kernel %s guard markers", markers ? "has" : "has no");
  check_guards("kernel as is", markers);
  /* 6,000 blocks: 545 pages, over a thousand mappings without markers */
  check_secure_heap("kernel as is", 6000, markers ? 64 : map_limit() / 4 + 64);
  if (!markers) check_budget("kernel as is");

  /* again as on a kernel without markers, in a child that reports its
   * counts back (TAP numbering goes on from the parent's) */
  /* a marker set before the filter comes (as sandboxes install theirs
   * after start-up) must still be lifted once markers are refused */
  uint8_t *pre = mia_prim_reserve(SLICE, 0, false);
  bool pre_set = markers && pre != NULL && mia_prim_guard_on(pre + SLICE - PAGE, PAGE);
  int fds[2];
  if (pipe(fds) != 0) return tap_done();
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    int counts[2] = {-1, 0};
    if (no_guard_markers()) {
      int start = tap_count, failed = tap_failed;
      if (pre_set) {
        mia_prim_guard_off(pre, SLICE, 1, true);
        TAP_OK(!write_traps(pre + SLICE - PAGE) && pre[SLICE - 1] == 0,
               "no markers: a marker set before the filter is lifted all the same");
      }
      check_guards("no markers", false);
      check_budget("no markers");
      counts[0] = tap_count - start;
      counts[1] = tap_failed - failed;
    }
    fflush(stdout);
    if (write(fds[1], counts, sizeof counts) != sizeof counts) _exit(1);
    _exit(0);
  }
  close(fds[1]);
  int counts[2] = {0, 1};
  bool got = pid > 0 && read(fds[0], counts, sizeof counts) == sizeof counts;
  int st;
  waitpid(pid, &st, 0);
  if (got && counts[0] >= 0) {
    tap_count += counts[0];
    tap_failed += counts[1];
  } else if (!got) {
    TAP_OK(false, "the child without markers reported back (wait status %#x)", st);
  } else {
    printf("ok %d - without markers # SKIP no seccomp filter here\n", ++tap_count);
  }
  return tap_done();
}

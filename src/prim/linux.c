/* linux.c -- the OS primitive layer for Linux.
 *
 * File and environment access uses raw system calls rather than libc's open()
 * and getenv(): interposers such as fakechroot wrap open() and may call malloc
 * from inside it, which would re-enter us during initialisation.
 */
#include "config.h"
#include "prim/prim.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

/* Every call here runs inside malloc or free, and free must leave errno as
 * it was (POSIX.1-2024; glibc since 2.33), as a malloc that succeeds
 * should: a contended lock's futex wait returns EAGAIN, a purge at the
 * mapping limit ENOMEM.  MIA_KEEP_ERRNO first thing in a function puts the
 * caller's errno back however it returns; the allocator reports its own
 * failures through return values, never through errno from here. */
static inline void keep_errno_restore(const int *saved) { errno = *saved; }
#define MIA_KEEP_ERRNO int keep_errno_saved_ __attribute__((cleanup(keep_errno_restore), unused)) = errno

#ifndef MADV_FREE
#define MADV_FREE 8
#endif
#ifndef MAP_NORESERVE
#define MAP_NORESERVE 0
#endif

size_t mia_prim_page_size(void) {
  static size_t cached;
  if (cached == 0) {
    long sz = sysconf(_SC_PAGESIZE);
    cached = sz > 0 ? (size_t)sz : 4096;
  }
  return cached;
}

/* Over-reserve by the alignment and trim both ends: the kernel has no aligned
 * mmap, and this wastes no memory, only a moment of address space. */
static void *map_aligned(size_t size, size_t alignment, int prot) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  if (alignment <= mia_prim_page_size()) {
    void *p = mmap(NULL, size, prot, flags, -1, 0);
    return p == MAP_FAILED ? NULL : p;
  }
  size_t total = size + alignment;
  if (total < size) return NULL;
  uint8_t *raw = mmap(NULL, total, prot, flags, -1, 0);
  if (raw == MAP_FAILED) return NULL;
  uintptr_t start = ((uintptr_t)raw + alignment - 1) & ~(uintptr_t)(alignment - 1);
  size_t head = start - (uintptr_t)raw;
  size_t tail = total - head - size;
  if (head) munmap(raw, head);
  if (tail) munmap((uint8_t *)start + size, tail);
  return (void *)start;
}

void *mia_prim_reserve(size_t size, size_t alignment, bool allow_thp) {
  MIA_KEEP_ERRNO;
  void *p = map_aligned(size, alignment, PROT_READ | PROT_WRITE);
  if (p != NULL && allow_thp) mia_prim_want_thp(p, size);
  return p;
}

void mia_prim_want_thp(void *p, size_t size) {
  MIA_KEEP_ERRNO;
#ifdef MADV_HUGEPAGE
  madvise(p, size, MADV_HUGEPAGE);
#else
  (void)p;
  (void)size;
#endif
}

/* ---- commit on demand ---- */

/* vm.overcommit_memory=2 makes the kernel charge writable private memory
 * against the commit limit when it is mapped, touched or not
 * (MAP_NORESERVE is ignored then): reserved memory is not free there. */
static int overcommit_mode(void) {
  static _Atomic(int) mode = -1;   /* -1: not read yet; 0 if unreadable, the kernel's default */
  int m = atomic_load_explicit(&mode, memory_order_relaxed);
  if (m < 0) {
    char buf[16];
    m = mia_prim_read_file("/proc/sys/vm/overcommit_memory", buf, sizeof buf) && buf[0] >= '0' && buf[0] <= '2'
            ? buf[0] - '0' : 0;
    atomic_store_explicit(&mode, m, memory_order_relaxed);
  }
  return m;
}

bool mia_prim_overcommits(void) { return overcommit_mode() != 2; }

/* The value of a "Key:   123 kB" line of /proc/meminfo, in bytes. */
static size_t meminfo_bytes(const char *text, const char *key) {
  const char *s = strstr(text, key);
  if (s == NULL) return 0;
  s += strlen(key);
  while (*s == ' ') s++;
  size_t kib = 0;
  while (*s >= '0' && *s <= '9' && kib < SIZE_MAX / 10240) kib = kib * 10 + (size_t)(*s++ - '0');
  return kib * 1024;
}

/* RAM plus swap, the most the kernel's heuristic grants one mapping.
 * From /proc/meminfo rather than sysinfo(2): a sandbox's system-call
 * filter allows the file reads the allocator already makes, and may not
 * allow a call it does not expect.  SIZE_MAX where it cannot be read. */
static size_t ram_and_swap(void) {
  char buf[2048];   /* SwapTotal is about 500 bytes in */
  if (!mia_prim_read_file("/proc/meminfo", buf, sizeof buf)) return SIZE_MAX;
  size_t ram = meminfo_bytes(buf, "MemTotal:"), swap = meminfo_bytes(buf, "SwapTotal:");
  if (ram == 0) return SIZE_MAX;
  return ram + swap < ram ? SIZE_MAX : ram + swap;
}

/* Under vm.overcommit_memory=0 the kernel refuses a writable private
 * mapping larger than RAM plus swap, so glibc's malloc answers ENOMEM
 * there; arenas are MAP_NORESERVE reservations, which it never weighs, so
 * the question is asked here.  Granting such a block would also cost its
 * page-map entries, 1/8192 of its size in RAM: malloc(16 TiB) would write
 * 2 GiB of them.  The total is cached and read again only before a
 * refusal (swap may have been added since). */
bool mia_prim_may_back(size_t size) {
  static _Atomic(size_t) limit;
  if (overcommit_mode() != 0) return true;   /* 1: grants all; 2: the commit charge decides */
  size_t l = atomic_load_explicit(&limit, memory_order_relaxed);
  if (l != 0 && size <= l) return true;
  l = ram_and_swap();
  atomic_store_explicit(&limit, l, memory_order_relaxed);
  return size <= l;
}

static int uncommitted_prot(bool readable) { return readable ? PROT_READ : PROT_NONE; }

/* Neither kind of uncommitted memory is charged: only writable private
 * mappings are. */
void *mia_prim_reserve_uncommitted(size_t size, size_t alignment, bool readable) {
  MIA_KEEP_ERRNO;
  return map_aligned(size, alignment, uncommitted_prot(readable));
}

bool mia_prim_commit(void *p, size_t size) {
  MIA_KEEP_ERRNO;
  return mprotect(p, size, PROT_READ | PROT_WRITE) == 0;
}

/* A fresh anonymous mapping over [p, p + size): its pages, commit charge,
 * guard markers and advice (transparent huge pages) all go with the old. */
static bool map_fresh(void *p, size_t size, int prot) {
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED;
  return mmap(p, size, prot, flags, -1, 0) == p;
}

/* A fresh mapping, since an mprotect back would keep the charge (the
 * kernel drops it only with the mapping). */
bool mia_prim_decommit(void *p, size_t size, bool readable) {
  MIA_KEEP_ERRNO;
  return map_fresh(p, size, uncommitted_prot(readable));
}

/* Keep transparent huge pages out of a range whose protection changes page
 * by page: every mprotect there would split a huge page first (twice the
 * cost of a plain one here), and the guard pages leave nothing whole to
 * back with one anyway. */
void mia_prim_no_thp(void *p, size_t size) {
  MIA_KEEP_ERRNO;
#ifdef MADV_NOHUGEPAGE
  madvise(p, size, MADV_NOHUGEPAGE);
#else
  (void)p;
  (void)size;
#endif
}

#ifndef MADV_POPULATE_WRITE   /* <sys/mman.h> of glibc < 2.35 */
#define MADV_POPULATE_WRITE 23
#endif

/* Fault a range in writable now (Linux 5.14); false where the kernel
 * cannot (the range still works, it faults in as it is touched). */
bool mia_prim_populate(void *p, size_t size) {
  MIA_KEEP_ERRNO;
  return madvise(p, size, MADV_POPULATE_WRITE) == 0;
}

/* Leave a range out of core dumps.  Guarded sampling also uses the flag to
 * keep neighbouring pages from merging into one mapping. */
void mia_prim_no_dump(void *p, size_t size) {
  MIA_KEEP_ERRNO;
#ifdef MADV_DONTDUMP
  madvise(p, size, MADV_DONTDUMP);
#else
  (void)p;
  (void)size;
#endif
}

void mia_prim_release(void *p, size_t size) {
  MIA_KEEP_ERRNO;
  if (p != NULL && size > 0) munmap(p, size);
}

/* MADV_DONTNEED lowers RSS at once, as users and monitors see it; MADV_FREE
 * is cheaper but the pages stay counted until the kernel needs them. */
bool mia_prim_purge(void *p, size_t size, bool lazy) {
  MIA_KEEP_ERRNO;
  if (lazy && madvise(p, size, MADV_FREE) == 0) return true;
  return madvise(p, size, MADV_DONTNEED) == 0;
}

bool mia_prim_protect(void *p, size_t size, mia_prot_t prot) {
  MIA_KEEP_ERRNO;
  int flags = prot == MIA_PROT_NONE ? PROT_NONE
            : prot == MIA_PROT_READ ? PROT_READ : (PROT_READ | PROT_WRITE);
  return mprotect(p, size, flags) == 0;
}

#ifndef MADV_GUARD_INSTALL   /* <sys/mman.h> of glibc < 2.41 */
#define MADV_GUARD_INSTALL 102
#endif

#ifndef MADV_GUARD_REMOVE
#define MADV_GUARD_REMOVE 103
#endif

bool mia_prim_guard_set(void *p, size_t size) {
  MIA_KEEP_ERRNO;
  return madvise(p, size, MADV_GUARD_INSTALL) == 0;
}

/* ---- page guards (secure builds) ---- */

/* Markers where the kernel has them, probed once on a scratch page (a
 * refusal on the heap itself may be the mapping's, e.g. mlock, not the
 * kernel's).  Where it has none, a guard is a PROT_NONE range, and each
 * one splits its mapping in three: a secure heap of small pages would use
 * up the mapping limit (vm.max_map_count, 65530 by default) at about
 * 1.8 GiB, and then the program's own mmap calls fail too.  So at most an
 * eighth of the limit is spent on such guards (a quarter of it in
 * mappings); pages past that go unguarded. */
static _Atomic(int) mia_guard_markers;      /* 0: not probed, 1: yes, -1: no */
static _Atomic(int) mia_guard_protected;    /* a guard was ever set by mprotect */
static _Atomic(long) mia_guard_budget = -1;  /* PROT_NONE guards still allowed; -1: not read */

static bool guard_markers(void) {
  int m = atomic_load_explicit(&mia_guard_markers, memory_order_relaxed);
  if (m != 0) return m > 0;
  size_t ps = mia_prim_page_size();
  void *probe = mmap(NULL, ps, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  bool ok = probe != MAP_FAILED && madvise(probe, ps, MADV_GUARD_INSTALL) == 0;
  if (probe != MAP_FAILED) munmap(probe, ps);
  atomic_store_explicit(&mia_guard_markers, ok ? 1 : -1, memory_order_relaxed);
  return ok;
}

static bool guard_budget_take(void) {
  long b = atomic_load_explicit(&mia_guard_budget, memory_order_relaxed);
  if (b < 0) {
    char buf[32];
    long limit = 0;
    if (mia_prim_read_file("/proc/sys/vm/max_map_count", buf, sizeof buf))
      for (const char *s = buf; *s >= '0' && *s <= '9'; s++) limit = limit * 10 + (*s - '0');
    if (limit <= 0) limit = 65530;
    long expected = -1;
    atomic_compare_exchange_strong(&mia_guard_budget, &expected, limit / 8);
  }
  b = atomic_fetch_sub_explicit(&mia_guard_budget, 1, memory_order_relaxed);
  if (b > 0) return true;
  atomic_fetch_add_explicit(&mia_guard_budget, 1, memory_order_relaxed);
  return false;
}

bool mia_prim_guard_on(void *p, size_t size) {
  MIA_KEEP_ERRNO;
  if (guard_markers() && madvise(p, size, MADV_GUARD_INSTALL) == 0) return true;
  if (!guard_budget_take()) return false;
  if (mprotect(p, size, PROT_NONE) != 0) {
    atomic_fetch_add_explicit(&mia_guard_budget, 1, memory_order_relaxed);
    return false;
  }
  atomic_store_explicit(&mia_guard_protected, 1, memory_order_relaxed);
  return true;
}

static void guard_budget_give(size_t guards) {
  if (atomic_load_explicit(&mia_guard_budget, memory_order_relaxed) >= 0)
    atomic_fetch_add_explicit(&mia_guard_budget, (long)guards, memory_order_relaxed);
}

/* Both kinds are lifted where both may have been set: a marker survives
 * an mprotect, and a PROT_NONE range a marker removal.  A removal can be
 * refused where the install was not: sandboxes install a seccomp filter
 * after start-up (sshd's pre-authentication child allows a short list of
 * madvise advice), and the memory, guarded before, would fault when used
 * again.  A fresh mapping over the range then drops the markers, if the
 * mapping is ours to replace. */
void mia_prim_guard_off(void *p, size_t size, size_t guards, bool replaceable) {
  MIA_KEEP_ERRNO;
  if (guard_markers() && madvise(p, size, MADV_GUARD_REMOVE) != 0 && replaceable &&
      map_fresh(p, size, PROT_READ | PROT_WRITE)) {
    mia_prim_no_thp(p, size);   /* as the arena around it, so they can merge */
    if (atomic_load_explicit(&mia_guard_protected, memory_order_relaxed) != 0) guard_budget_give(guards);
    return;
  }
  if (atomic_load_explicit(&mia_guard_protected, memory_order_relaxed) == 0) return;
  if (mprotect(p, size, PROT_READ | PROT_WRITE) == 0) guard_budget_give(guards);
}

/* ---- SIGSEGV, for guarded sampling ---- */

static mia_prim_fault_fun *mia_segv_fn;

static void mia_segv_trampoline(int sig, siginfo_t *info, void *ctx) {
  mia_segv_fn(sig, info->si_addr, info, ctx);
}

/* The previous SA_SIGINFO handler, called with the signature it expects. */
static void (*mia_segv_prev_action)(int, siginfo_t *, void *);
static void mia_segv_call_prev(int sig, void *addr, void *info, void *ctx) {
  (void)addr;
  mia_segv_prev_action(sig, (siginfo_t *)info, ctx);
}

static bool mia_segv_prev_ignored;   /* the program had SIGSEGV ignored */

bool mia_prim_on_segv(mia_prim_fault_fun *fn, mia_prim_fault_fun **old_fun, void (**old_plain)(int)) {
  MIA_KEEP_ERRNO;
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  mia_segv_fn = fn;
  sa.sa_sigaction = mia_segv_trampoline;
  /* SA_ONSTACK: a program that handles stack overflows gave its threads
   * alternate stacks, and ours runs first (it may have come later); on
   * the overflowed stack it could not start.  Go refuses to take a
   * signal passed on from a handler without it. */
  sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  if (sigaction(SIGSEGV, &sa, &old) != 0) return false;
  *old_fun = NULL;
  *old_plain = NULL;
  if ((old.sa_flags & SA_SIGINFO) && old.sa_sigaction != NULL) {
    mia_segv_prev_action = old.sa_sigaction;
    *old_fun = mia_segv_call_prev;
  } else if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
    *old_plain = old.sa_handler;
  }
  mia_segv_prev_ignored = !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_IGN;
  return true;
}

/* What the signal would have done without us.  A fault: back to the
 * default action, and the faulting access, retried when the handler
 * returns, ends the process with SIGSEGV.  A SIGSEGV sent by kill or
 * raise has no access to retry: it is raised again under the default
 * action (the handler runs with SA_NODEFER, so it is delivered at once),
 * or ignored if the program ignored it.  Python's faulthandler, for one,
 * puts the previous handler back and raises the signal again, expecting
 * the process to die. */
void mia_prim_default_segv(const void *info) {
  const siginfo_t *si = info;
  bool sent = si != NULL && si->si_code <= 0;   /* SI_USER, SI_TKILL, SI_QUEUE */
  if (sent && mia_segv_prev_ignored) return;
  signal(SIGSEGV, SIG_DFL);
  if (sent) raise(SIGSEGV);
}

void *mia_prim_reserve_huge_pages(size_t size) {
  MIA_KEEP_ERRNO;
#ifdef MAP_HUGETLB
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? NULL : p;
#else
  (void)size;
  return NULL;
#endif
}

static long raw_open(const char *path) {
  return syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
}

bool mia_prim_read_file(const char *path, char *buf, size_t bufsize) {
  MIA_KEEP_ERRNO;
  if (bufsize == 0) return false;
  long fd = raw_open(path);
  if (fd < 0) return false;
  size_t len = 0;
  while (len + 1 < bufsize) {
    long n = syscall(SYS_read, (int)fd, buf + len, bufsize - 1 - len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    len += (size_t)n;
  }
  buf[len] = 0;
  syscall(SYS_close, (int)fd);
  return len > 0;
}

/* Read once: the system's transparent-huge-page mode.  "always" backs
 * every anonymous mapping with huge pages where it can, not only those
 * that ask (arena.c keeps a small program's heap out of them then). */
mia_thp_mode_t mia_prim_thp_mode(void) {
  static _Atomic(int) mode = -1;   /* -1: not read yet */
  int m = atomic_load_explicit(&mode, memory_order_relaxed);
  if (m < 0) {
    char buf[128];
    m = MIA_THP_NEVER;   /* also where the file is missing: no THP in the kernel */
    if (mia_prim_read_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof buf)) {
      if (strstr(buf, "[always]") != NULL) m = MIA_THP_ALWAYS;
      else if (strstr(buf, "[madvise]") != NULL) m = MIA_THP_MADVISE;
    }
    atomic_store_explicit(&mode, m, memory_order_relaxed);
  }
  return (mia_thp_mode_t)m;
}

/* /sys/devices/system/node/online holds a list such as "0" or "0-3,5". */
size_t mia_prim_numa_node_count(void) {
  char buf[256];
  if (!mia_prim_read_file("/sys/devices/system/node/online", buf, sizeof buf)) return 1;
  size_t count = 0;
  const char *s = buf;
  while (*s >= '0' && *s <= '9') {
    long lo = 0, hi;
    while (*s >= '0' && *s <= '9') lo = lo * 10 + (*s++ - '0');
    hi = lo;
    if (*s == '-') {
      s++;
      hi = 0;
      while (*s >= '0' && *s <= '9') hi = hi * 10 + (*s++ - '0');
    }
    if (hi >= lo) count += (size_t)(hi - lo + 1);
    if (*s == ',') s++;
  }
  return count ? count : 1;
}

long mia_prim_gettid(void) { return syscall(SYS_gettid); }

static uint64_t timespec_ns(const struct timespec *ts) {
  return (uint64_t)ts->tv_sec * 1000000000u + (uint64_t)ts->tv_nsec;
}

uint64_t mia_prim_clock_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return timespec_ns(&ts);
}

uint64_t mia_prim_clock_ms(void) { return mia_prim_clock_ns() / 1000000u; }

/* The coarse clock is the time of the last timer tick: a few ns to read,
 * where the precise one costs 25 ns on this project's VM (it reads the
 * hypervisor's clock page).  It trails the precise clock by at most a tick;
 * two of its resolutions keep the bound where a tick comes late.  Where it
 * cannot be read (no vDSO, and a seccomp filter refuses the system call),
 * the precise clock is an upper bound of itself; the first read finds out,
 * keeping errno, since frees call this. */
#define MIA_COARSE_UNUSABLE UINT64_MAX

static uint64_t coarse_slack_ms(void) {
  MIA_KEEP_ERRNO;
  struct timespec res, now;
  if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) != 0 || clock_gettime(CLOCK_MONOTONIC_COARSE, &now) != 0)
    return MIA_COARSE_UNUSABLE;
  return 2 * (timespec_ns(&res) / 1000000u + 1);
}

uint64_t mia_prim_clock_ms_upper(void) {
  static uint64_t slack_ms;   /* 0: not known yet; threads may race to set it, to the same value */
  uint64_t slack = __atomic_load_n(&slack_ms, __ATOMIC_RELAXED);
  if (slack == 0) {
    slack = coarse_slack_ms();
    __atomic_store_n(&slack_ms, slack, __ATOMIC_RELAXED);
  }
  struct timespec ts;
  if (slack == MIA_COARSE_UNUSABLE || clock_gettime(CLOCK_MONOTONIC_COARSE, &ts) != 0) return mia_prim_clock_ms();
  return timespec_ns(&ts) / 1000000u + slack;
}

/* The same clock through the system call: libc's clock_gettime (a vDSO
 * call) would be the only thing in its 64 KiB of libc text that a small
 * program runs, and the kernel maps those pages around it on the first
 * call (fault-around): 125 KiB more peak RSS for /bin/true.  Start-up
 * reads the clock once, so a system call's 0.2 us does not matter. */
uint64_t mia_prim_clock_ms_startup(void) {
  MIA_KEEP_ERRNO;
  struct timespec ts;
  if (syscall(SYS_clock_gettime, CLOCK_MONOTONIC, &ts) != 0) return mia_prim_clock_ms();   /* a filter refused it */
  return timespec_ns(&ts) / 1000000u;
}

void mia_prim_futex_wait(int *addr, int expected) {
  MIA_KEEP_ERRNO;
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, NULL, NULL, 0);
}

void mia_prim_futex_wait_ms(int *addr, int expected, uint64_t timeout_ms) {
  MIA_KEEP_ERRNO;
  struct timespec ts = {(time_t)(timeout_ms / 1000), (long)(timeout_ms % 1000) * 1000000L};
  syscall(SYS_futex, addr, FUTEX_WAIT_PRIVATE, expected, timeout_ms ? &ts : NULL, NULL, 0);
}

void mia_prim_futex_wake(int *addr, int count) {
  MIA_KEEP_ERRNO;
  syscall(SYS_futex, addr, FUTEX_WAKE_PRIVATE, count, NULL, NULL, 0);
}

void mia_prim_yield(void) { sched_yield(); }

/* AT_SECURE is set by the kernel for setuid/setgid and capability-raising
 * execs; comparing ids also covers a process that changed them itself. */
bool mia_prim_is_privileged(void) {
#ifdef HAVE_GETAUXVAL
  if (getauxval(AT_SECURE) != 0) return true;
#endif
  return getuid() != geteuid() || getgid() != getegid();
}

/* glibc's fork takes its stdio list lock after the atfork handlers have
 * run, so a fork handler that takes locks malloc needs inverts the order
 * glibc keeps for its own malloc (list lock first, malloc's locks after:
 * getdelim allocates holding a FILE's lock, and fflush(NULL) holds the
 * list lock while it waits for that FILE).  A forking thread holding our
 * locks would wait for the list lock, a flushing thread for the FILE, and
 * the reading thread in malloc for our lock.  So the prepare handler
 * takes the list lock first: it is recursive, fork takes it again, and
 * releases its own take in the parent before our parent handler releases
 * ours.  In the child it is reset (glibc resets it there itself when the
 * parent had threads; resetting twice is harmless).  Weak references: a C
 * library without these functions has no such lock to order against. */
extern void _IO_list_lock(void) __attribute__((weak));
extern void _IO_list_unlock(void) __attribute__((weak));
extern void _IO_list_resetlock(void) __attribute__((weak));

void mia_prim_fork_stdio_lock(void) {
  if (_IO_list_lock != NULL && _IO_list_unlock != NULL && _IO_list_resetlock != NULL) _IO_list_lock();
}

void mia_prim_fork_stdio_unlock(bool child) {
  if (_IO_list_lock == NULL || _IO_list_unlock == NULL || _IO_list_resetlock == NULL) return;
  if (child) _IO_list_resetlock();
  else _IO_list_unlock();
}

static char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c; }

/* Whether entry ("NAME=value") starts with the len characters of name. */
static bool prefix_matches(const char *entry, const char *name, size_t len) {
  for (size_t i = 0; i < len; i++) {
    char a = ascii_upper(entry[i]);
    if (a != ascii_upper(name[i]) || a == 0) return false;
  }
  return true;
}

static bool name_matches(const char *entry, const char *name, size_t len) {
  return prefix_matches(entry, name, len) && entry[len] == '=';
}

static void copy_value(const char *v, char *buf, size_t bufsize) {
  size_t n = strlen(v);
  if (n >= bufsize) n = bufsize - 1;
  memcpy(buf, v, n);
  buf[n] = 0;
}

/* When preloaded, the dynamic linker may call malloc before libc has set
 * environ; the kernel's copy in /proc/self/environ is there from exec. */
static bool getenv_from_proc(const char *name, size_t len, char *buf, size_t bufsize) {
  static char env[65536];
  long fd = raw_open("/proc/self/environ");
  if (fd < 0) return false;
  size_t total = 0;
  long n;
  while (total + 1 < sizeof env &&
         (n = syscall(SYS_read, (int)fd, env + total, sizeof env - 1 - total)) > 0)
    total += (size_t)n;
  syscall(SYS_close, (int)fd);
  env[total] = 0;
  for (size_t i = 0; i < total; i += strlen(env + i) + 1) {
    if (name_matches(env + i, name, len)) {
      copy_value(env + i + len + 1, buf, bufsize);
      return true;
    }
  }
  return false;
}

/* Environment names match case-insensitively; the privileged check is the
 * caller's (options.c) so this stays a plain lookup. */
bool mia_prim_getenv(const char *name, char *buf, size_t bufsize) {
  MIA_KEEP_ERRNO;
  if (bufsize == 0) return false;
  size_t len = strlen(name);
  if (environ == NULL) return getenv_from_proc(name, len, buf, bufsize);
  for (char **e = environ; *e != NULL; e++) {
    if (name_matches(*e, name, len)) {
      copy_value(*e + len + 1, buf, bufsize);
      return true;
    }
  }
  return false;
}

/* Whether any variable's name starts with prefix (matched the same way);
 * true when environ is not set up yet, so that callers look further. */
bool mia_prim_env_has_prefix(const char *prefix) {
  size_t len = strlen(prefix);
  if (environ == NULL) return true;
  for (char **e = environ; *e != NULL; e++)
    if (prefix_matches(*e, prefix, len)) return true;
  return false;
}

void mia_prim_write_stderr(const char *msg, size_t len) {
  MIA_KEEP_ERRNO;
  while (len > 0) {
    long n = syscall(SYS_write, 2, msg, len);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    msg += n;
    len -= (size_t)n;
  }
}

bool mia_prim_random_buf(void *buf, size_t len) {
  MIA_KEEP_ERRNO;
  uint8_t *p = buf;
  while (len > 0) {
    long n = syscall(SYS_getrandom, p, len, 0x1 /* GRND_NONBLOCK */);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    len -= (size_t)n;
  }
  return true;
}

void mia_prim_process_times(uint64_t *user_ms, uint64_t *sys_ms, uint64_t *peak_rss,
                            uint64_t *page_faults) {
  MIA_KEEP_ERRNO;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  getrusage(RUSAGE_SELF, &ru);
  *user_ms = (uint64_t)ru.ru_utime.tv_sec * 1000 + (uint64_t)ru.ru_utime.tv_usec / 1000;
  *sys_ms = (uint64_t)ru.ru_stime.tv_sec * 1000 + (uint64_t)ru.ru_stime.tv_usec / 1000;
  *peak_rss = (uint64_t)ru.ru_maxrss * 1024;
  *page_faults = (uint64_t)ru.ru_majflt + (uint64_t)ru.ru_minflt;
}

/* Second field of /proc/self/statm is the resident set in pages. */
size_t mia_prim_current_rss(void) {
  char buf[128];
  if (!mia_prim_read_file("/proc/self/statm", buf, sizeof buf)) return 0;
  const char *s = buf;
  while (*s && *s != ' ') s++;
  size_t pages = 0;
  while (*s == ' ') s++;
  while (*s >= '0' && *s <= '9') pages = pages * 10 + (size_t)(*s++ - '0');
  return pages * mia_prim_page_size();
}

void mia_prim_abort(void) {
  signal(SIGABRT, SIG_DFL);
  raise(SIGABRT);
  _exit(134);
}

/* prim.h -- the OS primitive layer.
 *
 * Every system call the allocator makes goes through this interface, so the
 * rest of the code never includes an OS header and the port to another OS is
 * one file.  Nothing here may call malloc: these functions run inside malloc.
 * Nor may they change errno, for the same reason (free must leave it
 * alone): failures come back as return values.
 */
#ifndef MIALLOC_PRIM_H
#define MIALLOC_PRIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Memory. Reserved memory is readable and writable but takes no RAM until
 * touched (nor commit charge, where the kernel overcommits); purged memory
 * reads as zero afterwards. */
void  *mia_prim_reserve(size_t size, size_t alignment, bool allow_thp);
/* Commit on demand (arenas, by default): where the kernel does not
 * overcommit, reserved memory is charged against the commit limit as soon
 * as it is mapped, and mlockall faults in every accessible mapping, so
 * arenas map uncommitted memory (inaccessible, or read-only reading zero
 * with readable), which is neither, and commit what they hand out.
 * commit: writable and charged (false at the commit limit); decommit:
 * pages and charge dropped, back to what reserve_uncommitted made. */
bool   mia_prim_overcommits(void);
/* Whether the kernel would grant one writable mapping of size bytes
 * (vm.overcommit_memory=0: not beyond RAM plus swap). */
bool   mia_prim_may_back(size_t size);
void  *mia_prim_reserve_uncommitted(size_t size, size_t alignment, bool readable);
bool   mia_prim_commit(void *p, size_t size);
bool   mia_prim_decommit(void *p, size_t size, bool readable);
void   mia_prim_want_thp(void *p, size_t size);
void   mia_prim_release(void *p, size_t size);
bool   mia_prim_purge(void *p, size_t size, bool lazy);
typedef enum { MIA_PROT_NONE, MIA_PROT_READ, MIA_PROT_RW } mia_prot_t;
bool   mia_prim_protect(void *p, size_t size, mia_prot_t prot);
/* Guard markers (Linux >= 6.13): pages that fault on any access, set
 * without changing the mapping's protection, so without splitting it, and
 * kept through later protection changes of the range around them.
 * false where the kernel has none (EINVAL). */
bool   mia_prim_guard_set(void *p, size_t size);
/* Page guards (secure builds): a range that faults on any access.  A
 * guard marker where the kernel has them, else PROT_NONE within a budget
 * that keeps the process well below its mapping limit; false when the
 * range stays accessible.  guard_off lifts every guard in a range; guards
 * says how many it holds (they return to the budget); replaceable: the
 * range is the allocator's own mapping, which may be replaced by a fresh
 * one (its contents lost) where the kernel refuses to lift a marker. */
bool   mia_prim_guard_on(void *p, size_t size);
void   mia_prim_guard_off(void *p, size_t size, size_t guards, bool replaceable);

/* SIGSEGV: install fn (addr is the faulting address); the previous
 * handler comes back in *old_fun (SA_SIGINFO style) or *old_plain (a plain
 * handler), both NULL for the default action or SIG_IGN. */
typedef void (mia_prim_fault_fun)(int sig, void *addr, void *info, void *ctx);
bool   mia_prim_on_segv(mia_prim_fault_fun *fn, mia_prim_fault_fun **old_fun, void (**old_plain)(int));
void   mia_prim_default_segv(const void *info);   /* the handler's siginfo_t */
void  *mia_prim_reserve_huge_pages(size_t size);
void   mia_prim_no_thp(void *p, size_t size);
void   mia_prim_no_dump(void *p, size_t size);
bool   mia_prim_populate(void *p, size_t size);
size_t mia_prim_page_size(void);
typedef enum { MIA_THP_NEVER, MIA_THP_MADVISE, MIA_THP_ALWAYS } mia_thp_mode_t;
mia_thp_mode_t mia_prim_thp_mode(void);   /* the system's THP mode, read once */
size_t mia_prim_numa_node_count(void);

/* Threads and time. */
long     mia_prim_gettid(void);
uint64_t mia_prim_clock_ms(void);       /* monotonic milliseconds */
uint64_t mia_prim_clock_ns(void);
uint64_t mia_prim_clock_ms_startup(void);  /* the same, without libc's clock_gettime */
uint64_t mia_prim_clock_ms_upper(void);    /* cheap, never below mia_prim_clock_ms() */
void     mia_prim_futex_wait(int *addr, int expected);
void     mia_prim_futex_wait_ms(int *addr, int expected, uint64_t timeout_ms);  /* 0: no timeout */
void     mia_prim_futex_wake(int *addr, int count);
void     mia_prim_yield(void);

/* Process. */
bool   mia_prim_is_privileged(void);    /* setuid/setgid/AT_SECURE */
/* Around fork: the C library's stdio list lock, taken before the
 * allocator's locks (see linux.c); child: reset, not released. */
void   mia_prim_fork_stdio_lock(void);
void   mia_prim_fork_stdio_unlock(bool child);
bool   mia_prim_getenv(const char *name, char *buf, size_t bufsize);
bool   mia_prim_env_has_prefix(const char *prefix);
void   mia_prim_write_stderr(const char *msg, size_t len);
bool   mia_prim_random_buf(void *buf, size_t len);
bool   mia_prim_read_file(const char *path, char *buf, size_t bufsize);  /* raw syscalls */
void   mia_prim_process_times(uint64_t *user_ms, uint64_t *sys_ms, uint64_t *peak_rss,
                              uint64_t *page_faults);
size_t mia_prim_current_rss(void);
void   mia_prim_abort(void) __attribute__((noreturn));

/* The thread pointer is unique per live thread and costs one instruction: it
 * serves as the thread id that pages record as their owner. */
static inline uintptr_t mia_prim_thread_id(void) {
#if defined(MIALLOC_HAVE_THREAD_POINTER)
  return (uintptr_t)__builtin_thread_pointer();
#elif defined(__x86_64__)
  uintptr_t tp;
  __asm__("mov %%fs:0, %0" : "=r"(tp));
  return tp;
#elif defined(__aarch64__)
  uintptr_t tp;
  __asm__ volatile("mrs %0, tpidr_el0" : "=r"(tp));
  return tp;
#else
  static __thread char mia_tid_anchor;
  return (uintptr_t)&mia_tid_anchor;
#endif
}

#endif

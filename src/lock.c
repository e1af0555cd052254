/* lock.c -- a small futex lock for the rare paths (arenas, abandoned
 * segments, metadata).  It needs no initialisation, never allocates, and is
 * what the fork handlers take and release.  It knows its holder, so the
 * fork handlers can tell a lock the forking thread holds itself. */
#include "internal.h"

_Static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "the futex waits on the low half of the lock word");

static inline void mia_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

#define MIA_LOCK_HELD    ((uintptr_t)1)
#define MIA_LOCK_WAITERS ((uintptr_t)2)

/* The kernel waits on 32 bits: the low half of the word (x86-64 and
 * aarch64 are little-endian), which holds the flag bits.  A waiter sleeps
 * only while that half still reads what it saw with its waiters bit set:
 * an unlock clears it, and a new holder that came in without waiting has
 * the bit clear, so either way the sleep ends or never starts. */
static int *mia_lock_low(mia_lock_t *lock) { return (int *)&lock->word; }

/* Acquisition and ownership are one compare-and-swap, so there is no
 * moment when the lock is held and its holder unknown (a signal handler
 * that forks could arrive in such a moment: see below). */
void mia_lock(mia_lock_t *lock) {
  uintptr_t me = mia_prim_thread_id();
  uintptr_t expected = 0;
  if (__atomic_compare_exchange_n(&lock->word, &expected, me | MIA_LOCK_HELD, false, __ATOMIC_ACQUIRE,
                                  __ATOMIC_RELAXED))
    return;
  for (int spin = 0; spin < 64; spin++) {
    expected = 0;
    if (__atomic_load_n(&lock->word, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(&lock->word, &expected, me | MIA_LOCK_HELD, false, __ATOMIC_ACQUIRE,
                                    __ATOMIC_RELAXED))
      return;
    mia_cpu_relax();
  }
  /* slow: take it marked as waited for (others may be asleep behind us),
   * or mark the holder's word and sleep */
  for (;;) {
    uintptr_t w = __atomic_load_n(&lock->word, __ATOMIC_RELAXED);
    if (w == 0) {
      if (__atomic_compare_exchange_n(&lock->word, &w, me | MIA_LOCK_HELD | MIA_LOCK_WAITERS, false,
                                      __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
      continue;
    }
    if (!(w & MIA_LOCK_WAITERS)) {
      if (!__atomic_compare_exchange_n(&lock->word, &w, w | MIA_LOCK_WAITERS, false, __ATOMIC_RELAXED,
                                       __ATOMIC_RELAXED))
        continue;
      w |= MIA_LOCK_WAITERS;
    }
    mia_prim_futex_wait(mia_lock_low(lock), (int)(uint32_t)w);
  }
}

/* Never waits: for the purge thread, which must not stall behind an
 * owner or form a lock cycle with one. */
bool mia_trylock(mia_lock_t *lock) {
  uintptr_t expected = 0;
  return __atomic_compare_exchange_n(&lock->word, &expected, mia_prim_thread_id() | MIA_LOCK_HELD, false,
                                     __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

void mia_unlock(mia_lock_t *lock) {
  if (__atomic_exchange_n(&lock->word, 0, __ATOMIC_RELEASE) & MIA_LOCK_WAITERS)
    mia_prim_futex_wake(mia_lock_low(lock), 1);
}

static bool mia_lock_mine(mia_lock_t *lock) {
  return (__atomic_load_n(&lock->word, __ATOMIC_RELAXED) & ~(MIA_LOCK_HELD | MIA_LOCK_WAITERS)) ==
         mia_prim_thread_id();
}

/* A program may fork from a signal handler (crash reporters do) that
 * interrupted its thread inside the allocator, holding a lock: waiting for
 * it would wait forever, as glibc's malloc does not. */
void mia_lock_fork_prepare(mia_lock_t *lock) {
  lock->fork_skipped = mia_lock_mine(lock);
  if (!lock->fork_skipped) mia_lock(lock);
}

void mia_lock_fork_parent(mia_lock_t *lock) {
  if (lock->fork_skipped) lock->fork_skipped = false;
  else mia_unlock(lock);
}

/* The child has only the forking thread: every other holder is gone. */
void mia_lock_fork_child(mia_lock_t *lock) {
  if (lock->fork_skipped) {
    lock->fork_skipped = false;
    return;
  }
  lock->word = 0;
}

void mia_lock_fork(mia_lock_t *lock, mia_fork_step_t step) {
  if (step == MIA_FORK_PREPARE) mia_lock_fork_prepare(lock);
  else if (step == MIA_FORK_PARENT) mia_lock_fork_parent(lock);
  else mia_lock_fork_child(lock);
}

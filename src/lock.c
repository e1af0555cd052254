/* lock.c -- a small futex lock for the rare paths (arenas, abandoned
 * segments, metadata).  It needs no initialisation, never allocates, and is
 * what the fork handlers take and release. */
#include "internal.h"

static inline void mia_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ volatile("yield");
#endif
}

/* States: 0 free, 1 held, 2 held with waiters. */
void mia_lock(int *lock) {
  int expected = 0;
  if (__atomic_compare_exchange_n(lock, &expected, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
    return;
  for (int spin = 0; spin < 64; spin++) {
    expected = 0;
    if (__atomic_load_n(lock, __ATOMIC_RELAXED) == 0 &&
        __atomic_compare_exchange_n(lock, &expected, 1, false, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
      return;
    mia_cpu_relax();
  }
  while (__atomic_exchange_n(lock, 2, __ATOMIC_ACQUIRE) != 0)
    mia_prim_futex_wait(lock, 2);
}

void mia_unlock(int *lock) {
  if (__atomic_exchange_n(lock, 0, __ATOMIC_RELEASE) == 2)
    mia_prim_futex_wake(lock, 1);
}

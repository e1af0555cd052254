/* cpu.c -- CPU features detected once at start-up, and the copy/clear
 * routines that use them.
 *
 * With fast short rep movsb (FSRM) or fast short rep stosb (FSRS) a plain
 * rep string instruction beats a call into libc's memcpy/memset for the
 * sizes realloc and calloc move; with only ERMS it wins for large sizes.
 */
#include "internal.h"

#if defined(MIALLOC_HAVE_CPUID)
#include <cpuid.h>
#endif

mia_cpu_features_t mia_cpu;

void mia_cpu_detect(void) {
#if defined(MIALLOC_HAVE_CPUID)
  unsigned a, b, c, d;
  if (__get_cpuid(1, &a, &b, &c, &d)) mia_cpu.popcnt = (c >> 23) & 1;
  if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
    mia_cpu.erms = (b >> 9) & 1;
    mia_cpu.fsrm = (d >> 4) & 1;
  }
  if (__get_cpuid_count(7, 1, &a, &b, &c, &d)) mia_cpu.fsrs = (a >> 11) & 1;
  mia_cpu.detected = true;
#endif
  mia_verbose("cpu features: cpuid=%s erms=%d fsrm=%d fsrs=%d popcnt=%d\n",
              mia_cpu.detected ? "yes" : "no", mia_cpu.erms, mia_cpu.fsrm, mia_cpu.fsrs,
              mia_cpu.popcnt);
}

void mia_memcpy(void *dst, const void *src, size_t n) {
#if defined(__x86_64__)
  if (mia_cpu.fsrm || (mia_cpu.erms && n >= 2048)) {
    __asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
    return;
  }
#endif
  memcpy(dst, src, n);
}

void *mia_memzero(void *dst, size_t n) {
#if defined(__x86_64__)
  if (mia_cpu.fsrs || (mia_cpu.erms && n >= 2048)) {
    void *cursor = dst;
    __asm__ volatile("rep stosb" : "+D"(cursor), "+c"(n) : "a"(0) : "memory");
    return dst;
  }
#endif
  return memset(dst, 0, n);
}

/* test-cpu.c -- start-up CPU feature detection agrees with the kernel's
 * /proc/cpuinfo flags and with the verbose report. */
#include "internal.h"
#include "../tap.h"

#include <stdio.h>
#if defined(MIALLOC_HAVE_CPUID)
#include <cpuid.h>
#endif

static bool cpuinfo_has(const char *flags, const char *flag) {
  size_t n = strlen(flag);
  for (const char *p = flags; (p = strstr(p, flag)) != NULL; p += n)
    if ((p == flags || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\n' || p[n] == 0)) return true;
  return false;
}

static bool read_flags(char *buf, size_t n) {
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (f == NULL) return false;
  char line[8192];
  bool found = false;
  while (fgets(line, sizeof line, f) != NULL) {
    if (strncmp(line, "flags", 5) == 0) {
      snprintf(buf, n, "%s", strchr(line, ':') + 1);
      found = true;
      break;
    }
  }
  fclose(f);
  return found;
}

static char captured[4096];
static void capture(const char *msg, void *arg) {
  (void)arg;
  strncat(captured, msg, sizeof captured - strlen(captured) - 1);
}

int main(void) {
#if !defined(MIALLOC_HAVE_CPUID)
  TAP_OK(!mia_cpu.detected, "no cpuid: nothing detected");
  return tap_done();
#else
  mi_thread_init();
  TAP_OK(mia_cpu.detected, "features were detected at start-up");
  char flags[8192];
  TAP_OK(read_flags(flags, sizeof flags), "/proc/cpuinfo has a flags line");
  TAP_OK(mia_cpu.erms == cpuinfo_has(flags, "erms"), "erms matches /proc/cpuinfo (%d)", mia_cpu.erms);
  TAP_OK(mia_cpu.fsrm == cpuinfo_has(flags, "fsrm"), "fsrm matches /proc/cpuinfo (%d)", mia_cpu.fsrm);
  TAP_OK(mia_cpu.popcnt == cpuinfo_has(flags, "popcnt"), "popcnt matches /proc/cpuinfo (%d)", mia_cpu.popcnt);
  /* older kernels do not list fsrs: where they do, it must agree; where
   * not, compare with our own read of cpuid leaf 7, subleaf 1 (EAX bit 11) */
  if (cpuinfo_has(flags, "fsrs")) {
    TAP_OK(mia_cpu.fsrs, "fsrs matches /proc/cpuinfo");
  } else {
    unsigned a = 0, b, c, d;
    bool fsrs = __get_cpuid_count(7, 1, &a, &b, &c, &d) && ((a >> 11) & 1);
    TAP_OK(mia_cpu.fsrs == fsrs, "fsrs (not listed by this kernel) matches cpuid leaf 7.1 (%d)", mia_cpu.fsrs);
  }

  /* the verbose report says the same */
  mi_register_output(capture, NULL);
  mi_option_enable(mi_option_verbose);
  mia_cpu_detect();
  mi_option_disable(mi_option_verbose);
  mi_register_output(NULL, NULL);
  char expect[128];
  snprintf(expect, sizeof expect, "erms=%d fsrm=%d fsrs=%d popcnt=%d", mia_cpu.erms, mia_cpu.fsrm,
           mia_cpu.fsrs, mia_cpu.popcnt);
  TAP_OK(strstr(captured, expect) != NULL, "verbose output reports the features (%s)", expect);

  /* and the copy/clear routines that use them work at every size */
  bool ok = true;
  static uint8_t a[70000], b[70000];
  for (size_t n = 0; n < sizeof a && ok; n = n * 2 + 1) {
    memset(a, 0x11, n);
    mia_memcpy(b, a, n);
    ok = memcmp(a, b, n) == 0;
    mia_memzero(b, n);
    for (size_t i = 0; i < n && ok; i++) ok = b[i] == 0;
  }
  TAP_OK(ok, "mia_memcpy/mia_memzero correct for sizes up to 64 KiB");
  return tap_done();
#endif
}

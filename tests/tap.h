/* tap.h -- a minimal TAP producer for mialloc's C tests.
 *
 * Each check prints "ok N - name" or "not ok N - name" with the failing
 * expression; tap_done() prints the plan and returns the exit status.
 */
#ifndef MIALLOC_TAP_H
#define MIALLOC_TAP_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static int tap_count;
static int tap_failed;

static inline void tap_diag(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  printf("# ");
  vprintf(fmt, ap);
  printf("\n");
  va_end(ap);
  fflush(stdout);
}

static inline int tap_check(int cond, const char *expr, const char *file, int line, const char *fmt, ...) {
  va_list ap;
  tap_count++;
  printf("%s %d - ", cond ? "ok" : "not ok", tap_count);
  va_start(ap, fmt);
  vprintf(fmt, ap);
  va_end(ap);
  printf("\n");
  if (!cond) {
    tap_failed++;
    printf("#   failed: %s (%s:%d)\n", expr, file, line);
  }
  fflush(stdout);
  return cond;
}

#define TAP_OK(cond, ...) tap_check(!!(cond), #cond, __FILE__, __LINE__, __VA_ARGS__)

static inline int tap_done(void) {
  printf("1..%d\n", tap_count);
  fflush(stdout);
  return tap_failed == 0 ? 0 : 1;
}

#endif

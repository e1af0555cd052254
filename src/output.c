/* output.c -- messages to stderr or to a registered output function.
 *
 * Messages are formatted into a stack buffer with vsnprintf (glibc's does not
 * allocate for the plain conversions used here) and written with one write
 * call, so lines from different threads do not interleave.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static mia_callback_t mia_out_cb;
static mia_callback_t mia_error_cb;
static _Atomic(long) mia_error_count;
static _Atomic(long) mia_warning_count;

mia_export void mi_register_output(mi_output_fun *out, void *arg) {
  mia_callback_set(&mia_out_cb, (mia_callback_fun *)out, arg);
}

mia_export void mi_register_error(mi_error_fun *fun, void *arg) {
  mia_callback_set(&mia_error_cb, (mia_callback_fun *)fun, arg);
}

static void mia_emit(mi_output_fun *out, void *arg, const char *msg) {
  if (out != NULL) out(msg, arg);
  else mia_prim_write_stderr(msg, strlen(msg));
}

static void mia_vformat(mi_output_fun *out, void *arg, const char *prefix, const char *fmt,
                        va_list ap) {
  char buf[512];
  size_t n = 0;
  if (prefix != NULL) {
    n = strlen(prefix);
    if (n >= sizeof buf) n = sizeof buf - 1;
    memcpy(buf, prefix, n);
  }
  vsnprintf(buf + n, sizeof buf - n, fmt, ap);
  mia_emit(out, arg, buf);
}

static mi_output_fun *mia_registered_output(void **arg) {
  return (mi_output_fun *)mia_callback_get(&mia_out_cb, arg);
}

/* To the registered output function (stderr when none). */
static void mia_vformat_registered(const char *prefix, const char *fmt, va_list ap) {
  void *arg;
  mi_output_fun *out = mia_registered_output(&arg);
  mia_vformat(out, arg, prefix, fmt, ap);
}

void mia_output_to(mi_output_fun *out, void *arg, const char *fmt, ...) {
  if (out == NULL) out = mia_registered_output(&arg);
  va_list ap;
  va_start(ap, fmt);
  mia_vformat(out, arg, NULL, fmt, ap);
  va_end(ap);
}

void mia_message(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mia_vformat_registered("mialloc: ", fmt, ap);
  va_end(ap);
}

void mia_verbose(const char *fmt, ...) {
  if (mia_option_get_fast(mi_option_verbose) == 0) return;
  va_list ap;
  va_start(ap, fmt);
  mia_vformat_registered("mialloc: ", fmt, ap);
  va_end(ap);
}

void mia_warning(const char *fmt, ...) {
  if (mia_option_get_fast(mi_option_show_errors) == 0 &&
      mia_option_get_fast(mi_option_verbose) == 0) return;
  if (atomic_fetch_add(&mia_warning_count, 1) >= mia_option_get_fast(mi_option_max_warnings)) return;
  va_list ap;
  va_start(ap, fmt);
  mia_vformat_registered("mialloc: warning: ", fmt, ap);
  va_end(ap);
}

/* ---- errors ----
 *
 * Every error report is counted in the statistics, passed to the error
 * callback (mi_register_error) with an errno-style code, and ends in abort()
 * when MIALLOC_ABORT_ON_ERROR is set.  Whether a message is printed depends
 * on the kind (MIA_SHOW_* flags): conditions the program cannot see otherwise (a
 * foreign pointer given to free) are printed by default; failed allocation
 * requests, which the program already learns from NULL and errno, only with
 * MIALLOC_VERBOSE=1 (or before the abort MIALLOC_ABORT_ON_ERROR makes of
 * them), so that a program probing with malloc(SIZE_MAX) under LD_PRELOAD
 * prints what it prints under glibc.  The codes:
 *   EFAULT     free/realloc of a pointer mialloc does not own
 *   EAGAIN     a double free (every build; secure and debug ones see more)
 *   ENOMEM     the OS refused memory (errno ENOMEM)
 *   EOVERFLOW  a size above the largest allocation, or count * size
 *              overflowing (errno ENOMEM, as C requires)
 *   EINVAL     an alignment that is not a power of two (errno EINVAL)
 */
static void mia_vreport(int err, int show, const char *fmt, va_list ap) {
  __atomic_fetch_add(&mia_stats_global.errors, 1, __ATOMIC_RELAXED);
  bool print;
  bool aborting = mia_option_get_fast(mi_option_abort_on_error) != 0;
  const char *prefix = "mialloc: error: ";
  if (show & MIA_SHOW_VERBOSE) {
    /* an abort is news the program cannot learn from NULL and errno: the
     * line is its only clue to why */
    print = mia_option_get_fast(mi_option_verbose) != 0 ||
            (aborting && mia_option_get_fast(mi_option_show_errors) != 0);
  } else {
    print = mia_option_get_fast(mi_option_show_errors) != 0 ||
            mia_option_get_fast(mi_option_verbose) != 0;
  }
  if (print) {
    _Atomic(long) *count = &mia_error_count;
    long max = mia_option_get_fast(mi_option_max_errors);
    if (show & MIA_SHOW_WARNING) {
      count = &mia_warning_count;
      max = mia_option_get_fast(mi_option_max_warnings);
      prefix = "mialloc: warning: ";
    }
    if (atomic_fetch_add(count, 1) < max)
      mia_vformat_registered(prefix, fmt, ap);
  }
  void *arg;
  mi_error_fun *fun = (mi_error_fun *)mia_callback_get(&mia_error_cb, &arg);
  if (fun != NULL) fun(err, arg);
  if (aborting) mia_prim_abort();
}

/* Printed whatever MIALLOC_SHOW_ERRORS says: the process is about to abort
 * and this line is the only clue to why. */
void mia_assert_fail(const char *expr, const char *file, int line, const char *func) {
  mia_message("assertion failed: %s (%s:%d, %s)\n", expr, file, line, func);
  mia_prim_abort();
  __builtin_unreachable();
}

void mia_report(int err, int show, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mia_vreport(err, show, fmt, ap);
  va_end(ap);
}

void mia_error(int err, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mia_vreport(err, MIA_SHOW_ERROR, fmt, ap);
  va_end(ap);
}

int mia_alloc_error(int err, size_t count, size_t size, size_t alignment) {
  int saved = errno;   /* the callback and the message must not change it */
  if (err == EINVAL) {
    mia_report(EINVAL, MIA_SHOW_VERBOSE, "invalid alignment %zu for an allocation of %zu bytes\n",
               alignment, size);
  } else if (err == EOVERFLOW && count != 1) {
    mia_report(EOVERFLOW, MIA_SHOW_VERBOSE, "allocation of %zu * %zu bytes overflows\n", count, size);
  } else if (err == EOVERFLOW) {
    mia_report(EOVERFLOW, MIA_SHOW_VERBOSE, "allocation of %zu bytes is too large\n", size);
  } else {
    mia_report(ENOMEM, MIA_SHOW_VERBOSE, "out of memory: could not allocate %zu bytes\n", size);
  }
  errno = saved;
  return err == EINVAL ? EINVAL : ENOMEM;
}

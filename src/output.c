/* output.c -- messages to stderr or to a registered output function.
 *
 * Messages are formatted into a stack buffer with vsnprintf (glibc's does not
 * allocate for the plain conversions used here) and written with one write
 * call, so lines from different threads do not interleave.
 */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>

static mi_output_fun *_Atomic mia_out_fun;
static void *_Atomic mia_out_arg;
static mi_error_fun *_Atomic mia_error_fun;
static void *_Atomic mia_error_arg;
static _Atomic(long) mia_error_count;
static _Atomic(long) mia_warning_count;

mia_export void mi_register_output(mi_output_fun *out, void *arg) {
  atomic_store(&mia_out_arg, arg);
  atomic_store(&mia_out_fun, out);
}

mia_export void mi_register_error(mi_error_fun *fun, void *arg) {
  atomic_store(&mia_error_arg, arg);
  atomic_store(&mia_error_fun, fun);
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

void mia_output_to(mi_output_fun *out, void *arg, const char *fmt, ...) {
  if (out == NULL) {
    out = atomic_load(&mia_out_fun);
    arg = atomic_load(&mia_out_arg);
  }
  va_list ap;
  va_start(ap, fmt);
  mia_vformat(out, arg, NULL, fmt, ap);
  va_end(ap);
}

void mia_message(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  mia_vformat(atomic_load(&mia_out_fun), atomic_load(&mia_out_arg), "mialloc: ", fmt, ap);
  va_end(ap);
}

void mia_verbose(const char *fmt, ...) {
  if (mia_option_get_fast(mi_option_verbose) == 0) return;
  va_list ap;
  va_start(ap, fmt);
  mia_vformat(atomic_load(&mia_out_fun), atomic_load(&mia_out_arg), "mialloc: ", fmt, ap);
  va_end(ap);
}

void mia_warning(const char *fmt, ...) {
  if (mia_option_get_fast(mi_option_show_errors) == 0 &&
      mia_option_get_fast(mi_option_verbose) == 0) return;
  if (atomic_fetch_add(&mia_warning_count, 1) >= mia_option_get_fast(mi_option_max_warnings)) return;
  va_list ap;
  va_start(ap, fmt);
  mia_vformat(atomic_load(&mia_out_fun), atomic_load(&mia_out_arg), "mialloc: warning: ", fmt, ap);
  va_end(ap);
}

/* Errors are reported (up to max_errors), passed to the error callback, and
 * abort only when MIALLOC_ABORT_ON_ERROR asks for it. */
void mia_error(int err, const char *fmt, ...) {
  bool show = mia_option_get_fast(mi_option_show_errors) != 0 ||
              mia_option_get_fast(mi_option_verbose) != 0;
  if (show && atomic_fetch_add(&mia_error_count, 1) < mia_option_get_fast(mi_option_max_errors)) {
    va_list ap;
    va_start(ap, fmt);
    mia_vformat(atomic_load(&mia_out_fun), atomic_load(&mia_out_arg), "mialloc: error: ", fmt, ap);
    va_end(ap);
  }
  mi_error_fun *fun = atomic_load(&mia_error_fun);
  if (fun != NULL) fun(err, atomic_load(&mia_error_arg));
  if (mia_option_get_fast(mi_option_abort_on_error) != 0) mia_prim_abort();
}

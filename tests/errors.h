/* errors.h -- counting what mialloc reports through its error callback,
 * for tests that provoke misuse on purpose: register on_error with
 * mi_register_error, then compare `errors` and `last_error` (the errno-style
 * code of the latest report) before and after. */
#ifndef MIALLOC_TEST_ERRORS_H
#define MIALLOC_TEST_ERRORS_H

#include <stdatomic.h>

static _Atomic(int) errors;
static _Atomic(int) last_error;

static void on_error(int err, void *arg) {
  (void)arg;
  atomic_store(&last_error, err);
  atomic_fetch_add(&errors, 1);
}

#endif

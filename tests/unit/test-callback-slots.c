/* test-callback-slots.c -- a registered function and its argument are
 * read as one pair (src/callback.c): a reader gets the last finished
 * registration whole while the next one is half written, and one that
 * read a slot the registration after next began to rewrite reads again.
 * The interleavings are set up by hand, one thread; tests/api/test-callbacks
 * races real registrations against reports. */
#include "internal.h"
#include "../tap.h"

#include <limits.h>

static void fun_a(void) {}
static void fun_b(void) {}
static void fun_c(void) {}
static void fun_d(void) {}
static int arg_a, arg_b, arg_c, arg_d;

static bool reads(mia_callback_t *cb, mia_callback_fun *fun, void *arg) {
  void *got_arg = NULL;
  mia_callback_fun *got = mia_callback_get(cb, &got_arg);
  return got == fun && got_arg == arg;
}

/* The first steps of a registration, as mia_callback_set takes them:
 * the mark, then the function's store, not yet the argument's. */
static unsigned begin_half(mia_callback_t *cb, mia_callback_fun *fun) {
  unsigned done = atomic_load(&cb->version);
  atomic_store(&cb->version, done + 1);
  atomic_store(&cb->slot[((done + 2) >> 1) & 1].fun, fun);
  return done;
}

static void finish(mia_callback_t *cb, unsigned done, void *arg) {
  atomic_store(&cb->slot[((done + 2) >> 1) & 1].arg, arg);
  atomic_store(&cb->version, done + 2);
}

int main(void) {
  static mia_callback_t cb;
  void *arg = &arg_a;
  TAP_OK(mia_callback_never_set(&cb) && mia_callback_get(&cb, &arg) == NULL && arg == NULL,
         "never registered: told by the version, and the pair reads empty");
  mia_callback_set(&cb, fun_a, &arg_a);
  TAP_OK(!mia_callback_never_set(&cb) && reads(&cb, fun_a, &arg_a), "one registration reads back");
  mia_callback_set(&cb, fun_b, &arg_b);
  TAP_OK(reads(&cb, fun_b, &arg_b), "a second one replaces it");

  /* a reader that took b's version, then c and d came */
  unsigned seen = atomic_load(&cb.version);
  unsigned c = begin_half(&cb, fun_c);
  TAP_OK(mia_callback_read_holds(&cb, seen), "c half written: b's slot still holds (c writes the other one)");
  TAP_OK(reads(&cb, fun_b, &arg_b), "c half written: a reader gets b whole");
  finish(&cb, c, &arg_c);
  TAP_OK(mia_callback_read_holds(&cb, seen) && reads(&cb, fun_c, &arg_c),
         "c finished: b's read still holds, and a new reader gets c");
  unsigned d = begin_half(&cb, fun_d);
  TAP_OK(!mia_callback_read_holds(&cb, seen), "d began rewriting b's slot: a read of it from b's version must be redone");
  TAP_OK(reads(&cb, fun_c, &arg_c), "d half written (its function stored, not its argument): a reader gets c whole");
  finish(&cb, d, &arg_d);
  TAP_OK(!mia_callback_read_holds(&cb, seen) && reads(&cb, fun_d, &arg_d), "d finished: a reader gets d");

  /* the version wraps past 0, which means "never registered" */
  atomic_store(&cb.version, UINT_MAX - 1);
  atomic_store(&cb.slot[((UINT_MAX - 1) >> 1) & 1].fun, fun_a);
  atomic_store(&cb.slot[((UINT_MAX - 1) >> 1) & 1].arg, &arg_a);
  TAP_OK(reads(&cb, fun_a, &arg_a), "at the last version before the wrap, the pair reads");
  mia_callback_set(&cb, fun_b, &arg_b);
  TAP_OK(!mia_callback_never_set(&cb) && reads(&cb, fun_b, &arg_b),
         "the registration that wraps skips 0 and reads back (version %u)", atomic_load(&cb.version));
  mia_callback_set(&cb, fun_c, &arg_c);
  TAP_OK(reads(&cb, fun_c, &arg_c), "and the one after it");
  return tap_done();
}

/* callback.c -- the functions a program registers (output, errors, deferred
 * free), each read together with its argument.
 *
 * Stored as two words, a function and its argument could be read torn: a
 * thread reporting an error while another registers a new pair could call
 * the new function with the old argument.  So each pair has two slots, and
 * registrations alternate between them.  A registration first marks the
 * version odd (one is being written), then fills its slot with release
 * stores, then publishes it (the version even again).  A reader takes the
 * slot of the last finished registration and reads the version again:
 * only the registration after next rewrites that slot, and a reader that
 * saw any of its stores sees its mark, so it reads again.  Readers never
 * wait for a writer: a signal handler that reports an error while its own
 * thread is in the middle of a registration reads the old pair.
 * Registrations are serialised by one lock, taken around fork. */
#include "internal.h"

static mia_lock_t mia_callback_lock;

void mia_callback_set(mia_callback_t *cb, mia_callback_fun *fun, void *arg) {
  mia_lock(&mia_callback_lock);
  unsigned done = atomic_load_explicit(&cb->version, memory_order_relaxed);   /* even: no writer but us */
  unsigned next = done + 2;
  if (next == 0) next = 4;   /* 0 says "never registered"; 4 names the same slot */
  /* release, as the version's every store: a reader whose acquire load
   * finds the mark sees the registration before it whole */
  atomic_store_explicit(&cb->version, done + 1, memory_order_release);
  unsigned i = (next >> 1) & 1;
  atomic_store_explicit(&cb->slot[i].fun, fun, memory_order_release);
  atomic_store_explicit(&cb->slot[i].arg, arg, memory_order_release);
  atomic_store_explicit(&cb->version, next, memory_order_release);
  mia_unlock(&mia_callback_lock);
}

void mia_callbacks_fork(mia_fork_step_t step) { mia_lock_fork(&mia_callback_lock, step); }

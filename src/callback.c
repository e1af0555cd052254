/* callback.c -- the functions a program registers (output, errors, deferred
 * free), each read together with its argument.
 *
 * Stored as two words, a function and its argument could be read torn: a
 * thread reporting an error while another registers a new pair could call
 * the new function with the old argument.  So each pair has two slots.  A
 * registration fills the slot not in use and then publishes it by bumping
 * the version; a reader takes the slot the version names and reads the
 * version again.  Only a second registration during the read rewrites that
 * slot, and the version then shows it, so the reader reads again.  Readers
 * never wait for a writer: a signal handler that reports an error while its
 * own thread is in the middle of a registration reads the old pair.
 * Registrations are serialised by one lock, taken around fork. */
#include "internal.h"

static mia_lock_t mia_callback_lock;

void mia_callback_set(mia_callback_t *cb, mia_callback_fun *fun, void *arg) {
  mia_lock(&mia_callback_lock);
  unsigned version = atomic_load_explicit(&cb->version, memory_order_relaxed) + 1;
  if (version == 0) version = 2;   /* 0 says "never registered"; the slots still alternate */
  /* a reader whose loads see these stores sees, after its fence, every
   * version before this one: at least the one it started from plus one */
  atomic_thread_fence(memory_order_release);
  atomic_store_explicit(&cb->slot[version & 1].fun, fun, memory_order_relaxed);
  atomic_store_explicit(&cb->slot[version & 1].arg, arg, memory_order_relaxed);
  atomic_store_explicit(&cb->version, version, memory_order_release);
  mia_unlock(&mia_callback_lock);
}

void mia_callbacks_fork(mia_fork_step_t step) { mia_lock_fork(&mia_callback_lock, step); }

/* tls.h -- how malloc finds the calling thread's default theap.
 *
 * The configure probe picks one model (see m4/mialloc-probes.m4); each is a
 * get/set pair so the hot paths never see the difference.  Before a thread
 * is initialised every model answers &mia_theap_empty, whose pages are all
 * empty, so the first malloc of a thread falls into the slow path and sets
 * the thread up there.
 */
#ifndef MIALLOC_TLS_H
#define MIALLOC_TLS_H

#include "internal.h"

#if defined(MIALLOC_TLS_THREAD_LOCAL)

extern __thread mia_theap_t *mia_theap_default __attribute__((tls_model("initial-exec")));
static inline mia_theap_t *mia_theap_get(void) { return mia_theap_default; }
static inline void mia_theap_set(mia_theap_t *theap) { mia_theap_default = theap; }

#elif defined(MIALLOC_TLS_FIXED_SLOT)

/* The slot starts as zero in every thread; storing the theap as an offset
 * from the empty theap makes zero mean "not initialised" with no branch. */
static inline mia_theap_t *mia_theap_get(void) {
  uintptr_t off;
  /* volatile: the compiler must not reuse a value read before a set */
  __asm__ volatile("mov %%fs:0x40, %0" : "=r"(off));
  return (mia_theap_t *)((uintptr_t)&mia_theap_empty + off);
}
static inline void mia_theap_set(mia_theap_t *theap) {
  uintptr_t off = (uintptr_t)theap - (uintptr_t)&mia_theap_empty;
  __asm__ volatile("mov %0, %%fs:0x40" : : "r"(off) : "memory");
}

#elif defined(MIALLOC_TLS_PTHREAD_KEYS)

#include <pthread.h>
/* Until the key exists it holds an invalid key, for which glibc's
 * pthread_getspecific returns NULL without touching memory. */
extern pthread_key_t mia_theap_key;
static inline mia_theap_t *mia_theap_get(void) {
  mia_theap_t *theap = (mia_theap_t *)pthread_getspecific(mia_theap_key);
  return mia_likely(theap != NULL) ? theap : &mia_theap_empty;
}
static inline void mia_theap_set(mia_theap_t *theap) {
  pthread_setspecific(mia_theap_key, theap == &mia_theap_empty ? NULL : theap);
}

#else
#error "configure chose no TLS model"
#endif

/* The calling thread's part of heap: its default theap in the common case
 * (the main heap, or a heap made default), else a short list walk. */
static inline mia_theap_t *mia_heap_theap(mi_heap_t *heap) {
  mia_theap_t *theap = mia_theap_get();
  if (mia_likely(atomic_load_explicit(&theap->heap, memory_order_relaxed) == heap && heap != NULL))
    return theap;
  return mia_heap_theap_slow(heap);
}

#endif

/* test-exit.c -- allocation and free late in a process's life: in atexit
 * handlers, in thread-local destructors of exiting threads, in library
 * destructors, and after mi_process_done.  A crash fails the test (the TAP
 * plan would be missing); the checks are printed from the last handler. */
#include "mialloc.h"
#include "../tap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

static void *kept_for_exit[64];
static pthread_key_t key;
/* threads exit at once and run their destructors together: atomic, or an
 * increment may be lost (CI once counted 3 of 4) */
static _Atomic int tls_destructor_ran;

static void tls_destructor(void *p) {
  /* runs after mialloc's own thread teardown may have happened */
  void *q = malloc(123);
  memset(q, 1, 123);
  free(p);
  free(q);
  atomic_fetch_add(&tls_destructor_ran, 1);
}

static void *thread_main(void *arg) {
  (void)arg;
  pthread_setspecific(key, malloc(1000));
  for (int i = 0; i < 100; i++) free(malloc(64));
  return NULL;
}

static void late_handler(void) {
  int ok = 1;
  for (int i = 0; i < 64; i++) {
    if (((unsigned char *)kept_for_exit[i])[0] != (unsigned char)i) ok = 0;
    free(kept_for_exit[i]);
  }
  void *p = malloc(5000);
  void *h = malloc(8u << 20);
  ok = ok && p && h;
  free(p);
  free(h);
  TAP_OK(ok, "atexit handler frees blocks from main and allocates anew");
  int ran = atomic_load(&tls_destructor_ran);
  TAP_OK(ran == 4, "thread-local destructors of 4 threads freed and allocated (%d)", ran);
  tap_done();
}

static void after_done_handler(void) {
  /* registered first, so it runs last: after the others */
  mi_process_done();
  void *p = malloc(77);
  free(p);
}

int main(void) {
  atexit(after_done_handler);
  atexit(late_handler);
  pthread_key_create(&key, tls_destructor);
  for (int i = 0; i < 64; i++) {
    kept_for_exit[i] = malloc(16 + (size_t)i * 1000);
    ((unsigned char *)kept_for_exit[i])[0] = (unsigned char)i;
  }
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, thread_main, NULL);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  return 0;
}

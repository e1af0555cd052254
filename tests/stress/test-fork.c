/* test-fork.c -- fork in a multi-threaded program while other threads are
 * inside the allocator (including its locks: huge allocations and new
 * segments take the arena lock).  The child must be able to allocate. */
#include "mialloc.h"
#include "../tap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static atomic_int stop;

static void *churn(void *arg) {
  size_t big = (size_t)(uintptr_t)arg;
  while (!atomic_load(&stop)) {
    void *p[16];
    for (int i = 0; i < 16; i++) {
      p[i] = malloc(big ? (5u << 20) + (size_t)i * 4096 : 16 + (size_t)i * 100);
      if (p[i]) memset(p[i], i, big ? 64 : 16);   /* within every block asked for */
    }
    for (int i = 0; i < 16; i++) free(p[i]);
  }
  return NULL;
}

int main(void) {
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i % 2));
  int ok = 0;
  const int forks = 100;
  for (int i = 0; i < forks; i++) {
    pid_t pid = fork();
    if (pid == 0) {
      /* a deadlock here would hang the test: alarm turns it into a failure */
      alarm(10);
      void *a = malloc(100), *b = malloc(6u << 20), *c = calloc(10, 1000);
      int good = a && b && c;
      free(a); free(b); free(c);
      _exit(good ? 0 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) ok++;
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  TAP_OK(ok == forks, "%d of %d children forked amid allocating threads could allocate", ok, forks);
  return tap_done();
}

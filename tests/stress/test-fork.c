/* test-fork.c -- fork in a multi-threaded program while other threads are
 * inside the allocator (including its locks: huge allocations and new
 * segments take the arena lock, guarded sampling its slot lock).  The
 * child must be able to allocate.  Fork from a signal handler that
 * interrupted the thread inside the allocator, holding a lock: the fork
 * must not wait for it.  And fork while other threads allocate holding a
 * stdio FILE's lock (getline) and flush every FILE (fflush(NULL)): the
 * allocator's fork handler must not invert the order of glibc's stdio
 * list lock and the allocator's locks. */
#include "mialloc.h"
#include "../tap.h"

#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/time.h>
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

/* fork amid threads churning blocks; every child must allocate */
static int fork_amid_churn(int forks) {
  pthread_t t[4];
  atomic_store(&stop, 0);
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, churn, (void *)(uintptr_t)(i % 2));
  int ok = 0;
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
  return ok;
}

/* ---- fork from a signal handler ---- */

static volatile sig_atomic_t handler_forks;

static void fork_in_handler(int sig) {
  (void)sig;
  pid_t pid = fork();
  if (pid == 0) _exit(0);   /* only async-signal-safe calls in this child */
  if (pid > 0) {
    waitpid(pid, NULL, 0);
    handler_forks++;
  }
}

/* Huge blocks take the arena lock on every malloc and free, so the
 * profiling timer's signal often lands while it is held. */
static void signal_fork_scenario(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = fork_in_handler;
  sa.sa_flags = SA_RESTART;
  sigaction(SIGPROF, &sa, NULL);
  struct itimerval it = {{0, 500}, {0, 500}};
  setitimer(ITIMER_PROF, &it, NULL);
  void *keep[8] = {0};
  for (unsigned long n = 0; handler_forks < 400; n++) {
    free(keep[n % 8]);
    keep[n % 8] = malloc((n % 3 == 0 ? 5u << 20 : 64 + n % 3000));
  }
  struct itimerval off = {{0, 0}, {0, 0}};
  setitimer(ITIMER_PROF, &off, NULL);
  _exit(0);
}

/* ---- fork against stdio ---- */

static FILE *shared_file;

static void *forker(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) {
    pid_t pid = fork();
    if (pid == 0) _exit(0);
    if (pid > 0) waitpid(pid, NULL, 0);
  }
  return NULL;
}

static void *flusher(void *arg) {
  (void)arg;
  while (!atomic_load(&stop)) fflush(NULL);
  return NULL;
}

/* A new thread's first malloc (its thread data: a lock) is made by
 * getline, holding the shared FILE's lock, which fflush(NULL) waits for
 * holding the list lock, which fork waits for. */
static void *reader(void *arg) {
  (void)arg;
  char *line = NULL;
  size_t n = 0;
  if (getline(&line, &n, shared_file) < 0) rewind(shared_file);
  free(line);
  return NULL;
}

static void stdio_fork_scenario(void) {
  shared_file = tmpfile();
  if (shared_file == NULL) _exit(2);
  for (int i = 0; i < 100; i++) fprintf(shared_file, "line %d of the shared file\n", i);
  rewind(shared_file);
  atomic_store(&stop, 0);
  pthread_t f, g;
  pthread_create(&f, NULL, forker, NULL);
  pthread_create(&g, NULL, flusher, NULL);
  for (int i = 0; i < 3000; i++) {
    /* the second half: each block a guarded sample (the slot lock) */
    if (i == 1500) mi_heap_guarded_set_sample_rate(mi_heap_main(), 1, 0);
    pthread_t t;
    if (pthread_create(&t, NULL, reader, NULL) == 0) pthread_join(t, NULL);
  }
  atomic_store(&stop, 1);
  pthread_join(f, NULL);
  pthread_join(g, NULL);
  _exit(0);
}

/* Runs a scenario in a child, so that a deadlock is a failure, not a hang. */
static bool scenario_finishes(void (*scenario)(void)) {
  pid_t pid = fork();
  if (pid == 0) scenario();
  for (int waited = 0; waited < 300; waited++) {   /* 30 s */
    int status;
    if (waitpid(pid, &status, WNOHANG) == pid) return WIFEXITED(status) && WEXITSTATUS(status) == 0;
    usleep(100 * 1000);
  }
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  return false;
}

int main(void) {
  const int forks = 100;
  int ok = fork_amid_churn(forks);
  TAP_OK(ok == forks, "%d of %d children forked amid allocating threads could allocate", ok, forks);

  /* every small block a guarded sample: the threads hold the slot lock
   * much of the time (no effect in builds without guarded sampling) */
  mi_heap_guarded_set_size_bound(mi_heap_main(), 16, 4080);
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 1, 0);
  ok = fork_amid_churn(50);
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 0, 0);
  TAP_OK(ok == 50, "%d of 50 children forked amid threads taking guarded samples could allocate", ok);

  TAP_OK(scenario_finishes(signal_fork_scenario),
         "400 forks from a signal handler that interrupts allocations holding the arena lock: no deadlock");
  TAP_OK(scenario_finishes(stdio_fork_scenario),
         "fork while new threads allocate inside getline and another thread runs fflush(NULL): no deadlock");
  return tap_done();
}

/* test-lock.c -- the futex lock of the rare paths: mutual exclusion under
 * contention (with sleeping waiters), the holder recorded in the lock
 * word, and the fork steps, which leave alone a lock the forking thread
 * holds itself. */
#include "internal.h"
#include "../tap.h"

#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 200000

static mia_lock_t counter_lock;
static long counter;          /* plain: only ever changed under the lock */
static volatile int inside;   /* threads inside the critical section */
static volatile int overlaps;

static void *hammer(void *arg) {
  (void)arg;
  for (int i = 0; i < ROUNDS; i++) {
    mia_lock(&counter_lock);
    if (++inside != 1) overlaps++;
    counter++;
    /* now and then hold it long enough for the others to sleep */
    if (i % 4096 == 0) usleep(50);
    inside--;
    mia_unlock(&counter_lock);
  }
  return NULL;
}

static uintptr_t holder_of(const mia_lock_t *lock) { return lock->word & ~(uintptr_t)3; }

static void *other_thread_takes(void *arg) {
  mia_lock_t *lock = arg;
  mia_lock(lock);
  uintptr_t h = holder_of(lock);
  mia_unlock(lock);
  return (void *)h;
}

int main(void) {
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, hammer, NULL);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  TAP_OK(counter == (long)THREADS * ROUNDS && overlaps == 0,
         "%d threads, %d rounds each: counter %ld, %d overlaps", THREADS, ROUNDS, counter, overlaps);
  TAP_OK(counter_lock.word == 0, "free again afterwards, no waiter bit left behind");

  mia_lock_t lock = {0};
  mia_lock(&lock);
  TAP_OK(holder_of(&lock) == mia_prim_thread_id() && (lock.word & 1), "the word names the holder");
  uintptr_t holding = lock.word;
  TAP_OK(!mia_trylock(&lock) && lock.word == holding, "trylock on a held lock fails and leaves it as it was");
  mia_unlock(&lock);
  TAP_OK(mia_trylock(&lock) && holder_of(&lock) == mia_prim_thread_id() && (lock.word & 1),
         "trylock on a free lock takes it, naming the holder");
  mia_unlock(&lock);
  pthread_t o;
  void *other;
  pthread_create(&o, NULL, other_thread_takes, &lock);
  pthread_join(o, &other);
  TAP_OK(other != NULL && (uintptr_t)other != mia_prim_thread_id(), "another thread's hold names that thread");

  /* fork steps on a free lock: taken, then released (parent) or reset (child) */
  mia_lock_fork_prepare(&lock);
  bool taken = !lock.fork_skipped && holder_of(&lock) == mia_prim_thread_id();
  mia_lock_fork_parent(&lock);
  TAP_OK(taken && lock.word == 0, "fork: a free lock is taken in prepare and released in the parent");
  mia_lock_fork_prepare(&lock);
  mia_lock_fork_child(&lock);
  TAP_OK(lock.word == 0 && !lock.fork_skipped, "fork: the child makes it free");

  /* held by the forking thread (a fork from a signal handler that
   * interrupted it): prepare must not wait, and the holder keeps it */
  mia_lock(&lock);
  uintptr_t held = lock.word;
  mia_lock_fork_prepare(&lock);
  bool skipped = lock.fork_skipped && lock.word == held;
  mia_lock_fork_parent(&lock);
  TAP_OK(skipped && lock.word == held && !lock.fork_skipped,
         "fork: a lock the forking thread holds is skipped and stays held in the parent");
  mia_lock_fork_prepare(&lock);
  mia_lock_fork_child(&lock);
  TAP_OK(lock.word == held, "... and in the child, for the interrupted holder to release");
  mia_unlock(&lock);

  /* the same with a real fork: the child can take the lock after its holder released it */
  mia_lock(&lock);
  mia_lock_fork_prepare(&lock);
  pid_t pid = fork();
  if (pid == 0) {
    mia_lock_fork_child(&lock);
    mia_unlock(&lock);   /* the interrupted holder finishing, in the child */
    mia_lock(&lock);
    _exit(holder_of(&lock) == mia_prim_thread_id() ? 0 : 1);
  }
  mia_lock_fork_parent(&lock);
  mia_unlock(&lock);
  int status = 0;
  waitpid(pid, &status, 0);
  TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0 && lock.word == 0,
         "a real fork with the lock held by the forking thread: both sides go on");
  return tap_done();
}

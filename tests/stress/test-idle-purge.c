/* test-idle-purge.c -- the purge thread purges the free slices of live
 * threads that went idle, while they come and go.
 *
 * Worker threads each allocate 24 MiB of 1000-byte blocks, keep one block
 * in 2048 (so every segment stays theirs), free the rest and wait at a
 * barrier: idle, alive.  Meanwhile the main thread waits for the process's
 * RSS to fall (the purge thread purging the workers' free slices) and
 * forks a child that allocates and exits (a fork while the purge thread
 * walks the threads must leave the child free to allocate).  Then the
 * workers go on, cutting pages from the slices that were purged under
 * them.  Every block carries a stamp that is checked before it is freed.
 * The mi_ API throughout: sanitizer builds do not redirect malloc.
 * Under ThreadSanitizer (tests/tools/test-tsan.sh) no race may be
 * reported.  That cannot show a missing segment lock (the owners and the
 * purge thread synchronise through the purge counters' atomics anyway):
 * tests/unit/test-purge-overdue checks the lock.
 */
#include "mialloc.h"
#include "../tap.h"
#include "../rss.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WORKERS 2
#define ROUNDS 3
#define ROUND_BYTES (24u << 20)
#define BLOCK 1000u
#define KEEP_EVERY 2048u
#define COUNT (ROUND_BYTES / BLOCK)

/* four meetings a round: allocated, may free, freed, may go on */
static pthread_barrier_t meet;
static int bad_stamps;   /* written under stamp_lock */
static pthread_mutex_t stamp_lock = PTHREAD_MUTEX_INITIALIZER;

static void stamp(uint64_t *b, uint64_t tag) {
  b[0] = tag;
  b[BLOCK / 8 - 1] = ~tag;
}

static int stamp_ok(const uint64_t *b, uint64_t tag) { return b[0] == tag && b[BLOCK / 8 - 1] == ~tag; }

static void note_bad(void) {
  pthread_mutex_lock(&stamp_lock);
  bad_stamps++;
  pthread_mutex_unlock(&stamp_lock);
}

static void *worker(void *arg) {
  uint64_t id = (uint64_t)(uintptr_t)arg;
  uint64_t **kept = mi_calloc(ROUNDS * (COUNT / KEEP_EVERY + 1), sizeof(uint64_t *));
  uint64_t **blocks = mi_malloc(COUNT * sizeof(uint64_t *));
  size_t nkept = 0;
  if (kept == NULL || blocks == NULL) note_bad();
  for (int r = 0; r < ROUNDS && kept != NULL && blocks != NULL; r++) {
    for (size_t i = 0; i < COUNT; i++) {
      blocks[i] = mi_malloc(BLOCK);
      if (blocks[i] == NULL) {
        note_bad();
        continue;
      }
      memset(blocks[i], 0x6b, BLOCK);
      stamp(blocks[i], id << 48 | (uint64_t)r << 32 | i);
    }
    pthread_barrier_wait(&meet);
    pthread_barrier_wait(&meet);
    for (size_t i = 0; i < COUNT; i++) {
      if (blocks[i] == NULL) continue;
      if (!stamp_ok(blocks[i], id << 48 | (uint64_t)r << 32 | i)) note_bad();
      if (i % KEEP_EVERY == 0) kept[nkept++] = blocks[i];
      else mi_free(blocks[i]);
    }
    pthread_barrier_wait(&meet);
    pthread_barrier_wait(&meet);   /* idle here while the main thread watches */
  }
  for (size_t k = 0; k < nkept; k++) {
    uint64_t tag = kept[k][0];
    if (!stamp_ok(kept[k], tag) || tag >> 48 != id) note_bad();
    mi_free(kept[k]);
  }
  mi_free(blocks);
  mi_free(kept);
  return NULL;
}

/* The child of a fork taken while the workers idle: one thread, which
 * must be able to allocate and free (no lock left held by the purge
 * thread's walk).  Exit status 0 when every block kept its stamp. */
static void fork_child(void) {
  static uint64_t *b[4096];
  int bad = 0;
  for (size_t i = 0; i < 4096; i++) {
    b[i] = mi_malloc(2048);
    if (b[i] == NULL) _exit(2);
    stamp(b[i], i);
  }
  for (size_t i = 0; i < 4096; i++) {
    bad |= !stamp_ok(b[i], i);
    mi_free(b[i]);
  }
  _exit(bad);
}

static int fork_and_wait(void) {
  pid_t pid = fork();
  if (pid < 0) return 0;
  if (pid == 0) {
    alarm(20);   /* a deadlocked child dies instead of hanging the test */
    fork_child();
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid) return 0;
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

int main(void) {
  pthread_barrier_init(&meet, NULL, WORKERS + 1);
  pthread_t threads[WORKERS];
  int started = 1;
  for (uintptr_t t = 0; t < WORKERS; t++)
    started &= pthread_create(&threads[t], NULL, worker, (void *)(t + 1)) == 0;
  if (!started) {
    TAP_OK(0, "started %d worker threads", WORKERS);
    return tap_done();
  }
  int fell = 0, forks_ok = 0;
  for (int r = 0; r < ROUNDS; r++) {
    pthread_barrier_wait(&meet);
    size_t busy = rss_bytes(), idle = busy, drop = (size_t)WORKERS * (ROUND_BYTES / 2);
    pthread_barrier_wait(&meet);
    pthread_barrier_wait(&meet);
    for (int i = 0; i < 100 && idle + drop > busy; i++) {
      usleep(50000);
      idle = rss_bytes();
    }
    tap_diag("round %d: rss %zu KiB with the blocks live, %zu KiB with the workers idle", r, busy >> 10, idle >> 10);
    fell += idle + drop <= busy;
    forks_ok += fork_and_wait();
    pthread_barrier_wait(&meet);
  }
  for (int t = 0; t < WORKERS; t++) pthread_join(threads[t], NULL);
  TAP_OK(fell == ROUNDS, "the idle workers' freed memory went back in %d of %d rounds", fell, ROUNDS);
  TAP_OK(forks_ok == ROUNDS, "a child forked meanwhile allocated and exited in %d of %d rounds", forks_ok, ROUNDS);
  TAP_OK(bad_stamps == 0, "every block kept its stamp (%d bad)", bad_stamps);
  return tap_done();
}

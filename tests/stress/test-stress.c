/* test-stress.c -- threads allocating random sizes (1 B to a few MiB) with
 * random lifetimes, handing a good share of blocks to other threads to
 * free, threads exiting while others still hold their blocks, and a fork
 * in the middle.  Every block carries a pattern derived from its address
 * and size, checked before it is freed. */
#include "mialloc.h"
#include "../tap.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define THREADS 4
#define ROUNDS 3
#define OPS 60000
#define SLOTS 2048
#define MAILBOX 4096

typedef struct { void *p; size_t size; } block_t;

/* a lock-protected mailbox shared by all threads: blocks put here are
 * freed by whichever thread takes them */
static block_t mailbox[MAILBOX];
static size_t mailbox_count;
static pthread_mutex_t mailbox_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_long failures;
static atomic_long cross_frees;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t random_size(uint64_t *s) {
  uint64_t r = rnd(s) % 1000;
  if (r < 700) return 1 + rnd(s) % 256;
  if (r < 950) return 1 + rnd(s) % 16384;
  if (r < 995) return 1 + rnd(s) % (600 * 1024);
  return 1 + rnd(s) % (3u << 20);
}

static void fill(void *p, size_t size) {
  uint8_t v = (uint8_t)((uintptr_t)p >> 4 ^ size);
  size_t n = size < 256 ? size : 256;
  memset(p, v, n);
  if (size > 256) memset((uint8_t *)p + size - 64, v, 64);
}

static bool check(const void *p, size_t size) {
  uint8_t v = (uint8_t)((uintptr_t)p >> 4 ^ size);
  const uint8_t *b = p;
  size_t n = size < 256 ? size : 256;
  for (size_t i = 0; i < n; i++) if (b[i] != v) return false;
  if (size > 256) for (size_t i = size - 64; i < size; i++) if (b[i] != v) return false;
  return true;
}

static void release(block_t *b) {
  if (!check(b->p, b->size)) atomic_fetch_add(&failures, 1);
  free(b->p);
  b->p = NULL;
}

static void *worker(void *arg) {
  uint64_t seed = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ull + 1;
  block_t slots[SLOTS];
  memset(slots, 0, sizeof slots);
  for (int op = 0; op < OPS; op++) {
    block_t *s = &slots[rnd(&seed) % SLOTS];
    if (s->p != NULL) {
      if (rnd(&seed) % 3 == 0) {
        pthread_mutex_lock(&mailbox_lock);
        if (mailbox_count < MAILBOX) {
          mailbox[mailbox_count++] = *s;
          s->p = NULL;
        }
        pthread_mutex_unlock(&mailbox_lock);
      }
      if (s->p != NULL) release(s);
    }
    s->size = random_size(&seed);
    s->p = malloc(s->size);
    if (s->p == NULL) { atomic_fetch_add(&failures, 1); continue; }
    fill(s->p, s->size);
    if (op % 16 == 0) {
      block_t b = {NULL, 0};
      pthread_mutex_lock(&mailbox_lock);
      if (mailbox_count > 0) b = mailbox[--mailbox_count];
      pthread_mutex_unlock(&mailbox_lock);
      if (b.p != NULL) {
        release(&b);
        atomic_fetch_add(&cross_frees, 1);
      }
    }
  }
  /* exit holding half of the blocks: they go to the mailbox, to be freed
   * by threads of the next round after this one is gone */
  for (int i = 0; i < SLOTS; i++) {
    if (slots[i].p == NULL) continue;
    pthread_mutex_lock(&mailbox_lock);
    bool handed = i % 2 == 0 && mailbox_count < MAILBOX;
    if (handed) mailbox[mailbox_count++] = slots[i];
    pthread_mutex_unlock(&mailbox_lock);
    if (!handed) release(&slots[i]);
  }
  return NULL;
}

static int child_work(void) {
  /* the child inherits the parent's heap: allocate, free, and free some
   * inherited blocks (other threads' pages, whose owners do not exist here) */
  int bad = 0;
  for (int i = 0; i < 20000; i++) {
    size_t size = 1 + (size_t)i % 5000;
    void *p = malloc(size);
    if (p == NULL) { bad++; continue; }
    fill(p, size);
    if (!check(p, size)) bad++;
    free(p);
  }
  /* the forking thread held mailbox_lock across fork (see main), so the
   * mailbox is consistent here and the lock is ours to release */
  for (size_t i = 0; i < mailbox_count && i < 500; i++) {
    if (!check(mailbox[i].p, mailbox[i].size)) bad++;
  }
  pthread_mutex_unlock(&mailbox_lock);
  return bad == 0 ? 0 : 1;
}

int main(void) {
  for (int round = 0; round < ROUNDS; round++) {
    pthread_t t[THREADS];
    for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(round * THREADS + i + 1));
    if (round == 1) {
      /* fork while the workers are allocating */
      usleep(2000);
      /* hold the test's own lock across fork: a worker holding it at that
       * moment would leave it locked forever in the child */
      pthread_mutex_lock(&mailbox_lock);
      pid_t pid = fork();
      if (pid == 0) _exit(child_work());
      pthread_mutex_unlock(&mailbox_lock);
      int status = 0;
      waitpid(pid, &status, 0);
      TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child forked mid-run allocates, frees and sees intact blocks");
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
    TAP_OK(atomic_load(&failures) == 0, "round %d: every block intact when freed", round + 1);
  }
  /* the last blocks of exited threads */
  pthread_mutex_lock(&mailbox_lock);
  size_t left = mailbox_count;
  for (size_t i = 0; i < mailbox_count; i++) release(&mailbox[i]);
  mailbox_count = 0;
  pthread_mutex_unlock(&mailbox_lock);
  TAP_OK(atomic_load(&failures) == 0, "%zu blocks of exited threads intact when freed by main", left);
  TAP_OK(atomic_load(&cross_frees) > 1000, "a good share freed by another thread (%ld)", atomic_load(&cross_frees));
  mi_collect(true);
  return tap_done();
}

/* test-remote-retire.c -- a page queued for its owner by a remote free and
 * then emptied by the owner's own frees.
 *
 * A remote free into a page its owner parked as full puts the page on the
 * owner's remote list.  If the owner then frees the page's other blocks
 * itself, without a malloc in between, the page empties while the list
 * still points at it.  It used to go back to its segment at once; with
 * purging at once the segment's memory was gone when the next malloc (or
 * the thread's exit) walked the list, and the process died of SIGSEGV
 * (found by mimalloc-bench's rptest).  Each size here fills a page with a
 * few blocks, so the page is full after the first round of mallocs.
 */
#define _GNU_SOURCE
#include <mialloc.h>
#include "../tap.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BLOCKS 64
#define ROUNDS 100

typedef struct {
  size_t size;
  void *victim;
  bool ok;
} job_t;

static void *free_victim(void *arg) {
  job_t *job = arg;
  free(job->victim);
  return NULL;
}

static void *owner(void *arg) {
  job_t *job = arg;
  void *p[BLOCKS];
  job->ok = true;
  for (int round = 0; round < ROUNDS && job->ok; round++) {
    for (int i = 0; i < BLOCKS; i++) {
      p[i] = malloc(job->size);
      if (p[i] == NULL) { job->ok = false; return NULL; }
      memset(p[i], (int)i, 64);
    }
    job->victim = p[0];
    pthread_t t;
    if (pthread_create(&t, NULL, free_victim, job) != 0) { job->ok = false; return NULL; }
    pthread_join(t, NULL);
    for (int i = 1; i < BLOCKS; i++) {   /* local frees, no malloc in between */
      if (((unsigned char *)p[i])[63] != (unsigned char)i) job->ok = false;
      free(p[i]);
    }
    void *q = malloc(job->size);   /* walks the remote list */
    if (q == NULL) job->ok = false;
    free(q);
  }
  return NULL;
}

int main(void) {
  /* purge at once: a page wrongly freed loses its memory before the walk */
  mi_option_set(mi_option_purge_delay, 0);
  static const size_t sizes[] = {1000, 40000, 60000, 100000, 200000};
  for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
    bool ok = true;
    for (int thread = 0; thread < 10 && ok; thread++) {
      job_t job = {.size = sizes[s]};
      pthread_t t;
      if (pthread_create(&t, NULL, owner, &job) != 0) { ok = false; break; }
      pthread_join(t, NULL);   /* the thread's exit walks the list too */
      ok = job.ok;
    }
    TAP_OK(ok, "blocks of %zu bytes: pages emptied by their owner after a remote free", sizes[s]);
  }
  return tap_done();
}

/* test-heap-rotation.c -- a program whose threads allocate only from
 * first-class heaps, deleting each heap while its blocks are still live and
 * freeing those blocks later from another thread.  mi_heap_delete hands the
 * segments to the main heap's abandoned list; no thread of the main heap
 * ever needs a new segment here, so the heaps that come after must take the
 * segments back once they are empty, or the process keeps every one of them
 * committed.  Also: a segment that still holds a live block is never taken
 * by such a heap (mi_heap_destroy of it would free the block). */
#include "mialloc.h"
#include "../tap.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { THREADS = 2, BLOCKS = 3000, ROUNDS = 40 };

typedef struct {
  mi_heap_t *heap;
  unsigned seed;
  void *blocks[BLOCKS];
} job_t;

static void *fill(void *arg) {
  job_t *j = arg;
  for (int i = 0; i < BLOCKS; i++) {
    j->seed = j->seed * 1103515245u + 12345u;
    size_t size = 16 + (j->seed >> 8) % 1500;
    j->blocks[i] = mi_heap_malloc(j->heap, size);
    if (j->blocks[i] != NULL) memset(j->blocks[i], (int)(i & 0xff), size);
  }
  return NULL;
}

static size_t committed(void) {
  size_t commit = 0;
  mi_process_info(NULL, NULL, NULL, NULL, NULL, &commit, NULL, NULL);
  return commit;
}

/* one heap's life: threads fill it, it is deleted with all blocks live,
 * then the blocks are freed here (frees into pages no thread owns) */
static int round_trip(unsigned seed) {
  static job_t jobs[THREADS];
  mi_heap_t *heap = mi_heap_new();
  if (heap == NULL) return 0;
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) {
    jobs[i].heap = heap;
    jobs[i].seed = seed + (unsigned)i;
    pthread_create(&t[i], NULL, fill, &jobs[i]);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  mi_heap_delete(heap);
  int ok = 1;
  for (int i = 0; i < THREADS; i++)
    for (int b = 0; b < BLOCKS; b++) {
      unsigned char *p = jobs[i].blocks[b];
      if (p == NULL || p[0] != (unsigned char)(b & 0xff)) ok = 0;
      mi_free(p);
    }
  return ok;
}

/* a live block in an abandoned segment stays where it is: a later
 * first-class heap's threads, then its destroy, must leave it alone */
static void *use_and_destroy(void *arg) {
  mi_heap_t *heap = arg;
  size_t got = 0;
  for (int i = 0; i < 20000; i++) got += mi_heap_malloc(heap, 64 + (size_t)(i % 7) * 100) != NULL;
  return got == 20000 ? heap : NULL;
}

int main(void) {
  int ok = 1;
  size_t early = 0;
  for (unsigned r = 0; r < ROUNDS; r++) {
    ok = round_trip(r * 7919u) && ok;
    if (r == 4) early = committed();
    if (getenv("ROT_TRACE")) tap_diag("round %u: %zu KiB", r, committed() >> 10);
  }
  size_t late = committed();
  TAP_OK(ok, "every block of %d rotated heaps kept its contents until freed", ROUNDS);
  TAP_OK(late <= early + (16u << 20), "committed memory stays put over the rounds: %zu KiB after round 5, %zu KiB after round %d",
         early >> 10, late >> 10, ROUNDS);

  /* one live block left behind in a deleted heap */
  job_t *keep = calloc(1, sizeof *keep);
  keep->heap = mi_heap_new();
  keep->seed = 99;
  pthread_t t;
  pthread_create(&t, NULL, fill, keep);
  pthread_join(t, NULL);
  mi_heap_delete(keep->heap);
  unsigned char *survivor = keep->blocks[BLOCKS / 2];
  size_t survivor_size = mi_usable_size(survivor);
  memset(survivor, 0x5a, survivor_size);
  for (int b = 0; b < BLOCKS; b++)
    if (b != BLOCKS / 2) mi_free(keep->blocks[b]);
  for (int r = 0; r < 4; r++) {
    mi_heap_t *heap = mi_heap_new();
    pthread_create(&t, NULL, use_and_destroy, heap);
    pthread_join(t, NULL);
    mi_heap_destroy(heap);
  }
  int intact = 1;
  for (size_t i = 0; i < survivor_size; i++) intact = intact && survivor[i] == 0x5a;
  TAP_OK(intact && mi_usable_size(survivor) == survivor_size,
         "a live block in an abandoned segment outlives later heaps' destroys");
  mi_free(survivor);
  free(keep);
  return tap_done();
}

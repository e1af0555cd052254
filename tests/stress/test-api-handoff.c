/* test-api-handoff.c -- threads mixing the mi_ API (malloc, realloc,
 * aligned, first-class heaps, heaps destroyed with live blocks, collect)
 * and handing blocks to each other through a mailbox, with a profiler
 * attached that samples often (its sampled blocks carry a header and
 * go through the slow paths).  A table of every live pointer catches a
 * block handed out twice the moment malloc returns it; contents are
 * checked at every free, and the profiler must hear of exactly the frees
 * of sampled blocks, with their data.  The threads also register error
 * functions in turns and fail allocations: each call must bring the
 * argument registered with its function.
 *
 * Also the workload of test-tsan.sh: in an --enable-tsan build the
 * library is instrumented and ThreadSanitizer sees every access the
 * allocator makes on behalf of these threads. */
#include "config.h"   /* MIALLOC_PROF */
#include <mialloc.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tap.h"

enum {
  THREADS = 4,
  ROUNDS = 4,
  OPS = 20000,
  SLOTS = 256,
  MAILBOX = 1024,
  TABLE_BITS = 20,
  TABLE = 1 << TABLE_BITS,   /* live pointers: far more slots than ever live */
};

static atomic_long doubles, strays, corrupt, bad_samples, sampled;
static atomic_long error_calls, torn_calls;

/* ---- error functions: one for threads of even ids, one for odd ---- */

static int tags[2][ROUNDS * THREADS + 1];
static volatile size_t size_max = SIZE_MAX;   /* volatile: no folding */

static void on_error_tagged(int parity, void *arg) {
  atomic_fetch_add(&error_calls, 1);
  int *tag = arg;
  if (tag < &tags[parity][0] || tag > &tags[parity][ROUNDS * THREADS]) atomic_fetch_add(&torn_calls, 1);
}
static void on_error_even(int err, void *arg) {
  (void)err;
  on_error_tagged(0, arg);
}
static void on_error_odd(int err, void *arg) {
  (void)err;
  on_error_tagged(1, arg);
}

static void register_and_fail(long id) {
  mi_register_error(id & 1 ? on_error_odd : on_error_even, &tags[id & 1][id]);
  if (mi_malloc(size_max) != NULL) atomic_fetch_add(&corrupt, 1);
}

/* ---- pointer sets: open addressing under a lock each ---- */

#define TOMBSTONE ((void *)1)
typedef struct {
  void *slot[TABLE];
  pthread_mutex_t lock;
} set_t;

static set_t live = {.lock = PTHREAD_MUTEX_INITIALIZER};      /* blocks the test holds */
static set_t samples = {.lock = PTHREAD_MUTEX_INITIALIZER};   /* sampled, not yet reported freed */

/* the top TABLE_BITS bits of a multiplicative hash */
static size_t slot_of(const void *p) {
  return (size_t)(((uintptr_t)p >> 4) * 0x9E3779B97F4A7C15ull >> (64 - TABLE_BITS));
}

/* Add p; false if it was there already. */
static bool set_add(set_t *set, void *p) {
  pthread_mutex_lock(&set->lock);
  size_t i = slot_of(p), free_slot = TABLE;
  for (; set->slot[i] != NULL; i = (i + 1) % TABLE) {
    if (set->slot[i] == p) {
      pthread_mutex_unlock(&set->lock);
      return false;
    }
    if (set->slot[i] == TOMBSTONE && free_slot == TABLE) free_slot = i;
  }
  set->slot[free_slot != TABLE ? free_slot : i] = p;
  pthread_mutex_unlock(&set->lock);
  return true;
}

/* Remove p (or only look, with remove false); false if it was not there. */
static bool set_take(set_t *set, void *p, bool remove) {
  pthread_mutex_lock(&set->lock);
  for (size_t i = slot_of(p); set->slot[i] != NULL; i = (i + 1) % TABLE) {
    if (set->slot[i] == p) {
      if (remove) set->slot[i] = TOMBSTONE;
      pthread_mutex_unlock(&set->lock);
      return true;
    }
  }
  pthread_mutex_unlock(&set->lock);
  return false;
}

/* p was just handed out: it must not be live already */
static void *live_add(void *p) {
  if (p != NULL && !set_add(&live, p)) {
    atomic_fetch_add(&doubles, 1);
    tap_diag("%p handed out while it was live", p);
  }
  return p;
}

/* p is about to be freed: it must be live */
static void live_remove(void *p) {
  if (p != NULL && !set_take(&live, p, true)) atomic_fetch_add(&strays, 1);
}

/* ---- blocks: filled with a byte derived from their size ---- */

static uint8_t fill_of(size_t size) { return (uint8_t)(size * 31 + 7); }

static void *fill(void *p, size_t size) {
  if (p != NULL) memset(p, fill_of(size), size);
  return p;
}

/* the block on_free last reported in this thread (it runs in the thread
 * that frees) */
static __thread void *reported;

static void check_and_free(void *p, size_t size) {
  const uint8_t *b = p;
  for (size_t i = 0; i < size; i++)
    if (b[i] != fill_of(size)) {
      atomic_fetch_add(&corrupt, 1);
      break;
    }
  live_remove(p);
  bool was_sampled = set_take(&samples, p, false);
  reported = NULL;
  mi_free(p);
  if (was_sampled != (reported == p)) atomic_fetch_add(&bad_samples, 1);
}

/* ---- the mailbox ---- */

typedef struct { void *p; size_t size; } block_t;
static block_t mailbox[MAILBOX];
static size_t mailbox_count;
static pthread_mutex_t mailbox_lock = PTHREAD_MUTEX_INITIALIZER;

static void post(void *p, size_t size) {
  pthread_mutex_lock(&mailbox_lock);
  bool kept = mailbox_count < MAILBOX;
  if (kept) mailbox[mailbox_count++] = (block_t){p, size};
  pthread_mutex_unlock(&mailbox_lock);
  if (!kept) check_and_free(p, size);
}

static bool collect_one(void) {
  block_t b = {NULL, 0};
  pthread_mutex_lock(&mailbox_lock);
  if (mailbox_count > 0) b = mailbox[--mailbox_count];
  pthread_mutex_unlock(&mailbox_lock);
  if (b.p != NULL) check_and_free(b.p, b.size);
  return b.p != NULL;
}

/* ---- the profiler: every sample carries its size, checked at free ---- */

static size_t on_alloc(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg) {
  (void)heap, (void)sample_size, (void)arg;
  uint64_t tag[2] = {(uint64_t)(uintptr_t)p, size};
  memcpy(data, tag, sizeof tag);
  atomic_fetch_add(&sampled, 1);
  if (!set_add(&samples, p)) atomic_fetch_add(&bad_samples, 1);
  return 0;
}

static void on_free(void *p, size_t size, void *data, void *arg) {
  (void)arg;
  uint64_t tag[2];
  memcpy(tag, data, sizeof tag);
  if (tag[0] != (uint64_t)(uintptr_t)p || tag[1] != size || !set_take(&samples, p, true))
    atomic_fetch_add(&bad_samples, 1);
  reported = p;
}

/* ---- the workers ---- */

static uint64_t next_random(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static size_t random_size(uint64_t *s) {
  /* mostly small, sometimes medium, 0 now and then */
  return next_random(s) % 8 == 0 ? next_random(s) % 70000 : next_random(s) % 600;
}

/* a heap made, filled and destroyed with its blocks live */
static void destroy_a_heap(uint64_t *s) {
  mi_heap_t *heap = mi_heap_new();
  if (heap == NULL) return;
  /* left to mi_heap_destroy (fill of 0 bytes: the result is used, as
   * mi_heap_malloc's warn_unused_result asks, and a (void) cast is not) */
  for (int i = 0; i < 50; i++) fill(mi_heap_malloc(heap, random_size(s)), 0);
  mi_heap_destroy(heap);
}

static void *worker(void *arg) {
  long id = (long)(intptr_t)arg;
  uint64_t s = (uintptr_t)arg * 7919 + 1;
  void *slot[SLOTS] = {0};
  size_t slot_size[SLOTS] = {0};
  mi_heap_t *heap = mi_heap_new();
  for (int op = 0; op < OPS; op++) {
    unsigned r = (unsigned)(next_random(&s) % 100);
    size_t size = random_size(&s);
    size_t k = next_random(&s) % SLOTS;
    if (r < 40) {   /* replace a block of this thread's */
      if (slot[k] != NULL) check_and_free(slot[k], slot_size[k]);
      slot[k] = fill(live_add(mi_malloc(size)), size);
      slot_size[k] = size;
    } else if (r < 60) {   /* a block for another thread to free */
      post(fill(live_add(mi_malloc(size)), size), size);
    } else if (r < 75) {
      collect_one();
    } else if (r < 85) {   /* grow or shrink in place or by moving */
      if (slot[k] == NULL) continue;
      live_remove(slot[k]);
      void *p = mi_realloc(slot[k], size + 1);
      if (p == NULL) continue;
      const uint8_t *b = p;
      size_t kept = slot_size[k] < size + 1 ? slot_size[k] : size + 1;
      for (size_t i = 0; i < kept; i++)
        if (b[i] != fill_of(slot_size[k])) {
          atomic_fetch_add(&corrupt, 1);
          break;
        }
      slot[k] = fill(live_add(p), size + 1);
      slot_size[k] = size + 1;
    } else if (r < 95) {   /* this thread's own heap; freed here or elsewhere */
      void *p = fill(live_add(mi_heap_malloc(heap, size)), size);
      if (next_random(&s) & 1) post(p, size);
      else check_and_free(p, size);
    } else if (r < 96) {
      if (next_random(&s) % 8 == 0) destroy_a_heap(&s);
      else mi_collect(next_random(&s) % 16 == 0);
    } else if (r < 97) {
      register_and_fail(id);
    } else {
      size_t align = (size_t)64 << (next_random(&s) % 6);
      void *p = fill(live_add(mi_malloc_aligned(size + 1, align)), size + 1);
      if (((uintptr_t)p & (align - 1)) != 0) atomic_fetch_add(&corrupt, 1);
      post(p, size + 1);
    }
  }
  /* half the blocks outlive the thread, freed by others after it exits */
  for (size_t k = 0; k < SLOTS; k++) {
    if (slot[k] == NULL) continue;
    if (k < SLOTS / 2) post(slot[k], slot_size[k]);
    else check_and_free(slot[k], slot_size[k]);
  }
  mi_heap_delete(heap);   /* its live blocks (posted) move to the main heap */
  return NULL;
}

int main(void) {
  bool profiled = false;
#if MIALLOC_PROF
  mi_profiler_t prof = {.sample_rate = 4096, .sample_data_size = 16, .seed = 7,
                        .on_alloc = on_alloc, .on_free = on_free};
  profiled = mi_profile(&prof);
  TAP_OK(profiled, "a profiler sampling every 4 KiB on average is attached");
#else
  (void)on_alloc, (void)on_free;
#endif
  for (int round = 0; round < ROUNDS; round++) {
    pthread_t th[THREADS];
    for (long i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(i + round * THREADS + 1));
    for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  }
  while (collect_one()) {
  }
  mi_collect(true);
  TAP_OK(doubles == 0, "no block was handed out while it was live (%ld)", (long)doubles);
  TAP_OK(strays == 0 && corrupt == 0, "every block kept its contents and alignment (%ld bad, %ld unknown)",
         (long)corrupt, (long)strays);
  mi_register_error(NULL, NULL);
  TAP_OK(error_calls > 0 && torn_calls == 0,
         "error functions registered by turns got their own arguments (%ld calls, %ld wrong)",
         (long)error_calls, (long)torn_calls);
  if (profiled) {
    mi_profile(NULL);
    TAP_OK(sampled > 1000 && bad_samples == 0,
           "each free of a sampled block, and only those, was reported, with its data (%ld samples, %ld wrong)",
           (long)sampled, (long)bad_samples);
  }
  return tap_done();
}

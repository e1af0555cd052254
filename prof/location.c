/* location.c -- the table of allocation locations, keyed by (thread id,
 * call stack), lock free.
 *
 * A fixed array of buckets, each the head of a singly linked chain.  Entries
 * are only ever added (a profile keeps every location it has seen), so a
 * reader may walk a chain without any protection, and an insertion is one
 * compare-and-swap of the bucket head.  When two threads insert the same key
 * at once, the loser of the CAS re-walks the entries that appeared in front
 * of the chain it saw, finds the winner's entry and frees its own: there are
 * never two entries for one key.  Entries live in the profiler's private
 * heap, which is excluded from sampling, in chunks carved with a bump
 * pointer: allocating each from the heap would give every sampled thread a
 * part of the private heap of its own -- a segment, a few pages touched for
 * a few entries, kept after the thread exits.  A program whose threads come
 * and go paid two dozen page faults per thread for that.
 */
#include "internal.h"

#include <string.h>

static uint64_t hash_key(pid_t tid, const uintptr_t *frames, unsigned depth) {
  uint64_t h = 0x9e3779b97f4a7c15ull ^ (uint64_t)(uint32_t)tid ^ ((uint64_t)depth << 32);
  for (unsigned i = 0; i < depth; i++) {
    h ^= (uint64_t)frames[i];
    h *= 0xff51afd7ed558ccdull;
    h ^= h >> 33;
  }
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 29;
  return h;
}

#define PROF_CHUNK_SIZE ((size_t)64 * 1024)

/* size bytes, zeroed, 16-aligned; never freed on their own (the chunks go
 * with the private heap). */
static void *chunk_alloc(prof_table_t *t, size_t size) {
  size = (size + 15) & ~(size_t)15;
  pthread_mutex_lock(&t->chunk_lock);
  if (t->chunk_left < size) {
    size_t csize = size > PROF_CHUNK_SIZE ? size : PROF_CHUNK_SIZE;
    uint8_t *chunk = mi_heap_zalloc(t->heap, csize);
    if (chunk == NULL) {
      pthread_mutex_unlock(&t->chunk_lock);
      return NULL;
    }
    t->chunk_next = chunk;
    t->chunk_left = csize;
  }
  void *p = t->chunk_next;
  t->chunk_next += size;
  t->chunk_left -= size;
  pthread_mutex_unlock(&t->chunk_lock);
  return p;
}

/* A child of fork: the parent's other threads may have held the lock. */
void prof_table_after_fork(prof_table_t *t) { pthread_mutex_init(&t->chunk_lock, NULL); }

bool prof_table_init(prof_table_t *t, mi_heap_t *heap, size_t buckets) {
  size_t n = 1;
  while (n < buckets) n <<= 1;
  pthread_mutex_init(&t->chunk_lock, NULL);
  t->chunk_next = NULL;
  t->chunk_left = 0;
  t->heap = heap;
  t->mask = n - 1;
  t->buckets = mi_heap_calloc(heap, n, sizeof t->buckets[0]);
  atomic_init(&t->count, 0);
  return t->buckets != NULL;
}

static bool same_key(const prof_loc_t *l, uint64_t h, pid_t tid, const uintptr_t *frames, unsigned depth) {
  return l->hash == h && l->tid == tid && l->depth == depth &&
         memcmp(l->frames, frames, depth * sizeof frames[0]) == 0;
}

/* search the chain from first up to (not including) stop */
static prof_loc_t *find(prof_loc_t *first, prof_loc_t *stop, uint64_t h, pid_t tid,
                        const uintptr_t *frames, unsigned depth) {
  for (prof_loc_t *l = first; l != stop; l = atomic_load_explicit(&l->next, memory_order_acquire))
    if (same_key(l, h, tid, frames, depth)) return l;
  return NULL;
}

prof_loc_t *prof_table_get(prof_table_t *t, pid_t tid, const uintptr_t *frames, unsigned depth) {
  uint64_t h = hash_key(tid, frames, depth);
  _Atomic(prof_loc_t *) *bucket = &t->buckets[h & t->mask];
  prof_loc_t *head = atomic_load_explicit(bucket, memory_order_acquire);
  prof_loc_t *l = find(head, NULL, h, tid, frames, depth);
  if (l != NULL) return l;

  prof_loc_t *fresh = chunk_alloc(t, sizeof *fresh + depth * sizeof frames[0]);
  if (fresh == NULL) return NULL;
  fresh->hash = h;
  fresh->tid = tid;
  fresh->depth = depth;
  memcpy(fresh->frames, frames, depth * sizeof frames[0]);
  for (;;) {
    atomic_store_explicit(&fresh->next, head, memory_order_relaxed);
    prof_loc_t *seen = head;
    if (atomic_compare_exchange_weak_explicit(bucket, &head, fresh, memory_order_release,
                                              memory_order_acquire)) {
      atomic_fetch_add_explicit(&t->count, 1, memory_order_relaxed);
      return fresh;
    }
    /* head now holds the new first entry: only entries before seen are new */
    l = find(head, seen, h, tid, frames, depth);
    if (l != NULL) return l;   /* fresh stays unused in its chunk: rare */
  }
}

void prof_table_visit(prof_table_t *t, prof_loc_visit_fun *fun, void *arg) {
  for (size_t i = 0; i <= t->mask; i++)
    for (prof_loc_t *l = atomic_load_explicit(&t->buckets[i], memory_order_acquire); l != NULL;
         l = atomic_load_explicit(&l->next, memory_order_acquire))
      fun(l, arg);
}

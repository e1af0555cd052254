/* test-profile.c -- the allocator's profiler interface (SPEC section 5),
 * driven by a small profiler written here: sampling rate, unbiased
 * estimates, sample data travelling to on_free in any thread, stop/start,
 * excluded heaps, destroy, and sampled blocks behaving like any other.
 */
#include "config.h"   /* MIALLOC_PROF: whether the profiler interface is built in */
#include <mialloc.h>

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "../tap.h"

typedef struct sample_s {
  uint64_t magic;      /* derived from the pointer: proves the data travelled */
  uint64_t size;
} sample_t;

static _Atomic(long) n_alloc, n_free, n_bad_data, n_snap;
static _Atomic(long long) live_bytes;
static double est_bytes;          /* unsampled estimate, single-threaded parts only */
static size_t rate_now;

static uint64_t magic_of(void *p) { return (uint64_t)(uintptr_t)p * 0x9e3779b97f4a7c15ull; }

static size_t on_alloc(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg) {
  (void)heap;
  (void)arg;
  sample_t *s = data;
  s->magic = magic_of(p);
  s->size = size;
  atomic_fetch_add(&n_alloc, 1);
  atomic_fetch_add(&live_bytes, (long long)size);
  double q = 1.0 - exp(-(double)sample_size / (double)rate_now);
  est_bytes += (double)size / q;
  return 0;   /* let the core draw the next interval */
}

static void on_free(void *p, size_t size, void *data, void *arg) {
  (void)arg;
  sample_t *s = data;
  if (s->magic != magic_of(p) || s->size != size) atomic_fetch_add(&n_bad_data, 1);
  atomic_fetch_add(&n_free, 1);
  atomic_fetch_add(&live_bytes, -(long long)size);
}

static void on_snapshot(void *arg) {
  (void)arg;
  atomic_fetch_add(&n_snap, 1);
}

static bool attach(size_t rate) {
  rate_now = rate;
  mi_profiler_t prof = {.sample_rate = rate, .sample_data_size = sizeof(sample_t), .seed = 42,
                        .on_alloc = on_alloc, .on_free = on_free, .on_snapshot = on_snapshot};
  return mi_profile(&prof);
}

static void reset_counts(void) {
  n_alloc = n_free = n_bad_data = 0;
  live_bytes = 0;
  est_bytes = 0;
}

/* ---- rate and estimate ---- */

static void test_rate(void) {
  size_t rate = 64 * 1024;
  TAP_OK(attach(rate), "mi_profile attaches a profiler");
  reset_counts();
  enum { N = 400000 };
  static void *blocks[N];
  size_t total = 0, charged = 0;
  for (size_t i = 0; i < N; i++) {
    size_t size = 24 + (i * 7919) % 1000;   /* a spread of small and medium sizes */
    blocks[i] = mi_malloc(size);
    total += size;
    charged += mi_good_size(size);          /* the sampling process counts whole blocks */
  }
  long samples = n_alloc;
  double expect = (double)charged / (double)rate;
  tap_diag("%zu bytes allocated, %ld samples, %.0f expected at rate %zu; estimate %.0f bytes", total, samples,
           expect, rate, est_bytes);
  /* ~3200 expected: a Poisson count's standard deviation is ~57 (1.8%) */
  if (mi_good_size(24) != 24) {
    TAP_OK(fabs((double)samples - expect) < 0.08 * expect,
           "the number of samples matches block bytes/rate (within 8%%)");
  } else {
    /* secure/debug builds: blocks also hold a padding record, so the
     * charged bytes lie between the asked bytes and asked + padding,
     * rounded up to a size class (at most 25%) */
    double lo = (double)total / (double)rate, hi = (double)(total + 24 * (size_t)N) * 1.25 / (double)rate;
    TAP_OK((double)samples > 0.92 * lo && (double)samples < 1.08 * hi,
           "the number of samples lies between asked bytes/rate and padded block bytes/rate");
  }
  TAP_OK(fabs(est_bytes - (double)total) < 0.05 * (double)total,
         "the unsampled estimate is within 5%% of the bytes allocated");
  for (size_t i = 0; i < N; i++) mi_free(blocks[i]);
  TAP_OK(n_free == samples && n_bad_data == 0 && live_bytes == 0,
         "every sampled block reached on_free with its sample data (%ld of %ld)", (long)n_free, samples);
  mi_profile(NULL);
}

/* ---- every allocation sampled, many threads, frees across threads ---- */

#define THREADS 8
#define PER_THREAD 20000
static void *handoff[THREADS][PER_THREAD];

static void *alloc_worker(void *arg) {
  size_t t = (size_t)arg;
  for (size_t i = 0; i < PER_THREAD; i++) {
    size_t size = 8 + (i * 31 + t) % 2048;
    if (i % 1000 == 0) size = 600 * 1024;   /* some huge ones */
    uint8_t *p = mi_malloc(size);
    memset(p, (int)t, size);                 /* writing all of it must not hurt the header */
    handoff[t][i] = p;
    if (i % 2) {
      mi_free(p);
      handoff[t][i] = NULL;
    }
  }
  return NULL;
}

static void *free_worker(void *arg) {
  size_t t = (size_t)arg;
  /* the blocks of the next thread: freed far from where they were made */
  size_t from = (t + 1) % THREADS;
  for (size_t i = 0; i < PER_THREAD; i++)
    if (handoff[from][i] != NULL) mi_free(handoff[from][i]);
  return NULL;
}

static void test_every_allocation(void) {
  TAP_OK(attach(1), "rate 1: every allocation is sampled");
  reset_counts();
  pthread_t th[THREADS];
  for (size_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, alloc_worker, (void *)t);
  for (size_t t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  long allocated = n_alloc;
  TAP_OK(allocated >= THREADS * PER_THREAD, "each of the %d allocations was sampled (%ld)", THREADS * PER_THREAD,
         allocated);
  for (size_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, free_worker, (void *)t);
  for (size_t t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  TAP_OK(n_free == n_alloc && live_bytes == 0 && n_bad_data == 0,
         "after freeing everything across threads in-use is zero (%ld allocs, %ld frees, %lld bytes, %ld bad)",
         (long)n_alloc, (long)n_free, (long long)live_bytes, (long)n_bad_data);

  /* sampled blocks are ordinary blocks to the program */
  int good = 1;
  for (size_t size = 1; size < 5000; size += 37) {
    uint8_t *p = mi_malloc(size);
    good &= mi_usable_size(p) >= size;
    memset(p, 0xab, mi_usable_size(p));
    p = mi_realloc(p, size * 3);
    good &= p != NULL && p[size - 1] == 0xab && mi_usable_size(p) >= size * 3;
    mi_free(p);
  }
  TAP_OK(good && n_bad_data == 0, "sampled blocks: usable size, full writes and realloc work");

  /* a sampled malloc(0) must not hand out the end of its header's block:
   * that is the start of the next block, which a free would then give
   * back while it is live (found by a ThreadSanitizer stress run) */
  reset_counts();
  int apart = 1;
  for (int i = 0; i < 200; i++) {
    void *a = mi_malloc(0), *b = mi_malloc(0);
    mi_free(a);
    void *c = mi_malloc(0);
    apart &= a != NULL && b != NULL && c != NULL && c != b;
    mi_free(b);
    mi_free(c);
  }
  TAP_OK(apart && n_alloc >= 600 && n_free == n_alloc && n_bad_data == 0,
         "sampled malloc(0): every block distinct and reported freed (%ld allocs, %ld frees, %ld bad)",
         (long)n_alloc, (long)n_free, (long)n_bad_data);
  int aligned = 1;
  for (size_t al = 8; al <= 65536; al *= 2) {
    void *p = mi_malloc_aligned(100, al);
    aligned &= ((uintptr_t)p % al) == 0;
    mi_free(p);
    void *q = NULL;
    aligned &= posix_memalign(&q, al < sizeof(void *) ? sizeof(void *) : al, 300) == 0 &&
               ((uintptr_t)q % al) == 0;
    free(q);
  }
  uint64_t *c = mi_calloc(1000, 8);
  int zero = 1;
  for (int i = 0; i < 1000; i++) zero &= c[i] == 0;
  mi_free(c);
  TAP_OK(aligned && zero, "under sampling aligned allocations stay aligned and calloc zeroes");

  /* visiting reports the pointer the program holds */
  mi_heap_t *heap = mi_heap_new();
  void *held = mi_heap_malloc(heap, 200);
  TAP_OK(mi_heap_of(held) == heap, "a sampled block still belongs to its heap");
  long before = n_free;
  mi_heap_destroy(heap);
  TAP_OK(n_free == before + 1, "mi_heap_destroy reports its live sampled blocks freed");
  mi_profile(NULL);
}

/* ---- control ---- */

static void test_control(void) {
  TAP_OK(attach(4096), "attach");
  TAP_OK(!attach(4096), "a second profiler is refused while one is attached");
  reset_counts();
  mi_profiler_stop();
  for (int i = 0; i < 10000; i++) mi_free(mi_malloc(100));
  TAP_OK(n_alloc == 0, "mi_profiler_stop: no samples (%ld)", (long)n_alloc);
  mi_profiler_start();
  for (int i = 0; i < 10000; i++) mi_free(mi_malloc(100));
  TAP_OK(n_alloc > 50, "mi_profiler_start: sampling again (%ld samples for ~1 MB at rate 4096)", (long)n_alloc);
  mi_heap_t *quiet = mi_heap_new();
  mi_heap_profile_disable(quiet);
  long before = n_alloc;
  for (int i = 0; i < 10000; i++) mi_free(mi_heap_malloc(quiet, 100));
  TAP_OK(n_alloc == before, "a heap with profiling disabled is never sampled");
  mi_heap_destroy(quiet);
  long snaps = n_snap;
  mi_profiler_snapshot();
  TAP_OK(n_snap == snaps + 1, "mi_profiler_snapshot calls on_snapshot");
  TAP_OK(mi_profile(NULL), "detach");
  mi_profiler_snapshot();
  TAP_OK(n_snap == snaps + 1, "no snapshot callback once detached");
  mi_profiler_t big = {.sample_rate = 1, .sample_data_size = MI_PROFILE_DATA_MAX + 1, .on_alloc = on_alloc};
  TAP_OK(!mi_profile(&big), "sample data larger than MI_PROFILE_DATA_MAX is refused");
  reset_counts();
  for (int i = 0; i < 10000; i++) mi_free(mi_malloc(100));
  TAP_OK(n_alloc == 0, "no samples once detached");
}

/* ---- a profiler detached, another attached ---- */

static atomic_long second_alloc, second_free;

static size_t second_on_alloc(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg) {
  (void)heap, (void)p, (void)size, (void)sample_size, (void)data, (void)arg;
  atomic_fetch_add(&second_alloc, 1);
  return 0;
}

static void second_on_free(void *p, size_t size, void *data, void *arg) {
  (void)p, (void)size, (void)data, (void)arg;
  atomic_fetch_add(&second_free, 1);
}

enum { OLD_BLOCKS = 50 };

typedef struct held_s {
  void *block[OLD_BLOCKS];
  long visited;   /* blocks visited that the program holds */
} held_t;

static bool visit_held(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t size, void *arg) {
  (void)heap, (void)area, (void)size;
  held_t *held = arg;
  for (int i = 0; i < OLD_BLOCKS; i++)
    if (block != NULL && block == held->block[i]) held->visited++;
  return true;
}

static void test_reattach(void) {
  TAP_OK(attach(1), "attach a profiler with 16 bytes of sample data");
  reset_counts();
  mi_heap_t *heap = mi_heap_new();
  held_t held = {{0}, 0};
  for (int i = 0; i < OLD_BLOCKS; i++) held.block[i] = mi_heap_malloc(heap, 40);
  long taken = n_alloc;
  TAP_OK(mi_profile(NULL), "detach it with its samples live");
  mi_profiler_t second = {.sample_rate = 1, .sample_data_size = MI_PROFILE_DATA_MAX, .seed = 1,
                          .on_alloc = second_on_alloc, .on_free = second_on_free};
  TAP_OK(mi_profile(&second), "attach another, with 64 bytes of sample data");
  mi_heap_visit_blocks(heap, true, visit_held, &held);
  TAP_OK(held.visited == OLD_BLOCKS,
         "visiting finds the pointers the program holds, sampled with the other header size (%ld of %d)",
         held.visited, OLD_BLOCKS);
  for (int i = 0; i < OLD_BLOCKS; i++) mi_free(held.block[i]);
  TAP_OK(taken >= OLD_BLOCKS && second_free == 0 && n_free == 0,
         "frees of the first one's samples reach neither profiler (%ld taken, %ld and %ld reported)", taken,
         (long)n_free, (long)second_free);
  void *mine = mi_heap_malloc(heap, 40);
  long sampled_now = second_alloc;
  mi_heap_destroy(heap);
  TAP_OK(mine != NULL && sampled_now >= 1 && second_free == 1,
         "the second one hears of its own sample freed by mi_heap_destroy (%ld freed)", (long)second_free);
  mi_profile(NULL);
}

int main(void) {
#if !MIALLOC_PROF
  /* configured with --disable-prof: the interface is there and says so */
  (void)test_rate;
  (void)test_every_allocation;
  (void)test_control;
  (void)test_reattach;
  mi_profiler_t none = {.sample_rate = 4096, .on_alloc = on_alloc};
  errno = 0;
  TAP_OK(!mi_profile(&none) && errno == ENOSYS, "--disable-prof build: mi_profile fails with ENOSYS");
  TAP_OK(mi_profile(NULL), "and detaching (nothing) succeeds");
  return tap_done();
#else
  test_rate();
  test_every_allocation();
  test_control();
  test_reattach();
  return tap_done();
#endif
}

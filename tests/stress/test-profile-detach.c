/* test-profile-detach.c -- detaching a profiler while other threads are
 * sampling and freeing sampled blocks.  A program may free what its
 * callbacks use as soon as mi_profile(NULL) returns (libmialloc-prof
 * destroys the heap its profiler lives in), so from then on no callback of
 * that profiler may run, and one attached next must never be handed the
 * first one's argument or sample data.
 *
 * Workers allocate and free all the time with a profiler that samples
 * every few hundred bytes; its callbacks dawdle a little, so that a detach
 * often comes while one is running.  The main thread attaches and detaches
 * two profilers in turn (with different sizes of sample data) and marks
 * each inactive the moment its detach returns: a callback that finds its
 * profiler inactive, on entry or on its way out, is a violation.  Also: a
 * callback that detaches its own profiler returns, and the child of a fork
 * taken while another thread was inside a callback can detach.  Only the
 * mi_ names are called, so sanitizer builds (whose runtimes keep malloc)
 * test mialloc too. */
#include "config.h"   /* MIALLOC_PROF */
#include <mialloc.h>

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../tap.h"

enum { WORKERS = 3, LIVE = 64, SWITCHES = 300 };

typedef struct {
  mi_profiler_t profiler;
  uint64_t magic;           /* written into every sample's data */
  atomic_bool active;       /* between a successful attach and the return of its detach */
  atomic_long allocs, frees;
} test_prof_t;

static test_prof_t prof_a, prof_b;
static atomic_long late_calls, foreign_data, lib_errors;

/* anything the library reports (debug builds check each block handed out) */
static void on_error(int err, void *arg) {
  (void)err, (void)arg;
  atomic_fetch_add(&lib_errors, 1);
}
static atomic_bool stop;

/* a few microseconds inside the callback, as a profiler that unwinds
 * the stack or takes a lock spends */
static void dawdle(void) {
  for (volatile int i = 0; i < 2000; i++) {
  }
}

static size_t on_alloc(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg) {
  (void)heap, (void)p, (void)size, (void)sample_size;
  test_prof_t *tp = arg;
  if (!atomic_load(&tp->active)) atomic_fetch_add(&late_calls, 1);
  memcpy(data, &tp->magic, sizeof tp->magic);
  atomic_fetch_add(&tp->allocs, 1);
  dawdle();
  if (!atomic_load(&tp->active)) atomic_fetch_add(&late_calls, 1);
  return 0;
}

static void on_free(void *p, size_t size, void *data, void *arg) {
  (void)p, (void)size;
  test_prof_t *tp = arg;
  if (!atomic_load(&tp->active)) atomic_fetch_add(&late_calls, 1);
  uint64_t magic;
  memcpy(&magic, data, sizeof magic);
  if (magic != tp->magic) atomic_fetch_add(&foreign_data, 1);
  atomic_fetch_add(&tp->frees, 1);
  dawdle();
  if (!atomic_load(&tp->active)) atomic_fetch_add(&late_calls, 1);
}

static void prof_init(test_prof_t *tp, size_t data_size, uint64_t magic) {
  memset(&tp->profiler, 0, sizeof tp->profiler);
  tp->profiler.sample_rate = 512;
  tp->profiler.sample_data_size = data_size;
  tp->profiler.arg = tp;
  tp->profiler.on_alloc = on_alloc;
  tp->profiler.on_free = on_free;
  tp->magic = magic;
}

static void *worker(void *arg) {
  uint64_t x = (uintptr_t)arg * 0x9E3779B97F4A7C15u + 1;
  void *live[LIVE] = {0};
  while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    unsigned i = (unsigned)(x % LIVE);
    mi_free(live[i]);
    live[i] = mi_malloc(16 + (size_t)(x >> 40) % 2000);
  }
  for (int i = 0; i < LIVE; i++) mi_free(live[i]);
  return NULL;
}

static void sleep_us(long us) {
  struct timespec ts = {0, us * 1000};
  nanosleep(&ts, NULL);
}

/* ---- attach and detach under load ---- */

static void test_switching(void) {
  pthread_t threads[WORKERS];
  for (uintptr_t i = 0; i < WORKERS; i++) pthread_create(&threads[i], NULL, worker, (void *)(i + 1));
  int refused = 0;
  for (int round = 0; round < SWITCHES; round++) {
    test_prof_t *tp = round % 2 ? &prof_a : &prof_b;
    atomic_store(&tp->active, true);
    if (!mi_profile(&tp->profiler)) refused++;
    sleep_us(300);
    mi_profile(NULL);
    atomic_store(&tp->active, false);
  }
  atomic_store(&stop, true);
  for (int i = 0; i < WORKERS; i++) pthread_join(threads[i], NULL);
  long allocs = atomic_load(&prof_a.allocs) + atomic_load(&prof_b.allocs);
  long frees = atomic_load(&prof_a.frees) + atomic_load(&prof_b.frees);
  tap_diag("%d attachments: %ld samples, %ld frees reported", SWITCHES, allocs, frees);
  TAP_OK(refused == 0, "every attachment after a detach succeeds (%d refused)", refused);
  TAP_OK(allocs > SWITCHES && frees > SWITCHES / 2, "the profilers sampled and heard of frees meanwhile");
  TAP_OK(atomic_load(&late_calls) == 0,
         "no callback runs after its profiler's detach returned (%ld did)", atomic_load(&late_calls));
  TAP_OK(atomic_load(&foreign_data) == 0,
         "on_free gets only its own profiler's sample data (%ld other)", atomic_load(&foreign_data));
  TAP_OK(atomic_load(&lib_errors) == 0, "the library reported no error (%ld)", atomic_load(&lib_errors));
}

/* ---- a callback that detaches ---- */

static atomic_bool self_detached;

static void on_free_detaching(void *p, size_t size, void *data, void *arg) {
  (void)p, (void)size, (void)data, (void)arg;
  if (!atomic_exchange(&self_detached, true)) mi_profile(NULL);
}

static size_t on_alloc_plain(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg) {
  (void)heap, (void)p, (void)size, (void)sample_size, (void)data, (void)arg;
  return 0;
}

static void test_detach_inside(void) {
  mi_profiler_t pr = {.sample_rate = 64, .on_alloc = on_alloc_plain, .on_free = on_free_detaching};
  TAP_OK(mi_profile(&pr), "attach a profiler whose on_free detaches it");
  alarm(20);   /* a detach waiting for its own callback would hang */
  for (int i = 0; i < 10000 && !atomic_load(&self_detached); i++) mi_free(mi_malloc(100));
  alarm(0);
  TAP_OK(atomic_load(&self_detached), "a detach from inside on_free returns");
  TAP_OK(mi_profile(&pr) && mi_profile(NULL), "and the profiler can be attached and detached again");
}

/* ---- fork while another thread is inside a callback ---- */

static atomic_int fork_phase;   /* 1: a callback is waiting; 2: let it go */

static size_t on_alloc_holding(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg) {
  (void)heap, (void)p, (void)size, (void)sample_size, (void)data, (void)arg;
  int expected = 0;
  if (atomic_compare_exchange_strong(&fork_phase, &expected, 1))
    while (atomic_load(&fork_phase) != 2) sleep_us(100);
  return 0;
}

static void *alloc_until_held(void *arg) {
  (void)arg;
  while (atomic_load(&fork_phase) == 0) mi_free(mi_malloc(200));
  return NULL;
}

static atomic_bool detaching;

static void *detach(void *arg) {
  (void)arg;
  atomic_store(&detaching, true);
  mi_profile(NULL);   /* waits for the callback held in on_alloc_holding */
  return NULL;
}

/* Fork while one thread is held inside on_alloc and another waits in
 * mi_profile(NULL) for it: neither exists in the child, which must still
 * be able to detach (nothing to wait for) and attach again (no change
 * left half-made). */
static void test_fork_inside(void) {
  mi_profiler_t pr = {.sample_rate = 64, .on_alloc = on_alloc_holding};
  TAP_OK(mi_profile(&pr), "attach a profiler whose on_alloc waits");
  pthread_t t, d;
  pthread_create(&t, NULL, alloc_until_held, NULL);
  while (atomic_load(&fork_phase) != 1) sleep_us(100);
  pthread_create(&d, NULL, detach, NULL);
  while (!atomic_load(&detaching)) sleep_us(100);
  sleep_us(20000);   /* let it reach its wait */
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);   /* waiting for the parent's threads, which are not here, would hang */
    mi_profile(NULL);
    _exit(mi_profile(&pr) && mi_profile(NULL) ? 0 : 3);
  }
  atomic_store(&fork_phase, 2);
  pthread_join(t, NULL);
  pthread_join(d, NULL);
  int status = 0;
  TAP_OK(pid > 0 && waitpid(pid, &status, 0) == pid,
         "fork while one thread is inside on_alloc and another detaching waits for it");
  TAP_OK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
         "the child detaches and attaches again (status %d, signal %d)", WIFEXITED(status) ? WEXITSTATUS(status) : -1,
         WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  TAP_OK(mi_profile(&pr) && mi_profile(NULL), "the parent's detach finished: attach and detach again");
}

int main(void) {
#if !MIALLOC_PROF
  printf("1..0 # SKIP built without profiler support (--disable-prof)\n");
  return 0;
#endif
  mi_register_error(on_error, NULL);
  prof_init(&prof_a, 8, 0xA11CE5A3B1E5u);
  prof_init(&prof_b, 48, 0xB0B5EC0DDA7Au);
  test_switching();
  test_detach_inside();
  test_fork_inside();
  return tap_done();
}

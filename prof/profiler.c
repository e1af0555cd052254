/* profiler.c -- the profiler: life cycle, the sampling callbacks, snapshot
 * triggers, the profiler thread, fork and exit handling, and activation
 * from the environment.
 *
 * Estimates.  The core samples bytes as a Poisson process with mean
 * interval R (the sample rate): a block it charges sample_size bytes for is
 * sampled with probability q = 1 - exp(-sample_size/R).  Each sample
 * therefore stands for 1/q objects and size/q bytes (the Horvitz-Thompson
 * estimate, unbiased whatever the mix of sizes at a location).  on_alloc
 * adds these weights to the location's allocated and in-use counters and
 * stores them in the block's sample data; on_free subtracts exactly the
 * stored weights, so in-use totals return to zero when everything sampled
 * is freed.  The next sampling interval is an exponential draw with mean R
 * from the profiler's own generator (splitmix64, seeded from
 * MIALLOC_PROFILE_SEED when set, else at random).
 *
 * Where snapshots are written.
 *  - Allocation and in-use triggers fire inside on_alloc and write the
 *    snapshot right there, on the allocating thread.  That is safe because
 *    the writer (gather, encode, gzip, write) allocates only from the
 *    profiler's private heap, which the core excludes from sampling and
 *    which on_alloc is allowed to use, uses raw system calls (no stdio, no
 *    qsort, no dladdr) and takes only its own writer lock, with a
 *    try-lock: a trigger that finds another snapshot in progress is folded
 *    into it -- and, once per snapshot, the loader's dl_load_write_lock
 *    through dl_iterate_phdr to read the dynamic symbol tables, which is
 *    safe inside malloc (symbols.c says why).  The thread-local guard keeps anything it might allocate from
 *    being sampled.  The cost (one profile write every ALLOC_INTERVAL
 *    bytes) lands on one allocation, and the snapshot is taken exactly
 *    when the threshold is crossed.
 *  - Time and signal triggers need a thread that runs while the program
 *    sleeps: the profiler thread waits in poll() on an eventfd with the
 *    time interval as timeout.  The signal handler only write()s to the
 *    eventfd (async-signal-safe); the thread writes the snapshot.
 *  - mi_profiler_snapshot()/mi_pprof_snapshot() and process exit (a
 *    destructor) write on the calling thread, waiting for the writer lock.
 *
 * The thread is created lazily: only when a time interval or a signal is
 * configured, and only at the first sampled allocation (or explicit
 * snapshot) -- never from the constructor, so a preloaded program that
 * forks and execs, or never allocates, stays single threaded.  Inside
 * on_alloc the calling thread's default heap is switched to the private
 * heap around pthread_create, so the little that glibc allocates for the
 * new thread comes from the unprofiled heap.  After fork the child resets
 * its sequence number, writer lock and eventfd, and gets its own thread the
 * same lazy way; its files carry its own pid.
 */
#include "internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define PROF_DEFAULT_RATE ((size_t)512 << 10)
#define PROF_DEFAULT_ALLOC_INTERVAL ((size_t)1 << 30)
#define PROF_MAX_TIME_INTERVAL 86400
#define PROF_MAX_LIVE 8

enum { THREAD_NONE = 0, THREAD_STARTING, THREAD_RUNNING, THREAD_FAILED };

struct mi_pprof_profiler_s {
  mi_heap_t *heap; /* private, excluded from sampling; holds this struct too */
  size_t rate, alloc_interval, inuse_interval, time_interval;
  int signo;
  bool text;
  char base[PATH_MAX];
  prof_table_t table;
  _Atomic uint64_t rng;
  _Atomic uint64_t alloc_acc;   /* estimated bytes since the last alloc trigger */
  _Atomic uint64_t alloc_total; /* estimated bytes allocated */
  _Atomic uint64_t inuse_total; /* estimated bytes in use (two's complement) */
  _Atomic uint64_t inuse_mark;  /* inuse_total at the last snapshot */
  _Atomic uint64_t dropped;     /* samples not recorded (reentrancy, no memory) */
  _Atomic long seq;
  pthread_mutex_t write_lock;
  int efd;
  _Atomic int thread_state;
  pthread_t thread;
  _Atomic bool stop;     /* the thread must exit */
  _Atomic bool finished; /* the exit snapshot is written: no more triggers */
  uint64_t start_ns;
  uint64_t nonce; /* identifies this profiler's sample data */
};

/* What a sampled block carries to on_free.  owner is the recording
 * profiler's random nonce: a block sampled by a profiler since deleted and
 * freed after another was attached must not reach the new one's counters
 * (its loc would point into a destroyed heap). */
typedef struct sample_data_s {
  prof_loc_t *loc;
  uint64_t count; /* fixed point */
  uint64_t bytes;
  uint64_t owner;
} sample_data_t;

static __thread int prof_guard __attribute__((tls_model("initial-exec")));
/* the thread's id, asked once: gettid is a system call per sample otherwise */
static __thread pid_t prof_tid __attribute__((tls_model("initial-exec")));

static pid_t current_tid(void) {
  if (prof_tid == 0) prof_tid = gettid();
  return prof_tid;
}

static pthread_mutex_t live_lock = PTHREAD_MUTEX_INITIALIZER;
static mi_pprof_profiler_t *_Atomic live[PROF_MAX_LIVE];
static mi_pprof_profiler_t *env_profiler;
static _Atomic int signal_fd = -1;

/* --- random intervals ------------------------------------------------------ */
static uint64_t rng_next(mi_pprof_profiler_t *P) {
  uint64_t z = atomic_fetch_add_explicit(&P->rng, 0x9e3779b97f4a7c15ull, memory_order_relaxed) +
               0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* exponential with mean rate, at least 1 */
static size_t next_interval(mi_pprof_profiler_t *P) {
  if (P->rate <= 1) return 1;
  double u = (double)((rng_next(P) >> 11) + 1) * 0x1p-53; /* (0, 1] */
  double x = -log(u) * (double)P->rate;
  if (x < 1) return 1;
  if (x > (double)(SIZE_MAX / 4)) return SIZE_MAX / 4;
  return (size_t)x;
}

static uint64_t now_ns(clockid_t clock) {
  struct timespec ts;
  clock_gettime(clock, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* --- snapshots ----------------------------------------------------------------- */
typedef struct gather_s {
  prof_sample_t *s;
  size_t n, cap;
} gather_t;

static uint64_t nonneg(uint64_t v) { return v > (UINT64_MAX >> 1) ? 0 : v; }

static void gather_one(prof_loc_t *l, void *arg) {
  gather_t *g = arg;
  if (g->n == g->cap) return; /* added after we sized the array: next time */
  prof_sample_t *s = &g->s[g->n];
  s->tid = l->tid;
  s->depth = l->depth;
  s->frames = l->frames;
  s->alloc_count = atomic_load_explicit(&l->alloc_count, memory_order_relaxed);
  s->alloc_bytes = atomic_load_explicit(&l->alloc_bytes, memory_order_relaxed);
  s->inuse_count = nonneg(atomic_load_explicit(&l->inuse_count, memory_order_relaxed));
  s->inuse_bytes = nonneg(atomic_load_explicit(&l->inuse_bytes, memory_order_relaxed));
  if ((s->alloc_count | s->alloc_bytes) != 0) g->n++;
}

/* Write one snapshot.  wait: block for the writer lock (else give up if a
 * snapshot is in progress).  Returns the sequence number or -1. */
static long write_snapshot(mi_pprof_profiler_t *P, bool wait) {
  if (wait) pthread_mutex_lock(&P->write_lock);
  else if (pthread_mutex_trylock(&P->write_lock) != 0) return -1;
  prof_guard++;
  int err = 0;
  long seq = -1;
  uint64_t inuse_now = atomic_load(&P->inuse_total);

  gather_t g = {0};
  g.cap = atomic_load(&P->table.count) + 1;
  g.s = mi_heap_calloc(P->heap, g.cap, sizeof *g.s);
  prof_maps_t maps;
  bool have_maps = prof_maps_read(&maps, P->heap);
  prof_buf_t out;
  prof_buf_init(&out, P->heap);
  if (g.s == NULL) {
    err = ENOMEM;
  } else {
    prof_table_visit(&P->table, gather_one, &g);
    uint64_t t = now_ns(CLOCK_REALTIME);
    prof_snapshot_t snap = {
        .rate = P->rate,
        .time_nanos = t,
        .duration_nanos = t > P->start_ns ? t - P->start_ns : 0,
        .samples = g.s,
        .nsamples = g.n,
        .maps = have_maps ? &maps : NULL,
    };
    bool ok = P->text ? prof_encode_text(&out, &snap) : prof_encode_proto(&out, &snap);
    if (!ok) err = ENOMEM;
    else {
      seq = prof_output_write(P->base, P->text ? "heap" : "pb.gz", getpid(), &P->seq, &out, !P->text,
                              P->heap);
      if (seq < 0) err = errno;
    }
  }
  if (seq >= 0) atomic_store(&P->inuse_mark, inuse_now);
  prof_buf_free(&out);
  prof_maps_free(&maps);
  mi_free(g.s);
  prof_guard--;
  pthread_mutex_unlock(&P->write_lock);
  if (seq < 0) {
    static _Atomic bool warned;
    if (!atomic_exchange(&warned, true)) {
      const char *e = strerrordesc_np(err);
      char why[128] = ": ";
      strncat(why, e ? e : "unknown error", sizeof why - 3);
      prof_warn("cannot write a profile for ", P->base, why);
    }
    errno = err;
  }
  return seq;
}

/* --- the profiler thread ----------------------------------------------------- */
static void *thread_main(void *arg) {
  mi_pprof_profiler_t *P = arg;
  pthread_setname_np(pthread_self(), "mialloc-prof"); /* for ps -L, gdb */
  prof_guard = 1;                /* nothing on this thread is sampled */
  mi_heap_set_default(P->heap); /* and anything libc allocates here is private */
  uint64_t period = (uint64_t)P->time_interval * 1000000000ull;
  uint64_t next = now_ns(CLOCK_MONOTONIC) + period;
  while (!atomic_load(&P->stop)) {
    int timeout = -1;
    if (period != 0) {
      uint64_t now = now_ns(CLOCK_MONOTONIC);
      uint64_t ms = next > now ? (next - now + 999999) / 1000000 : 0;
      timeout = ms > INT_MAX ? INT_MAX : (int)ms;
    }
    struct pollfd pfd = {.fd = P->efd, .events = POLLIN};
    int r = poll(&pfd, 1, timeout);
    if (atomic_load(&P->stop)) break;
    if (r > 0) {
      uint64_t v;
      (void)!read(P->efd, &v, sizeof v);
      if (atomic_load(&P->stop)) break;
      if (!atomic_load(&P->finished)) write_snapshot(P, true); /* signal */
    } else if (r == 0 && period != 0) {
      uint64_t now = now_ns(CLOCK_MONOTONIC);
      if (now + 1000000 >= next) {
        if (!atomic_load(&P->finished)) write_snapshot(P, true); /* time */
        next += period;
        if (next < now) next = now + period;
      }
    }
  }
  return NULL;
}

/* Start the thread if this profiler needs one and it is not running.
 * in_alloc: called from on_alloc, where glibc's allocations for the new
 * thread must go to the private heap. */
static void thread_ensure(mi_pprof_profiler_t *P, bool in_alloc) {
  if (P->time_interval == 0 && P->signo == 0) return;
  if (atomic_load_explicit(&P->thread_state, memory_order_relaxed) != THREAD_NONE) return;
  int expect = THREAD_NONE;
  if (!atomic_compare_exchange_strong(&P->thread_state, &expect, THREAD_STARTING)) return;
  mi_heap_t *old = in_alloc ? mi_heap_set_default(P->heap) : NULL;
  sigset_t all, prev;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &prev); /* the thread starts with all signals blocked */
  atomic_store(&P->stop, false);
  int rc = pthread_create(&P->thread, NULL, thread_main, P);
  pthread_sigmask(SIG_SETMASK, &prev, NULL);
  if (in_alloc) mi_heap_set_default(old);
  atomic_store(&P->thread_state, rc == 0 ? THREAD_RUNNING : THREAD_FAILED);
  if (rc != 0) prof_warn("cannot start the profiler thread", "", "");
}

static void on_signal(int sig) {
  (void)sig;
  int saved = errno;
  int fd = atomic_load(&signal_fd);
  uint64_t one = 1;
  if (fd >= 0) (void)!write(fd, &one, sizeof one);
  errno = saved;
}

/* --- the core's callbacks ------------------------------------------------------ */
static bool add_clamped(_Atomic uint64_t *acc, uint64_t add, uint64_t interval) {
  uint64_t cur = atomic_load_explicit(acc, memory_order_relaxed), nv;
  bool trig;
  do {
    nv = cur + add;
    trig = nv >= interval;
    if (trig) nv %= interval;
  } while (!atomic_compare_exchange_weak_explicit(acc, &cur, nv, memory_order_relaxed, memory_order_relaxed));
  return trig;
}

static prof_capturing size_t on_alloc(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg) {
  (void)heap;
  (void)p;
  mi_pprof_profiler_t *P = arg;
  size_t next = next_interval(P);
  if (prof_guard != 0) {
    atomic_fetch_add_explicit(&P->dropped, 1, memory_order_relaxed);
    return next;
  }
  prof_guard++;
  void *raw[PROF_RAW_FRAMES];
  uintptr_t frames[PROF_MAX_FRAMES];
  unsigned depth = prof_stack_trim(raw, prof_stack_unwind(raw, PROF_RAW_FRAMES), frames, PROF_MAX_FRAMES);
  prof_loc_t *loc = prof_table_get(&P->table, current_tid(), frames, depth);
  if (loc == NULL) {
    atomic_fetch_add_explicit(&P->dropped, 1, memory_order_relaxed);
  } else {
    double q = 1.0;
    if (P->rate > 1) {
      q = -expm1(-(double)(sample_size ? sample_size : size) / (double)P->rate);
      if (!(q > 1e-12)) q = 1e-12;
    }
    uint64_t count = (uint64_t)llround((double)(1u << PROF_COUNT_SHIFT) / q);
    uint64_t bytes = (uint64_t)llround((double)size / q);
    atomic_fetch_add_explicit(&loc->alloc_count, count, memory_order_relaxed);
    atomic_fetch_add_explicit(&loc->alloc_bytes, bytes, memory_order_relaxed);
    atomic_fetch_add_explicit(&loc->inuse_count, count, memory_order_relaxed);
    atomic_fetch_add_explicit(&loc->inuse_bytes, bytes, memory_order_relaxed);
    sample_data_t sd = {loc, count, bytes, P->nonce};
    memcpy(data, &sd, sizeof sd);
    atomic_fetch_add_explicit(&P->alloc_total, bytes, memory_order_relaxed);
    uint64_t inuse = atomic_fetch_add_explicit(&P->inuse_total, bytes, memory_order_relaxed) + bytes;

    if (!atomic_load_explicit(&P->finished, memory_order_relaxed)) {
      bool trigger = P->alloc_interval != 0 && add_clamped(&P->alloc_acc, bytes, P->alloc_interval);
      if (P->inuse_interval != 0) {
        uint64_t mark = atomic_load_explicit(&P->inuse_mark, memory_order_relaxed);
        if ((int64_t)(inuse - mark) >= (int64_t)P->inuse_interval &&
            atomic_compare_exchange_strong(&P->inuse_mark, &mark, inuse))
          trigger = true;
      }
      int saved = errno;   /* a malloc that succeeds leaves errno alone */
      if (trigger) write_snapshot(P, false);
      thread_ensure(P, true);
      errno = saved;
    }
  }
  prof_guard--;
  return next;
}

static void on_free(void *p, size_t size, void *data, void *arg) {
  (void)p;
  (void)size;
  mi_pprof_profiler_t *P = arg;
  sample_data_t sd;
  memcpy(&sd, data, sizeof sd);
  if (sd.loc == NULL || sd.owner != P->nonce) return; /* not recorded here */
  atomic_fetch_sub_explicit(&sd.loc->inuse_count, sd.count, memory_order_relaxed);
  atomic_fetch_sub_explicit(&sd.loc->inuse_bytes, sd.bytes, memory_order_relaxed);
  atomic_fetch_sub_explicit(&P->inuse_total, sd.bytes, memory_order_relaxed);
}

static void on_snapshot(void *arg) {
  mi_pprof_profiler_t *P = arg;
  if (prof_guard != 0) return;
  thread_ensure(P, false);
  write_snapshot(P, true);
}

/* --- fork and exit ------------------------------------------------------------- */
static void atfork_child(void) {
  for (int i = 0; i < PROF_MAX_LIVE; i++) {
    mi_pprof_profiler_t *P = atomic_load(&live[i]);
    if (P == NULL) continue;
    pthread_mutex_init(&P->write_lock, NULL);
    prof_table_after_fork(&P->table);
    atomic_store(&P->seq, 0);
    atomic_store(&P->thread_state, THREAD_NONE); /* threads do not survive fork */
    if (P->efd >= 0) {
      close(P->efd); /* shared with the parent's thread */
      P->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
      if (P->signo != 0) atomic_store(&signal_fd, P->efd);
    }
  }
  pthread_mutex_init(&live_lock, NULL);
  prof_guard = 0;
  prof_tid = 0;   /* the child's thread has an id of its own */
}

__attribute__((destructor)) static void prof_at_exit(void) {
  for (int i = 0; i < PROF_MAX_LIVE; i++) {
    mi_pprof_profiler_t *P = atomic_load(&live[i]);
    if (P == NULL || atomic_exchange(&P->finished, true)) continue;
    write_snapshot(P, true);
  }
}

static void register_atfork(void) { pthread_atfork(NULL, NULL, atfork_child); }

/* --- life cycle ----------------------------------------------------------------- */
static uint64_t initial_seed(void) {
  const char *s = getauxval(AT_SECURE) ? NULL : getenv("MIALLOC_PROFILE_SEED");
  if (s != NULL && *s != 0) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 0);
    if (errno == 0 && *end == 0) return (uint64_t)v;
    prof_warn("MIALLOC_PROFILE_SEED: invalid value ", s, "; using a random seed");
  }
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r)
    r = now_ns(CLOCK_REALTIME) ^ ((uint64_t)getpid() << 32);
  return r;
}

static mi_pprof_profiler_t *create(size_t rate, const char *base_name, size_t alloc_interval,
                                   size_t inuse_interval, size_t time_interval, int signo) {
  if (base_name == NULL || time_interval > PROF_MAX_TIME_INTERVAL) {
    errno = EINVAL;
    return NULL;
  }
  if (rate == 0) rate = PROF_DEFAULT_RATE;
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  pthread_once(&once, register_atfork);
  prof_stack_init();

  mi_heap_t *heap = mi_heap_new();
  if (heap == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  mi_heap_profile_disable(heap);
  mi_pprof_profiler_t *P = mi_heap_zalloc(heap, sizeof *P);
  if (P == NULL || !prof_table_init(&P->table, heap, 16384)) {
    mi_heap_destroy(heap);
    errno = ENOMEM;
    return NULL;
  }
  P->heap = heap;
  if (!prof_output_base(base_name, P->base, sizeof P->base, &P->text)) {
    mi_heap_destroy(heap);
    errno = EINVAL;
    return NULL;
  }
  P->rate = rate;
  P->alloc_interval = alloc_interval;
  P->inuse_interval = inuse_interval;
  P->time_interval = time_interval;
  P->signo = signo;
  uint64_t seed = initial_seed();
  atomic_init(&P->rng, seed);
  if (getrandom(&P->nonce, sizeof P->nonce, GRND_NONBLOCK) != (ssize_t)sizeof P->nonce)
    P->nonce = now_ns(CLOCK_MONOTONIC) ^ (uint64_t)(uintptr_t)P;
  P->nonce |= 1;
  pthread_mutex_init(&P->write_lock, NULL);
  P->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  P->start_ns = now_ns(CLOCK_REALTIME);

  pthread_mutex_lock(&live_lock);
  int slot = -1;
  for (int i = 0; i < PROF_MAX_LIVE && slot < 0; i++)
    if (atomic_load(&live[i]) == NULL) slot = i;
  if (slot >= 0) atomic_store(&live[slot], P);
  pthread_mutex_unlock(&live_lock);

  mi_profiler_t mp = {
      .sample_rate = rate,
      .sample_data_size = sizeof(sample_data_t),
      .seed = seed ^ 0x5851f42d4c957f2dull,
      .arg = P,
      .on_alloc = on_alloc,
      .on_free = on_free,
      .on_snapshot = on_snapshot,
  };
  if (slot < 0 || !mi_profile(&mp)) {
    if (slot >= 0) atomic_store(&live[slot], NULL);
    if (P->efd >= 0) close(P->efd);
    mi_heap_destroy(heap);
    errno = EBUSY;
    return NULL;
  }
  return P;
}

mi_pprof_profiler_t *mi_pprof_profiler_new(size_t sample_rate, const char *base_name, size_t alloc_interval,
                                           size_t inuse_interval, size_t time_interval_secs) {
  return create(sample_rate, base_name, alloc_interval, inuse_interval, time_interval_secs, 0);
}

void mi_pprof_profiler_delete(mi_pprof_profiler_t *P) {
  if (P == NULL) return;
  if (!atomic_exchange(&P->finished, true)) write_snapshot(P, true);
  mi_profile(NULL);
  if (atomic_load(&P->thread_state) == THREAD_RUNNING) {
    atomic_store(&P->stop, true);
    uint64_t one = 1;
    (void)!write(P->efd, &one, sizeof one);
    pthread_join(P->thread, NULL);
  }
  if (P->signo != 0) {
    signal(P->signo, SIG_DFL);
    atomic_store(&signal_fd, -1);
  }
  pthread_mutex_lock(&live_lock);
  for (int i = 0; i < PROF_MAX_LIVE; i++)
    if (atomic_load(&live[i]) == P) atomic_store(&live[i], NULL);
  if (env_profiler == P) env_profiler = NULL;
  pthread_mutex_unlock(&live_lock);
  if (P->efd >= 0) close(P->efd);
  mi_heap_destroy(P->heap); /* P lives there */
}

long mi_pprof_snapshot(mi_pprof_profiler_t *P) {
  if (P == NULL) {
    errno = EINVAL;
    return -1;
  }
  thread_ensure(P, false);
  return write_snapshot(P, true);
}

mi_pprof_profiler_t *mi_pprof_env_profiler(void) { return env_profiler; }

uint64_t mi_pprof_inuse_bytes(const mi_pprof_profiler_t *P) {
  return P ? nonneg(atomic_load(&((mi_pprof_profiler_t *)P)->inuse_total)) : 0;
}

uint64_t mi_pprof_alloc_bytes(const mi_pprof_profiler_t *P) {
  return P ? atomic_load(&((mi_pprof_profiler_t *)P)->alloc_total) : 0;
}

/* --- activation from the environment ---------------------------------------------- */
static uint64_t env_size(const char *name, uint64_t def, uint64_t min, uint64_t max) {
  const char *s = getenv(name);
  if (s == NULL || *s == 0) return def;
  uint64_t v;
  if (!prof_parse_size(s, &v) || v < min || v > max) {
    prof_warn(name, ": invalid value ", s);
    return def;
  }
  return v;
}

__attribute__((constructor)) static void prof_env_init(void) {
  const char *base = getenv("MIALLOC_PROFILE");
  if (base == NULL || *base == 0) return;
  if (getauxval(AT_SECURE) != 0) return; /* privileged: the environment is not trusted */
  uint64_t rate = env_size("MIALLOC_PROFILE_SAMPLE_RATE", PROF_DEFAULT_RATE, 1, (uint64_t)1 << 40);
  uint64_t alloc = env_size("MIALLOC_PROFILE_ALLOC_INTERVAL", PROF_DEFAULT_ALLOC_INTERVAL, 0, UINT64_MAX >> 2);
  uint64_t inuse = env_size("MIALLOC_PROFILE_INUSE_INTERVAL", 0, 0, UINT64_MAX >> 2);
  uint64_t secs = 0;
  const char *t = getenv("MIALLOC_PROFILE_TIME_INTERVAL");
  if (t != NULL && *t != 0) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(t, &end, 10);
    if (errno != 0 || *end != 0 || t[0] == '-' || v > PROF_MAX_TIME_INTERVAL)
      prof_warn("MIALLOC_PROFILE_TIME_INTERVAL: invalid value ", t, " (seconds, at most 86400)");
    else
      secs = v;
  }
  int signo = 0;
  const char *sg = getenv("MIALLOC_PROFILE_SIGNAL");
  if (sg != NULL && *sg != 0) {
    char *end;
    long v = strtol(sg, &end, 10);
    if (*end != 0 || v <= 0 || v > SIGRTMAX || v == SIGKILL || v == SIGSTOP)
      prof_warn("MIALLOC_PROFILE_SIGNAL: invalid value ", sg, "");
    else
      signo = (int)v;
  }
  mi_pprof_profiler_t *P = create((size_t)rate, base, (size_t)alloc, (size_t)inuse, (size_t)secs, signo);
  if (P == NULL) {
    prof_warn("MIALLOC_PROFILE: cannot start the profiler for ", base, errno == EBUSY ? " (another profiler is attached)" : "");
    return;
  }
  if (signo != 0) {
    atomic_store(&signal_fd, P->efd);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, NULL) != 0) prof_warn("MIALLOC_PROFILE_SIGNAL: cannot handle signal ", sg, "");
  }
  env_profiler = P;
}

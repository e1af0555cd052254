/* purge.c -- purging driven by time, so an idle program's RSS comes down.
 *
 * Owner threads purge their own segments' free slices on their slow paths;
 * whole free segments wait in the arenas, and the free slices of segments
 * exited threads left wait on the abandoned list.  A program that frees a
 * lot and then sits idle would keep those forever (and a thread that waits
 * would keep its own free slices), so once enough dirty
 * memory is waiting (MIA_PURGE_THREAD_MIN) a background thread is started
 * that sleeps until the next deadline and purges them.  Small programs
 * never start it: most processes stay single-threaded.  Once nothing has
 * waited for MIA_PURGE_THREAD_LINGER_MS it exits, so a program that had a
 * big burst is single-threaded again when it later calls what refuses
 * multi-threaded callers (unshare(CLONE_NEWUSER), setns into a user
 * namespace); the next 16 MiB starts a new one.
 */
#include "internal.h"
#include "tls.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>

/* 16 MiB: at 64, a program that freed 50 MiB of small blocks and went idle
 * kept all of it.  The benchmark workloads that free this much started the
 * thread at 64 MiB already, but for strbuild, whose time did not move. */
#define MIA_PURGE_THREAD_MIN (4 * MIA_SEGMENT_SIZE)
#define MIA_PURGE_THREAD_LINGER_MS 1000

static _Atomic(int) mia_purge_state;      /* 0 none, 1 starting/running */
static _Atomic(int) mia_purge_wakeups;    /* futex word: bumped by new work */
static _Atomic(int) mia_purge_idle;       /* 1 while it waits with no deadline */
static _Atomic(size_t) mia_purge_pending; /* dirty bytes waiting in arenas, abandoned and thread segments */

/* The thread has had nothing to do for a whole linger: may it exit?
 * mia_purge_schedule bumps the counter before it reads the state, and we
 * clear the state before we read the counter, all seq_cst: either we see
 * its bump and stay, or it sees the state clear and starts a new thread
 * (or, below the threshold, leaves the work to the allocation paths, as
 * before any thread ran). */
static bool mia_purge_thread_may_exit(int seen) {
  atomic_store(&mia_purge_state, 0);
  if (atomic_load(&mia_purge_wakeups) == seen) return true;
  int expected = 0;
  /* new work came: stay, unless a new thread was started for it already */
  return !atomic_compare_exchange_strong(&mia_purge_state, &expected, 1);
}

/* One pass: every sub-process's arenas and abandoned segments purged
 * where due, and the live threads' free slices where overdue.  Returns
 * the next deadline, 0 if nothing waits. */
static uint64_t mia_purge_pass(uint64_t now) {
  uint64_t next = mia_subprocs_purge_due(now);
  return mia_deadline_min(next, mia_tlds_purge_overdue(now, mia_purge_delay_arena()));
}

static void *mia_purge_main(void *arg) {
  (void)arg;
  for (;;) {
    int seen = atomic_load(&mia_purge_wakeups);
    uint64_t now = mia_prim_clock_ms();
    uint64_t next = mia_purge_pass(now);
    if (next == 0) {
      atomic_store(&mia_purge_idle, 1);
      mia_prim_futex_wait_ms((int *)&mia_purge_wakeups, seen, MIA_PURGE_THREAD_LINGER_MS);
      atomic_store(&mia_purge_idle, 0);
      if (atomic_load(&mia_purge_wakeups) == seen && mia_purge_pass(mia_prim_clock_ms()) == 0 &&
          mia_purge_thread_may_exit(seen))
        break;
    } else if (next > now) {
      mia_prim_futex_wait_ms((int *)&mia_purge_wakeups, seen, next - now);
    }
  }
  mia_verbose("the background purge thread exits: nothing to purge for %d ms\n", MIA_PURGE_THREAD_LINGER_MS);
  return NULL;
}

static void mia_purge_thread_start(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&mia_purge_state, &expected, 1)) return;
  /* the thread must never run a signal handler of the program */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t thread;
  bool was_suspended = mia_sampling_suspend();
  mia_theap_t *own = mia_theap_use_process_main();
  int saved = errno;   /* started from inside free, which must leave errno alone */
  int rc = pthread_create(&thread, &attr, mia_purge_main, NULL);
  errno = saved;
  mia_theap_restore(own);
  mia_sampling_resume(was_suspended);
  pthread_attr_destroy(&attr);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (rc != 0) {
    mia_verbose("could not start the purge thread (error %d); purging on allocation only\n", rc);
    return;
  }
  mia_verbose("started the background purge thread\n");
}

/* Dirty bytes that wait from now on; mia_purge_poke, once the caller
 * holds no lock, starts or wakes the thread for them. */
void mia_purge_pending_add(size_t dirty_bytes) {
  atomic_fetch_add(&mia_purge_pending, dirty_bytes);
}

/* A thread inside one of its segment operations (segment.c's tld_enter)
 * must not start the purge thread: pthread_create allocates on it, and
 * that allocation found the state half updated.  A scan of the abandoned
 * segments, run from the purge pass of a thread adopting a segment, started
 * it there, and the page the allocation set up in the segment being
 * adopted was queued twice (its bin's list looped; the thread spun at
 * exit).  The start waits for the thread's outermost tld_leave
 * (mia_purge_start_deferred_run).  1: a plain poke, 2: for orphans. */
static bool mia_purge_start_deferred(bool start_anyway) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) return false;
  mia_tld_t *thread = theap->tld->thread_tld;
  bool inside = thread->segment_lock_depth > 0;
  for (mia_theap_t *t = thread->heap_theaps; !inside && t != NULL; t = t->tld_next) inside = t->tld->segment_lock_depth > 0;
  if (!inside) return false;
  uint8_t want = start_anyway ? 2 : 1;
  if (thread->purge_start_later < want) thread->purge_start_later = want;
  return true;
}

/* Called by tld_leave once tld, the calling thread's own, is left. */
void mia_purge_start_deferred_run(mia_tld_t *tld) {
  mia_theap_t *theap = mia_theap_get();
  if (tld->purge_start_later == 0 || theap == &mia_theap_empty || theap->tld->thread_tld != tld) return;
  uint8_t want = tld->purge_start_later;
  tld->purge_start_later = 0;
  if (want == 2) mia_purge_poke_orphans();
  else mia_purge_poke();
}

/* Wakes the thread, or starts it where enough waits (or start_anyway). */
static void mia_purge_poke_for(bool start_anyway) {
  /* bumped before the state is read: see mia_purge_thread_may_exit */
  atomic_fetch_add(&mia_purge_wakeups, 1);
  if (atomic_load(&mia_purge_state) == 0) {
    if ((!start_anyway && atomic_load(&mia_purge_pending) < MIA_PURGE_THREAD_MIN) ||
        mia_option_get_fast(mi_option_purge_thread) == 0 || mia_option_get_fast(mi_option_purge_delay) < 0)
      return;
    if (mia_purge_start_deferred(start_anyway)) return;
    mia_purge_thread_start();
    return;
  }
  /* New work never has an earlier deadline than what the thread waits
   * for already, so only a thread waiting with none needs waking (a
   * system call per freed segment: 16,000 of them in aligncalloc).
   * seq_cst on both sides: either the thread sees the bumped counter and
   * does not sleep, or we see its idle flag. */
  if (atomic_load(&mia_purge_idle)) mia_prim_futex_wake((int *)&mia_purge_wakeups, 1);
}

/* Called without locks held (starting the thread may allocate). */
void mia_purge_poke(void) { mia_purge_poke_for(false); }

/* A free into an abandoned segment scheduled a scan (segment.c).  What the
 * scan may give back is counted nowhere until then, so the thread is
 * started for it where the segments that exited threads left and nobody
 * took over (or gave back) add up to the threshold: a program whose
 * workers finished and whose main thread freed their results and went
 * idle kept all of that resident. */
void mia_purge_poke_orphans(void) {
  const mia_stats_t *s = &mia_stats_global;
  int64_t left = __atomic_load_n(&s->abandoned_segments, __ATOMIC_RELAXED) -
                 __atomic_load_n(&s->reclaimed_segments, __ATOMIC_RELAXED) -
                 __atomic_load_n(&s->released_segments, __ATOMIC_RELAXED);
  mia_purge_poke_for(left * (int64_t)MIA_SEGMENT_SIZE >= (int64_t)MIA_PURGE_THREAD_MIN);
}

/* Called (without locks held) after dirty memory was added to an arena. */
void mia_purge_schedule(size_t dirty_bytes) {
  mia_purge_pending_add(dirty_bytes);
  mia_purge_poke();
}

/* Dirty bytes that no longer wait: purged, or claimed again before their
 * purge (without the latter the count only grew, and after one burst any
 * freed segment restarted the thread).  Never below zero, also with
 * several threads at it. */
void mia_purge_done(size_t bytes) {
  size_t pending = atomic_load(&mia_purge_pending);
  while (bytes != 0 && pending != 0 &&
         !atomic_compare_exchange_weak(&mia_purge_pending, &pending, pending - (bytes < pending ? bytes : pending))) {
  }
}

/* A forked child has no purge thread. */
void mia_purge_fork_child(void) {
  atomic_store(&mia_purge_state, 0);
  atomic_store(&mia_purge_idle, 0);
}

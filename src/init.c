/* init.c -- process and thread life cycle.
 *
 * Process start-up runs at the first allocation or from the library
 * constructor, whichever is first; it takes no lock another path holds and
 * calls nothing that allocates, so it is safe inside a dlsym/open interposer
 * that runs before main.  Threads are set up lazily by their first slow-path
 * allocation and torn down by a pthread key destructor, which abandons
 * their segments for other threads to reclaim.
 */
#include "internal.h"
#include "tls.h"

#include <pthread.h>
#include <stdlib.h>

/* Static so every lookup works before initialisation: the empty theap's
 * direct table points at the empty page, whose free list is empty, so the
 * first allocation of any thread falls into the slow path. */
mia_page_t mia_page_empty;
mia_theap_t mia_theap_empty = {.pages_direct = {[0 ... MIA_DIRECT_WSIZE_MAX] = &mia_page_empty}};
mia_subproc_t mia_subproc_main = {.heap_main = {.subproc = &mia_subproc_main, .is_main = true},
                                  .is_main = true};
uintptr_t mia_process_secret;
/* not 0 before init either: fresh memory is mostly zeros (internal.h) */
uintptr_t mia_free_mark = 0x6d69616c6c6f6321u;
_Atomic(int) mia_process_state;
static uint64_t mia_process_start_ms;
static uintptr_t mia_init_thread;

#if defined(MIALLOC_TLS_THREAD_LOCAL)
__thread mia_theap_t *mia_theap_default __attribute__((tls_model("initial-exec"))) = &mia_theap_empty;
#endif

/* Every model uses this key for its destructor; pthread-keys also for lookup.
 * It starts invalid: see tls.h. */
pthread_key_t mia_theap_key = (pthread_key_t)-1;

/* ---- per-thread data: tld and its default theap, from a metadata pool ---- */

typedef struct mia_thread_data_s {
  mia_tld_t tld;
  mia_theap_t theap;
} mia_thread_data_t;

static mia_lock_t mia_td_lock;
static mia_tld_t *mia_td_live;   /* every tld in use, for the purge thread */
static mia_tld_t *mia_td_free;
static uint8_t *mia_td_chunk;
static size_t mia_td_chunk_left;

/* A zeroed tld with its theap attached (not yet initialised). */
mia_tld_t *mia_thread_data_alloc(void) {
  mia_lock(&mia_td_lock);
  mia_thread_data_t *td = NULL;
  if (mia_td_free != NULL) {
    td = (mia_thread_data_t *)mia_td_free;
    mia_td_free = mia_td_free->next_free;
  } else {
    if (mia_td_chunk_left < sizeof(mia_thread_data_t)) {
      size_t chunk = 64 * sizeof(mia_thread_data_t);
      mia_td_chunk = mia_prim_reserve(chunk, 0, false);
      mia_td_chunk_left = mia_td_chunk == NULL ? 0 : chunk;
    }
    if (mia_td_chunk_left >= sizeof(mia_thread_data_t)) {
      td = (mia_thread_data_t *)mia_td_chunk;
      mia_td_chunk += sizeof(mia_thread_data_t);
      mia_td_chunk_left -= sizeof(mia_thread_data_t);
    }
  }
  if (td != NULL) {
    memset(&td->tld, 0, sizeof td->tld);
    td->tld.theap_default = &td->theap;
    td->tld.live_next = mia_td_live;
    if (mia_td_live != NULL) mia_td_live->live_prev = &td->tld;
    mia_td_live = &td->tld;
  }
  mia_unlock(&mia_td_lock);
  return td == NULL ? NULL : &td->tld;
}

/* What a tld gathered for the process-wide counts (stats.c, segment.c),
 * once nobody writes them any more. */
static void mia_tld_flush_counts(mia_tld_t *tld) {
  mia_stat_local_flush_all(&tld->stat_local);
  mia_segments_pending_flush(tld);
}

static void mia_td_unlink(mia_tld_t *tld) {
  if (tld->live_prev == NULL && mia_td_live != tld) return;   /* unlinked in a forked child */
  if (tld->live_prev != NULL) tld->live_prev->live_next = tld->live_next;
  else mia_td_live = tld->live_next;
  if (tld->live_next != NULL) tld->live_next->live_prev = tld->live_prev;
  tld->live_next = tld->live_prev = NULL;
}

/* Thread data is never unmapped: a remote free may still read the theap
 * pointer of a page whose owner just exited (see page.c). */
void mia_thread_data_free(mia_tld_t *tld) {
  mia_lock(&mia_td_lock);
  /* under the lock: a reader summing the live tlds sees these counts either
   * here or in the process-wide ones, never in both */
  mia_tld_flush_counts(tld);
  mia_td_unlink(tld);
  tld->next_free = mia_td_free;
  mia_td_free = tld;
  mia_unlock(&mia_td_lock);
}

/* The purge thread's pass over every tld in use (purge.c): each purges the
 * free slices its owner left overdue.  Returns the earliest time to look
 * again, 0 if nothing waits.  The lock is held throughout: a tld is not
 * freed (and reused) under the pass, and a fork waits for the pass to end,
 * so the child finds no segment lock taken by a thread it does not have. */
uint64_t mia_tlds_purge_overdue(uint64_t now, uint64_t grace) {
  uint64_t next = 0;
  mia_lock(&mia_td_lock);
  for (mia_tld_t *tld = mia_td_live; tld != NULL; tld = tld->live_next) {
    next = mia_deadline_min(next, mia_segments_purge_overdue(tld, now, grace));
  }
  mia_unlock(&mia_td_lock);
  return next;
}

/* The page statistics every live tld still gathers, added to sum. */
void mia_tlds_stat_sum(mia_stat_local_t *sum) {
  mia_lock(&mia_td_lock);
  for (mia_tld_t *tld = mia_td_live; tld != NULL; tld = tld->live_next) mia_stat_local_sum(sum, &tld->stat_local);
  mia_unlock(&mia_td_lock);
}

/* The child has only the forking thread: the other threads' tlds have no
 * owner left, and one may be half updated, so they leave the list and the
 * purge thread leaves their memory as it is.  Not when the forking thread
 * itself was changing the list (from a signal handler). */
static void mia_tlds_fork_child(void) {
  if (mia_td_lock.fork_skipped) return;
  mia_theap_t *theap = mia_theap_get();
  mia_tld_t *mine = theap == &mia_theap_empty ? NULL : theap->tld->thread_tld;
  for (mia_tld_t *tld = mia_td_live, *next; tld != NULL; tld = next) {
    next = tld->live_next;
    if (tld->thread_tld != mine || mine == NULL) {
      mia_tld_flush_counts(tld);
      mia_td_unlink(tld);
    }
  }
}

static void mia_thread_done_cb(void *value);

/* ---- process ---- */

/* Every lock is taken around fork, so that none is held in the child by
 * a thread that does not exist there (see mia_lock_fork_prepare for the
 * one exception).  First the C library's stdio list lock, which glibc
 * orders before malloc's locks (prim/linux.c); then ours in the order the
 * allocator nests them: thread teardown, the guarded slots (whose new slot
 * segments come from the arenas), heaps and arenas, then the page map
 * (arena work updates it); last the registrations of callbacks, which
 * take no other lock. */
static void mia_fork_prepare(void) {
  mia_prim_fork_stdio_lock();
  mia_lock_fork_prepare(&mia_td_lock);
  mia_guarded_fork(MIA_FORK_PREPARE);
  mia_subprocs_fork_prepare();
  mia_pagemap_fork(MIA_FORK_PREPARE);
  mia_callbacks_fork(MIA_FORK_PREPARE);
}

static void mia_fork_parent(void) {
  mia_callbacks_fork(MIA_FORK_PARENT);
  mia_pagemap_fork(MIA_FORK_PARENT);
  mia_subprocs_fork_parent();
  mia_guarded_fork(MIA_FORK_PARENT);
  mia_lock_fork_parent(&mia_td_lock);
  mia_prim_fork_stdio_unlock(false);
}

static void mia_fork_child(void) {
  mia_callbacks_fork(MIA_FORK_CHILD);
  mia_pagemap_fork(MIA_FORK_CHILD);
  mia_subprocs_fork_child();
  mia_guarded_fork(MIA_FORK_CHILD);
  mia_tlds_fork_child();
  mia_lock_fork_child(&mia_td_lock);
  mia_prim_fork_stdio_unlock(true);
  mia_purge_fork_child();
}

/* getrandom fails before the kernel's generator is ready (early boot: a
 * preloaded mialloc runs in PID 1 too) and under sandboxes that refuse
 * it.  The secrets then come from what differs between processes and
 * runs -- the clock, the addresses ASLR chose, the thread id: weaker than
 * the kernel's, but not the constants a failed call would leave. */
static void mia_secrets_fallback(uintptr_t seeds[2]) {
  uint64_t x = mia_prim_clock_ns();
  x = mia_mix64(x ^ (uint64_t)(uintptr_t)seeds);              /* stack */
  x = mia_mix64(x ^ (uint64_t)(uintptr_t)&mia_process_secret);  /* this library */
  x = mia_mix64(x ^ (uint64_t)mia_prim_gettid());
  seeds[0] = (uintptr_t)x;
  seeds[1] = (uintptr_t)mia_mix64(x ^ 0x6d69616c6c6f6321u);
}

void mia_process_init(void) {
  int expected = 0;
  if (!atomic_compare_exchange_strong(&mia_process_state, &expected, 1)) {
    /* another thread is initialising: wait for it.  The initialising thread
     * itself can only re-enter from pthread_atfork, after state 2. */
    if (mia_init_thread != mia_prim_thread_id())
      while (atomic_load(&mia_process_state) == 1) mia_prim_yield();
    return;
  }
  mia_init_thread = mia_prim_thread_id();
  mia_process_start_ms = mia_prim_clock_ms_startup();
  /* both secrets from one system call: every process pays for it */
  uintptr_t seeds[2] = {0, mia_free_mark};
  if (!mia_prim_random_buf(seeds, sizeof seeds)) mia_secrets_fallback(seeds);
  mia_process_secret = seeds[0] | 1;
  mia_free_mark = seeds[1] | 1;
  mia_bins_init();
  mia_options_init();
  mia_pagemap_init();
  pthread_key_create(&mia_theap_key, mia_thread_done_cb);
  mia_cpu_detect();
  mia_guarded_init();
  atomic_store(&mia_process_state, 2);
  static const char *const thp_modes[] = {"never", "madvise", "always"};   /* mia_thp_mode_t */
  /* the node count is read only when it is shown: three system calls
   * otherwise paid by every process (the THP mode is read once anyway,
   * at the first arena) */
  if (mia_option_get_fast(mi_option_verbose) != 0)
    mia_verbose("process init: version %s, tls model %s, page size %zu, numa nodes %zu, "
                "transparent huge pages \"%s\"\n", PACKAGE_VERSION, MIALLOC_TLS_MODEL_NAME,
                mia_prim_page_size(), mia_prim_numa_node_count(),
                thp_modes[mia_prim_thp_mode()]);
  long huge = mia_option_get_fast(mi_option_reserve_huge_os_pages);
  if (huge > 0 && !mia_arena_reserve_huge(&mia_subproc_main, (size_t)huge))
    mia_warning("could not reserve %ld GiB of huge OS pages (is vm.nr_hugepages set?)\n", huge);
  size_t reserve = mi_option_get_size(mi_option_reserve_os_memory);
  if (reserve > 0 && !mia_arena_reserve(&mia_subproc_main, reserve))
    mia_warning("could not reserve %zu MiB of OS memory at start\n", reserve >> 20);
  /* last: pthread_atfork allocates, which now works */
  pthread_atfork(mia_fork_prepare, mia_fork_parent, mia_fork_child);
}

/* Valgrind's memcheck, massif, dhat, helgrind and drd replace malloc in
 * libc only: with mialloc preloaded (system-wide, say) they see none of
 * the program's blocks and report nothing, silently.  Said once, when our
 * code first takes memory for blocks -- which it never does when the tool
 * was told to replace ours too (--soname-synonyms=somalloc=...).  Builds
 * for Valgrind (--enable-valgrind) describe their blocks to it instead. */
void mia_check_tool_blindness(void) {
  static _Atomic(int) checked;
  if (MIA_ANNOTATED || atomic_load(&checked) != 0 || atomic_exchange(&checked, 1) != 0) return;
  char preload[2048];
  if (!mia_prim_getenv("LD_PRELOAD", preload, sizeof preload)) return;
  static const char *const tools[] = {"vgpreload_memcheck", "vgpreload_massif", "vgpreload_dhat",
                                      "vgpreload_helgrind", "vgpreload_drd"};
  for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
    if (strstr(preload, tools[i]) == NULL) continue;
    mia_warning("Valgrind's %s does not see mialloc's blocks: run it with "
                "--soname-synonyms=somalloc='*mialloc*' to check this program's allocations\n",
                tools[i] + strlen("vgpreload_"));
    return;
  }
}

/* ---- threads ---- */

mia_theap_t *mia_thread_init_slow(void) {
  if (atomic_load(&mia_process_state) != 2) mia_process_init();
  mia_theap_t *current = mia_theap_get();
  if (current != &mia_theap_empty) return current;
  mia_tld_t *tld = mia_thread_data_alloc();
  if (tld == NULL) return NULL;
  mia_theap_t *theap = tld->theap_default;
  tld->subproc = &mia_subproc_main;
  tld->heap = &mia_subproc_main.heap_main;
  tld->thread_tld = tld;
  mia_theap_init(theap, tld);
  static _Atomic(bool) groups_shared;
  if (!atomic_exchange_explicit(&groups_shared, true, memory_order_relaxed)) mia_theap_share_groups(theap);
  mia_theap_set(theap);
  /* after the theap is live: for a key past the first block glibc's
   * pthread_setspecific allocates, and that must find a working theap */
  if (mia_theap_key != (pthread_key_t)-1) pthread_setspecific(mia_theap_key, theap);
  mia_heap_link_theap(tld->heap, theap);
  mia_stat_add(&mia_stats_global.threads, 1);
  return theap;
}

static void mia_thread_done_theap(mia_theap_t *theap) {
  if (theap == NULL || theap == &mia_theap_empty) return;
  /* the TLS may point at a first-class heap's part (mi_heap_set_default) */
  mia_tld_t *tld = theap->tld->thread_tld;
  if (tld->is_done) return;
  tld->is_done = true;
  mia_theap_set(&mia_theap_empty);
  /* this thread's batches of remote frees go to their pages before its own
   * pages are given up (some may be its own) */
  mia_remote_flush(tld);
  mia_thread_release_heap_theaps(tld);
  mia_theap_t *main_theap = tld->theap_default;
  mia_heap_unlink_theap(main_theap);
  mia_theap_abandon_to(main_theap, &tld->subproc->abandoned, &tld->subproc->lock);
  mia_stat_add(&mia_stats_global.threads, -1);
  mia_thread_data_free(tld);
}

static void mia_thread_done_cb(void *value) { mia_thread_done_theap((mia_theap_t *)value); }

mia_export void mi_thread_init(void) {
  if (mia_theap_get() == &mia_theap_empty) mia_thread_init_slow();
}

mia_export void mi_thread_done(void) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) return;
  if (mia_theap_key != (pthread_key_t)-1) pthread_setspecific(mia_theap_key, NULL);
  mia_thread_done_theap(theap);
}

mia_export void mi_process_init(void) { mi_thread_init(); }

mia_export void mi_process_done(void) {
  static _Atomic(int) done;
  if (atomic_exchange(&done, 1)) return;
  mia_theap_t *theap = mia_theap_get();
  if (theap != &mia_theap_empty) mia_remote_flush(theap->tld->thread_tld);
  if (mia_option_get_fast(mi_option_show_stats)) mia_stats_print_at_exit();
  if (mia_option_get_fast(mi_option_show_leaks)) mia_show_leaks();
}

/* Run early so allocations from other constructors find us ready, and late
 * at exit; nothing is torn down at exit, so destructors that free after
 * this (or after our library is "finalised") keep working. */
__attribute__((constructor(101))) static void mia_constructor(void) {
  mi_thread_init();
  /* only when asked: mi_is_redirected allocates through libc */
  if (mia_option_get_fast(mi_option_verbose))
    mia_verbose("active (%s)\n", mi_is_redirected() ? "malloc is redirected to mialloc"
                                                     : "mi_ API only; malloc is not redirected");
}

__attribute__((destructor(101))) static void mia_destructor(void) { mi_process_done(); }

mia_export void mi_collect(bool force) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) return;
  mia_remote_flush(theap->tld->thread_tld);
  mia_deferred_free(theap, force);
  mia_theap_collect(theap, force);
  mia_subproc_t *sp = theap->tld->subproc;
  if (force && theap->tld->heap->is_main) {
    /* abandoned segments may hold nothing but freed blocks by now */
    mia_segment_t *seg;
    while (__atomic_load_n(&sp->abandoned, __ATOMIC_RELAXED) != NULL && mia_segment_reclaim_one(theap->tld, &seg)) {
    }
    mia_theap_collect(theap, true);
  } else if (force) {
    /* another heap may still give back the ones emptied since */
    mia_segments_reclaim_empty(theap->tld, PTRDIFF_MAX);
  }
  mia_arenas_purge(sp, force);
}

mia_export void mi_collect_reduce(size_t target_thread_owned) {
  (void)target_thread_owned;
  mi_collect(true);
}

mia_export void mi_thread_set_in_threadpool(void) {}

/* ---- the deferred-free callback: the program may free its own cached
 * memory when we are about to ask for more ---- */
static mia_callback_t mia_deferred_cb;

mia_export void mi_register_deferred_free(mi_deferred_free_fun *fun, void *arg) {
  mia_callback_set(&mia_deferred_cb, (mia_callback_fun *)fun, arg);
}

void mia_deferred_free(mia_theap_t *theap, bool force) {
  /* per thread, as mimalloc's: a process-wide counter was one more cache
   * line that every thread's fresh pages wrote (bench/pagechurn) */
  unsigned long long beat = ++theap->tld->thread_tld->heartbeat;
  /* every fresh page comes here: most programs never register one */
  if (mia_callback_never_set(&mia_deferred_cb) || theap->in_deferred) return;
  void *arg;
  mi_deferred_free_fun *fun = (mi_deferred_free_fun *)mia_callback_get(&mia_deferred_cb, &arg);
  if (fun == NULL) return;
  theap->in_deferred = true;   /* the callback may call free (or malloc) */
  fun(force, beat, arg);
  theap->in_deferred = false;
}

mia_export int mi_version(void) { return MI_MALLOC_VERSION; }

/* Ask a libc function that allocates internally: its block is ours exactly
 * when the process's malloc is ours.  (Comparing symbol addresses fails when
 * the executable's PLT entry is the canonical address of malloc.)  Called
 * through a volatile pointer so the compiler cannot turn it into our own
 * malloc; if the block is not ours it is left alone (we cannot know whose
 * free to use), a few bytes once. */
mia_export bool mi_is_redirected(void) {
  char *(*volatile dup)(const char *) = strdup;
  char *p = dup("m");
  bool ours = p != NULL && mia_page_of(p) != NULL;
  if (ours) mi_free(p);
  return ours;
}

mia_export bool mi_is_in_heap_region(const void *p) { return mia_page_of(p) != NULL; }

mia_export bool mi_check_owned(const void *p) { return mia_page_of(p) != NULL; }

uint64_t mia_process_start(void) { return mia_process_start_ms; }

/* test-subproc-purge.c -- the background purge thread serves every
 * sub-process, and a sub-process may be destroyed while it runs.
 *
 * First a thread in a new sub-process frees 48 MiB of huge blocks, which
 * starts the purge thread, and exits; the sub-process is destroyed at
 * once, and the process goes on past the purge deadline.  The thread used
 * to keep the sub-process it was started for and read it after it was
 * unmapped: the process died of SIGSEGV.  The statistics must then count
 * neither the sub-process's arena nor the memory that went with it.
 *
 * Then, once that thread has exited: the main sub-process frees 24 MiB of
 * huge blocks (starting a new purge thread), and a thread in another new
 * sub-process frees 48 MiB of huge blocks and waits, alive.  The process's
 * RSS must fall by both within 5 s: the thread used to purge only the
 * arenas of the sub-process whose frees started it.
 *
 * The mi_ API throughout: sanitizer builds do not redirect malloc.
 */
#include "mialloc.h"
#include "../tap.h"
#include "../rss.h"
#include "../json.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HUGE_BLOCK (3u << 20)   /* above the largest size class: freed blocks go back to the arena */
#define SUB_BLOCKS 16           /* 48 MiB: well over the 16 MiB that start the purge thread */
#define MAIN_BLOCKS 8           /* 24 MiB */
#define MiB (1u << 20)

/* Threads of this process, from /proc/self/status (0 if unreadable). */
static int thread_count(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  int n = 0;
  while (f != NULL && fgets(line, sizeof line, f) != NULL)
    if (sscanf(line, "Threads: %d", &n) == 1) break;
  if (f != NULL) fclose(f);
  return n;
}

/* The threads before any purge thread: the main thread, and the
 * sanitizer's own where it has one (ThreadSanitizer starts it with the
 * first thread the program starts, hence one started and joined first). */
static int base_threads;

static void *nothing(void *arg) { return arg; }

static int count_base_threads(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, nothing, NULL) == 0) pthread_join(t, NULL);
  return thread_count();
}

/* Waits up to 5 s for the process to be back to its base threads (the
 * purge thread exits a second after it last had work). */
static bool wait_purge_thread_gone(void) {
  for (int i = 0; i < 50; i++) {
    if (thread_count() == base_threads) return true;
    usleep(100000);
  }
  return false;
}

/* Allocates and touches n huge blocks, then frees them: false if one
 * could not be allocated. */
static bool churn_huge(int n) {
  void *b[SUB_BLOCKS];
  bool ok = true;
  for (int i = 0; i < n; i++) {
    b[i] = mi_malloc(HUGE_BLOCK);
    if (b[i] == NULL) ok = false;
    else memset(b[i], 0x5a, HUGE_BLOCK);
  }
  for (int i = 0; i < n; i++) mi_free(b[i]);
  return ok;
}

/* Allocates size bytes, writes and reads them back, frees them. */
static bool alloc_and_check(size_t size) {
  unsigned char *p = mi_malloc(size);
  if (p == NULL) return false;
  memset(p, 0xa5, size);
  bool ok = p[0] == 0xa5 && p[size / 2] == 0xa5 && p[size - 1] == 0xa5;
  mi_free(p);
  return ok;
}

/* A current figure of mialloc's statistics, -1 if it cannot be read. */
static double stat_now(const char *name) {
  char *j = mi_stats_get_json(0, NULL);
  char path[64];
  snprintf(path, sizeof path, "%s.current", name);
  double v = j == NULL ? -1 : json_number(j, path, -1);
  mi_free(j);
  return v;
}

/* ---- a sub-process destroyed under the purge thread ---- */

typedef struct {
  mi_subproc_id_t sp;
  bool ok;
  pthread_barrier_t *idle;   /* NULL: exit after the frees; else wait here twice */
} sub_arg_t;

static void *sub_thread(void *arg) {
  sub_arg_t *a = arg;
  mi_subproc_add_current_thread(a->sp);
  a->ok = churn_huge(SUB_BLOCKS);
  if (a->idle != NULL) {
    pthread_barrier_wait(a->idle);   /* freed */
    pthread_barrier_wait(a->idle);   /* may exit */
  }
  return NULL;
}

static void destroyed_under_purge_thread(void) {
  mi_free(mi_malloc(100));   /* the main sub-process's arena exists before the figures are read */
  double arenas = stat_now("arenas"), reserved = stat_now("reserved");
  double committed = stat_now("committed");
  sub_arg_t a = {.sp = mi_subproc_new(), .ok = false, .idle = NULL};
  pthread_t t;
  if (a.sp == NULL || pthread_create(&t, NULL, sub_thread, &a) != 0) {
    TAP_OK(0, "a sub-process and its thread");
    return;
  }
  pthread_join(t, NULL);
  int threads = thread_count();
  mi_subproc_destroy(a.sp);
  /* past the arenas' purge delay (250 ms by default) and the thread's
   * linger, allocating on the main sub-process meanwhile */
  int served = 0;
  for (int i = 0; i < 15; i++) {
    usleep(100000);
    served += alloc_and_check(100) && alloc_and_check(100000);
  }
  TAP_OK(a.ok && threads == base_threads + 1,
         "a sub-process's 48 MiB of frees started the purge thread (%d threads after its own exited, %d before)",
         threads, base_threads);
  TAP_OK(served == 15, "the process runs on 1.5 s after the sub-process was destroyed under the purge thread (%d of 15 rounds of allocations served)", served);
  TAP_OK(stat_now("arenas") == arenas && stat_now("reserved") == reserved,
         "the statistics no longer count the destroyed sub-process's arena (%.0f arenas, %.0f MiB reserved; before %.0f, %.0f)",
         stat_now("arenas"), stat_now("reserved") / MiB, arenas, reserved / MiB);
  double after = stat_now("committed");
  TAP_OK(after < committed + 4.0 * MiB,
         "nor the memory that went with it (%.1f MiB committed; %.1f MiB before the sub-process)", after / MiB,
         committed / MiB);
}

/* ---- the purge thread purges another sub-process's arenas ---- */

static void purges_every_subproc(void) {
  TAP_OK(wait_purge_thread_gone(), "the purge thread exits once nothing waits (%d threads)", thread_count());
  TAP_OK(churn_huge(MAIN_BLOCKS), "the main sub-process frees 24 MiB of huge blocks");
  size_t busy_main = rss_bytes(), after_main = rss_after_idling(busy_main, 16 * MiB);
  TAP_OK(after_main + 16 * MiB <= busy_main && thread_count() == base_threads + 1,
         "they start the purge thread (%d threads), which gives them back (%zu KiB, then %zu KiB)", thread_count(),
         busy_main >> 10, after_main >> 10);
  pthread_barrier_t idle;
  pthread_barrier_init(&idle, NULL, 2);
  sub_arg_t a = {.sp = mi_subproc_new(), .ok = false, .idle = &idle};
  pthread_t t;
  if (a.sp == NULL || pthread_create(&t, NULL, sub_thread, &a) != 0) {
    TAP_OK(0, "a sub-process and its thread");
    return;
  }
  pthread_barrier_wait(&idle);
  size_t busy = rss_bytes(), idle_rss = rss_after_idling(busy, 32 * MiB);
  TAP_OK(a.ok && idle_rss + 32 * MiB <= busy,
         "the 48 MiB an idle thread of another sub-process freed go back within 5 s (%zu KiB, then %zu KiB)",
         busy >> 10, idle_rss >> 10);
  pthread_barrier_wait(&idle);
  pthread_join(t, NULL);
  pthread_barrier_destroy(&idle);
  mi_subproc_destroy(a.sp);
}

int main(void) {
  base_threads = count_base_threads();
  destroyed_under_purge_thread();
  purges_every_subproc();
  return tap_done();
}

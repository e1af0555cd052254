/* test-callbacks.c -- mi_register_error gets the documented code for each
 * kind of error, mi_register_output receives messages and statistics (and
 * NULL restores stderr), mi_register_deferred_free is called, a function
 * registered while errors are reported gets its own argument, and
 * MIALLOC_ABORT_ON_ERROR aborts after a report.
 */
#define _GNU_SOURCE
#include "config.h"   /* which build: secure and debug report every foreign free */
#include <mialloc.h>
#include "../tap.h"
#include "../json.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* the compiler sees through these misuses; they are the point of the test */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="

static volatile int codes[64];   /* volatile: gcc may assume free() leaves globals alone */
static volatile int ncodes;
static void *volatile error_arg_seen;
static void on_error(int err, void *arg) {
  error_arg_seen = arg;
  if (ncodes < 64) codes[ncodes++] = err;
  errno = EBADF;   /* a callback that clobbers errno must not change what the caller sees */
}

static char messages[16384];
static void capture(const char *msg, void *arg) {
  (void)arg;
  strncat(messages, msg, sizeof messages - strlen(messages) - 1);
}

static int count_of(const char *hay, const char *needle) {
  int n = 0;
  for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
  return n;
}

static double errors_stat(void) {
  char *j = mi_stats_get_json(0, NULL);
  double v = json_number(j, "errors", -1);
  mi_free(j);
  return v;
}

static volatile int deferred_calls, deferred_forced;
static volatile unsigned long long last_beat;
static void *volatile deferred_arg_seen;
static void on_deferred(bool force, unsigned long long heartbeat, void *arg) {
  deferred_calls++;
  if (force) deferred_forced++;
  last_beat = heartbeat;
  deferred_arg_seen = arg;
}

/* Two error functions, each registered with its own tag, swapped by a
 * thread while another reports errors: a call with the other's tag is a
 * torn read of the registered pair. */
static int tag_a, tag_b;
static _Atomic long calls_a, calls_b, torn_calls;
static _Atomic int swapping, swapper_started;
static void on_error_a(int err, void *arg) {
  (void)err;
  calls_a++;
  if (arg != &tag_a) torn_calls++;
}
static void on_error_b(int err, void *arg) {
  (void)err;
  calls_b++;
  if (arg != &tag_b) torn_calls++;
}
static void *swap_error_functions(void *arg) {
  (void)arg;
  swapper_started = 1;
  while (swapping) {
    mi_register_error(on_error_a, &tag_a);
    mi_register_error(on_error_b, &tag_b);
  }
  return NULL;
}

/* volatile: keeps gcc from folding impossible sizes */
static volatile size_t size_max = SIZE_MAX;
static volatile size_t bad_align = 3;

int main(void) {
  int token;
  mi_register_output(capture, NULL);
  mi_register_error(on_error, &token);
  double errors0 = errors_stat();

  /* EFAULT: a pointer mialloc does not own, reported to the callback every
   * time, printed once */
  char stack_buf[64];
  ncodes = 0;
  messages[0] = 0;
  free(stack_buf + 8);
  free(stack_buf + 16);
  TAP_OK(ncodes == 2 && codes[0] == EFAULT && codes[1] == EFAULT,
         "free of a foreign pointer: EFAULT, each time (%d calls)", ncodes);
  TAP_OK(error_arg_seen == &token, "the callback gets its registered argument");
#if MIALLOC_SECURE || MIALLOC_DEBUG
  TAP_OK(count_of(messages, "not allocated by mialloc") == 2,
         "secure/debug build: each one is printed as an error, to the registered output");
#else
  TAP_OK(count_of(messages, "not allocated by mialloc") == 1,
         "the warning is printed once, to the registered output");
#endif

  int huge_reports = 0;
#if !MIALLOC_VALGRIND && !MIALLOC_ASAN   /* the tools own double frees there */
  /* a second free of a huge block: its span went back with the first, so
   * the pointer is in mialloc's arena but no block -- an error, printed
   * each time in every build, not the once-only foreign-pointer warning */
  ncodes = 0;
  messages[0] = 0;
  void *huge = mi_malloc(8 << 20);
  mi_free(huge);
  mi_free(huge);
  mi_free(huge);
  TAP_OK(ncodes == 2 && codes[0] == EFAULT && count_of(messages, "is not an allocated block") == 2 &&
             count_of(messages, "not allocated by mialloc") == 0,
         "a double free of a huge block: reported as such each time (%d calls)", ncodes);
  huge_reports = 2;

  /* realloc of the same pointers: NULL and EINVAL, and reports that name
   * realloc (in release builds the foreign pointer's was printed above) */
  ncodes = 0;
  messages[0] = 0;
  errno = 0;
  void *r1 = realloc(huge, 100);
  int e1 = errno;
  errno = 0;
  void *r2 = realloc(stack_buf + 8, 100);
  int e2 = errno;
  TAP_OK(r1 == NULL && e1 == EINVAL && r2 == NULL && e2 == EINVAL && ncodes == 2 && codes[0] == EFAULT &&
             codes[1] == EFAULT,
         "realloc of a freed huge block and of a stack address: NULL, EINVAL, EFAULT reported (%d calls)", ncodes);
  TAP_OK(count_of(messages, "realloc: pointer") == 1 && count_of(messages, "free:") == 0,
         "the freed huge block's report names realloc, not free");
#if MIALLOC_SECURE || MIALLOC_DEBUG
  TAP_OK(count_of(messages, "realloc: ignoring pointer") == 1, "and so does the stack address's (secure/debug)");
#endif
  huge_reports += 2;
#endif

  /* EOVERFLOW: sizes that cannot be satisfied; errno is ENOMEM as C says */
  ncodes = 0;
  messages[0] = 0;
  errno = 0;
  void *p = mi_malloc(size_max);
  TAP_OK(p == NULL && errno == ENOMEM, "mi_malloc(SIZE_MAX): NULL, errno ENOMEM");
  TAP_OK(ncodes == 1 && codes[0] == EOVERFLOW, "and the callback got EOVERFLOW");
  errno = 0;
  p = calloc(size_max / 2, 4);
  TAP_OK(p == NULL && errno == ENOMEM && ncodes == 2 && codes[1] == EOVERFLOW,
         "calloc with an overflowing product: NULL, ENOMEM, EOVERFLOW");
  errno = 0;
  p = mi_reallocarray(NULL, size_max / 2, 4);
  TAP_OK(p == NULL && errno == ENOMEM && ncodes == 3 && codes[2] == EOVERFLOW,
         "mi_reallocarray overflowing: NULL, ENOMEM, EOVERFLOW");
  TAP_OK(messages[0] == 0, "failed allocations print nothing without MIALLOC_VERBOSE");

  /* ENOMEM: the OS cannot give it (more than the 47-bit address space) */
  ncodes = 0;
  errno = 0;
  p = mi_malloc((size_t)1 << 47);
  TAP_OK(p == NULL && errno == ENOMEM, "mi_malloc(128 TiB): NULL, errno ENOMEM");
  TAP_OK(ncodes == 1 && codes[0] == ENOMEM, "and the callback got ENOMEM");

  /* EINVAL: alignments that are not a power of two */
  ncodes = 0;
  errno = 0;
  p = mi_malloc_aligned(100, bad_align);
  TAP_OK(p == NULL && errno == EINVAL && ncodes == 1 && codes[0] == EINVAL,
         "mi_malloc_aligned(100, 3): NULL, errno EINVAL, callback EINVAL");
  errno = 0;
  p = aligned_alloc(bad_align, 100);
  TAP_OK(p == NULL && errno == EINVAL && ncodes == 2 && codes[1] == EINVAL,
         "aligned_alloc(3, 100): NULL, EINVAL, callback EINVAL");
  errno = 0;
  void *q = NULL;
  int rc = posix_memalign(&q, bad_align, 100);
  TAP_OK(rc == EINVAL && q == NULL && errno == 0 && ncodes == 3 && codes[2] == EINVAL,
         "posix_memalign(3): returns EINVAL, errno untouched, callback EINVAL");

  TAP_OK(errors_stat() - errors0 == 2 + huge_reports + 3 + 1 + 3,
         "the statistics count every report (%.0f)", errors_stat() - errors0);

  /* with MIALLOC_VERBOSE the failures are explained */
  messages[0] = 0;
  mi_option_enable(mi_option_verbose);
  p = mi_malloc(size_max);
  mi_option_disable(mi_option_verbose);
  TAP_OK(strstr(messages, "error: allocation of") != NULL && strstr(messages, "too large") != NULL,
         "with verbose on, a failed allocation is explained");

  /* a pair registered while another thread reports errors */
  swapping = 1;
  pthread_t swapper;
  pthread_create(&swapper, NULL, swap_error_functions, NULL);
  while (!swapper_started) sched_yield();
  /* until each function was called often (the threads may share a CPU),
   * or 20 million reports */
  long reports = 0;
  while ((calls_a < 20000 || calls_b < 20000) && reports < 20000000) {
    p = mi_malloc(size_max);
    if (p != NULL) break;
    reports++;
  }
  swapping = 0;
  pthread_join(swapper, NULL);
  TAP_OK(torn_calls == 0 && calls_a >= 20000 && calls_b >= 20000,
         "error functions swapped during %ld reports: each got its own argument "
         "(%ld and %ld calls, %ld with the other's)", reports, (long)calls_a, (long)calls_b, (long)torn_calls);
  mi_register_error(on_error, &token);

  /* unregistering: no more calls */
  mi_register_error(NULL, NULL);
  ncodes = 0;
  p = mi_malloc(size_max);
  TAP_OK(ncodes == 0, "after mi_register_error(NULL) the callback is not called");

  /* the output function receives the statistics */
  messages[0] = 0;
  mi_stats_print(NULL);
  TAP_OK(strstr(messages, "mialloc") != NULL && strstr(messages, "statistics") != NULL,
         "the registered output function receives mi_stats_print");
  messages[0] = 0;
  mi_options_print();
  TAP_OK(strstr(messages, "MIALLOC_PURGE_DELAY") != NULL, "and mi_options_print");

  /* NULL restores stderr */
  mi_register_output(NULL, NULL);
  fflush(stderr);
  char path[] = "/tmp/test-callbacks-XXXXXX";
  int fd = mkstemp(path);
  int saved = dup(2);
  dup2(fd, 2);
  mi_stats_print(NULL);
  dup2(saved, 2);
  close(saved);
  char buf[8192];
  ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
  buf[n > 0 ? n : 0] = 0;
  close(fd);
  unlink(path);
  TAP_OK(strstr(buf, "statistics") != NULL, "after mi_register_output(NULL) the report goes to stderr");

  /* deferred free: called when mialloc is about to take more memory, and
   * by mi_collect with force */
  int dtoken;
  mi_register_deferred_free(on_deferred, &dtoken);
  void *blocks[2000];
  for (int i = 0; i < 2000; i++) blocks[i] = malloc(4000);
  TAP_OK(deferred_calls > 0 && deferred_arg_seen == &dtoken,
         "deferred free called while the heap grew (%d calls) with its argument", deferred_calls);
  unsigned long long beat = last_beat;
  for (int i = 0; i < 2000; i++) free(blocks[i]);
  mi_collect(true);
  TAP_OK(deferred_forced > 0 && last_beat > beat, "mi_collect(true) calls it with force, heartbeat grows");
  mi_register_deferred_free(NULL, NULL);
  int calls = deferred_calls;
  for (int i = 0; i < 2000; i++) blocks[i] = malloc(4000);
  for (int i = 0; i < 2000; i++) free(blocks[i]);
  mi_collect(true);
  TAP_OK(deferred_calls == calls, "not called once unregistered");

  /* MIALLOC_ABORT_ON_ERROR (set through the API in a child) */
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 2);
    mi_option_enable(mi_option_abort_on_error);
    free(stack_buf);
    _exit(0);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  TAP_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
         "with abort_on_error a foreign free aborts the process");
  pid = fork();
  if (pid == 0) {
    mi_option_enable(mi_option_abort_on_error);
    mi_option_disable(mi_option_show_errors);
    void *r = mi_malloc(size_max);
    _exit(r == NULL ? 3 : 4);
  }
  waitpid(pid, &status, 0);
  TAP_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT,
         "and so does a failed allocation, silently reported");
  /* with messages on, the failed allocation's line (otherwise only shown
   * with MIALLOC_VERBOSE) comes before the abort */
  int fds[2];
  if (pipe(fds) != 0) return 1;
  pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    mi_option_enable(mi_option_abort_on_error);
    mi_option_enable(mi_option_show_errors);
    mi_option_disable(mi_option_verbose);
    void *r = mi_malloc(size_max);
    _exit(r == NULL ? 3 : 4);
  }
  close(fds[1]);
  char text[512] = {0};
  size_t got = 0;
  for (ssize_t n; got < sizeof text - 1 && (n = read(fds[0], text + got, sizeof text - 1 - got)) > 0;) got += (size_t)n;
  close(fds[0]);
  text[strcspn(text, "\n")] = '\0';
  waitpid(pid, &status, 0);
  TAP_OK(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT && strstr(text, "mialloc: error: allocation of") != NULL &&
             strstr(text, "is too large") != NULL,
         "a failed allocation that aborts says why first: \"%.80s\"", text);
  return tap_done();
}

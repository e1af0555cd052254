/* test-assert.c -- internal assertions (mia_assert): debug builds check
 * them, report the expression and its place, and abort; other builds
 * compile them out without evaluating the expression. */
#include "internal.h"
#include "../tap.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int evaluations;

/* unused where mia_assert compiles out (clang says so) */
static mia_unused bool counted(bool value) {
  evaluations++;
  return value;
}

/* Run fun in a child with stderr on a pipe; returns the wait status and
 * the child's stderr in out. */
static int run_child(void (*fun)(void), char *out, size_t cap) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    close(fds[0]);
    fun();
    _exit(0);
  }
  close(fds[1]);
  size_t n = 0;
  ssize_t r;
  while (n + 1 < cap && (r = read(fds[0], out + n, cap - 1 - n)) > 0) n += (size_t)r;
  out[n] = 0;
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

static void failing_assertion(void) { mia_assert(counted(false)); }

/* Metadata a stray write destroyed: the page claims no room for blocks
 * while its free list still has some.  The next pop breaks an invariant. */
__attribute__((unused)) static void corrupted_page(void) {
  void *p = mi_malloc(100);
  void *q = mi_malloc(100);
  mia_page_t *page = mia_page_of(q);
  page->capacity = page->used;
  void *r = mi_malloc(100);
  mi_free(r);
  mi_free(q);
  mi_free(p);
}

int main(void) {
  mi_thread_init();
  char out[4096];
  mia_assert(counted(true));
#if MIALLOC_DEBUG
  {
    TAP_OK(evaluations == 1, "debug build: a passing assertion is evaluated once (%d)", evaluations);
    int st = run_child(failing_assertion, out, sizeof out);
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "debug build: a failing assertion aborts (status %#x)", st);
    TAP_OK(strstr(out, "assertion failed: counted(false)") != NULL && strstr(out, "test-assert.c") != NULL &&
               strstr(out, "failing_assertion") != NULL,
           "the report names the expression, the file and the function: %s", out);
    st = run_child(corrupted_page, out, sizeof out);
    TAP_OK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "debug build: corrupted page metadata trips an assertion (status %#x)", st);
    TAP_OK(strstr(out, "assertion failed: ") != NULL && strstr(out, "capacity") != NULL,
           "and the report says which invariant broke: %s", out);
  }
#else
  {
    TAP_OK(evaluations == 0, "release build: assertions are compiled out, not evaluated (%d)", evaluations);
    int st = run_child(failing_assertion, out, sizeof out);
    TAP_OK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && out[0] == 0,
           "release build: a false assertion does nothing (status %#x, stderr '%s')", st, out);
  }
#endif
  return tap_done();
}

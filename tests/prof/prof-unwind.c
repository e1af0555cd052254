/* prof-unwind.c -- the profiler's own CFI walk (prof/unwind.c) against
 * glibc's backtrace, on stacks of several shapes.  TAP.
 *
 * Both must return the same return addresses, frame for frame, or the walk
 * must decline (-1) so that the libraries' unwinders take over; a walk that
 * returns a different stack would split or merge the profile's sites.
 * Shapes: frames of many sizes with and without a frame pointer, frames
 * whose CFA is on %rbp (alloca), a detour through libc (qsort's callback),
 * another thread, a signal handler, and the same stacks again from a warm
 * cache in a new thread.
 */
#include "../../prof/internal.h"
#include "../tap.h"

#include <alloca.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#if MIALLOC_PROF_CFI_UNWIND

static _Atomic unsigned walks, same, declined;

__attribute__((noinline)) static void compare_here(bool may_decline) {
  void *ours[PROF_RAW_FRAMES], *theirs[PROF_RAW_FRAMES];
  uintptr_t pc, sp, bp;
  PROF_HERE(pc, sp, bp);
  int n = prof_unwind_cfi(ours, PROF_RAW_FRAMES, pc, sp, bp);
  int m = backtrace(theirs, PROF_RAW_FRAMES);
  walks++;
  if (n < 0) {
    if (may_decline) declined++;
    else tap_diag("walk %u declined", walks);
    return;
  }
  /* [0] are two places in this function; the callers must agree */
  if (n == m && memcmp(ours + 1, theirs + 1, (size_t)(n - 1) * sizeof ours[0]) == 0) {
    same++;
    return;
  }
  tap_diag("walk %u: %d frames, backtrace %d", walks, n, m);
  for (int i = 1; i < (n > m ? n : m); i++)
    tap_diag("  %2d %p %p", i, i < n ? ours[i] : NULL, i < m ? theirs[i] : NULL);
}

/* Frames without a frame pointer (CFA on %rsp), of sizes that grow with
 * depth.  (clang has no per-function optimize: its -O2 omits them too.) */
#if defined(__GNUC__) && !defined(__clang__)
#define NO_FRAME_POINTER __attribute__((optimize("O2", "omit-frame-pointer")))
#else
#define NO_FRAME_POINTER
#endif
__attribute__((noinline)) NO_FRAME_POINTER static int rsp_frames(int depth) {
  volatile char buf[16 + 24 * (8 - depth % 8)];
  buf[0] = (char)depth;
  if (depth == 0) compare_here(false);
  else buf[1] = (char)rsp_frames(depth - 1);
  return buf[0] + buf[1];
}

/* Frames whose size is only known at run time: the CFA is on %rbp. */
__attribute__((noinline)) static int rbp_frames(int depth) {
  volatile char *buf = alloca(32 + 40 * (size_t)depth);
  buf[0] = (char)depth;
  if (depth == 0) compare_here(false);
  else if (depth % 3 == 0) buf[1] = (char)rsp_frames(depth % 5);
  else buf[1] = (char)rbp_frames(depth - 1);
  return buf[0] + buf[1];
}

static __thread bool compared;

static int by_value(const void *a, const void *b) {
  if (!compared) compare_here(false);
  compared = true;
  return *(const int *)a - *(const int *)b;
}

__attribute__((noinline)) static void through_libc(void) {
  int v[16];
  compared = false;
  for (int i = 0; i < 16; i++) v[i] = (i * 7) % 16;
  qsort(v, 16, sizeof v[0], by_value);
}

static void all_shapes(void) {
  for (int d = 0; d < 12; d++) rsp_frames(d);
  for (int d = 0; d < 12; d++) rbp_frames(d);
  through_libc();
}

static void *in_thread(void *arg) {
  (void)arg;
  all_shapes();
  return NULL;
}

static void on_signal(int sig) {
  (void)sig;
  compare_here(true); /* through the signal frame: the walk may decline */
}

int main(void) {
  prof_stack_init();
  all_shapes();
  unsigned n1 = walks;
  TAP_OK(same == n1, "the walk returns backtrace's stack in the main thread (%u of %u)", same, n1);

  pthread_t t;
  pthread_create(&t, NULL, in_thread, NULL);
  pthread_join(t, NULL);
  TAP_OK(same == walks, "and in another thread, from a warm cache (%u of %u)", same - n1, walks - n1);

  unsigned before = walks, same_before = same;
  signal(SIGUSR1, on_signal);
  raise(SIGUSR1);
  TAP_OK(walks == before + 1 && same + declined == same_before + 1,
         "through a signal frame the walk returns backtrace's stack or declines (%s)",
         declined ? "declined" : "same");
  return tap_done();
}

#else

int main(void) {
  /* the walk is built for x86-64 Linux only; elsewhere the profiler uses the
   * libraries' unwinders, which prof-unit tests */
  printf("1..0 # SKIP the profiler's own CFI walk is not built here\n");
  return 0;
}

#endif

/* test-foreign.c -- free of pointers mialloc does not own is reported and
 * ignored: the memory behind them is never written. */
#include "mialloc.h"
#include "../tap.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

/* the compiler sees through these misuses; they are the point of the test */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"

static char messages[8192];
static void capture(const char *msg, void *arg) {
  (void)arg;
  strncat(messages, msg, sizeof messages - strlen(messages) - 1);
}

int main(void) {
  mi_register_output(capture, NULL);
  char stack_buf[64];
  memset(stack_buf, 0x3c, sizeof stack_buf);
  free(stack_buf + 16);
  bool intact = true;
  const volatile char *vs = stack_buf;
  for (size_t i = 0; i < sizeof stack_buf; i++) intact = intact && vs[i] == 0x3c;
  TAP_OK(intact, "free of a stack address leaves the stack untouched");
  TAP_OK(strstr(messages, "not allocated by mialloc") != NULL, "and it is reported");

  static char static_buf[64];
  memset(static_buf, 0x5d, sizeof static_buf);
  free(static_buf);
  intact = true;
  const volatile char *vt = static_buf;
  for (size_t i = 0; i < sizeof static_buf; i++) intact = intact && vt[i] == 0x5d;
  TAP_OK(intact, "free of a static address leaves it untouched");

  /* a block from another allocator: glibc's own malloc, looked up in libc */
  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *(*glibc_malloc)(size_t) = (void *(*)(size_t))dlsym(libc, "malloc");
  void (*glibc_free)(void *) = (void (*)(void *))dlsym(libc, "free");
  char *g = glibc_malloc(100);
  volatile char *wg = g; /* plain stores before free() may be dropped */
  for (int i = 0; i < 100; i++) wg[i] = 0x6e;
  free(g);
  intact = true;
  const volatile char *vg = g; /* the compiler may assume freed memory is dead */
  for (int i = 0; i < 100; i++) intact = intact && vg[i] == 0x6e;
  TAP_OK(intact, "free of another allocator's block leaves it untouched");
  glibc_free(g);

  /* realloc of a foreign pointer fails cleanly */
  char other[32];
  errno = 0;
  void *r = realloc(other, 100);
  TAP_OK(r == NULL && errno == EINVAL, "realloc of a foreign pointer returns NULL with EINVAL");
  TAP_OK(malloc_usable_size(other) == 0, "malloc_usable_size of a foreign pointer is 0");

  /* and our own allocations still work afterwards */
  void *p = malloc(1000);
  TAP_OK(p != NULL && mi_is_in_heap_region(p), "allocation still works");
  free(p);
  mi_register_output(NULL, NULL);
  return tap_done();
}

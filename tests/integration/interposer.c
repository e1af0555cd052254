/* interposer.c -- a stand-in for fakechroot or an I/O interposer: it wraps
 * open/openat/fopen, resolves the real functions with dlsym(RTLD_NEXT) on
 * first use, and calls malloc and free inside.  Preloaded together with
 * mialloc (in either order) it must not deadlock or recurse forever. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXPORT __attribute__((visibility("default")))

static int (*real_open)(const char *, int, ...);
static int (*real_openat)(int, const char *, int, ...);
static FILE *(*real_fopen)(const char *, const char *);

/* what an interposer typically does: copy the path (malloc), look at it */
static void touch_path(const char *path) {
  static int marked;
  if (!marked) {   /* proof for the test that the wrapper really runs */
    marked = 1;
    fputs("[interposed]\n", stderr);
  }
  char *copy = malloc(strlen(path) + 16);
  if (copy != NULL) {
    strcpy(copy, path);
    free(copy);
  }
}

EXPORT int open(const char *path, int flags, ...) {
  if (real_open == NULL) real_open = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open");
  touch_path(path);
  va_list ap;
  va_start(ap, flags);
  int mode = (flags & O_CREAT) ? va_arg(ap, int) : 0;
  va_end(ap);
  return real_open(path, flags, mode);
}

EXPORT int open64(const char *path, int flags, ...) {
  va_list ap;
  va_start(ap, flags);
  int mode = (flags & O_CREAT) ? va_arg(ap, int) : 0;
  va_end(ap);
  return open(path, flags, mode);
}

EXPORT int openat(int dir, const char *path, int flags, ...) {
  if (real_openat == NULL)
    real_openat = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat");
  touch_path(path);
  va_list ap;
  va_start(ap, flags);
  int mode = (flags & O_CREAT) ? va_arg(ap, int) : 0;
  va_end(ap);
  return real_openat(dir, path, flags, mode);
}

EXPORT FILE *fopen(const char *path, const char *mode) {
  if (real_fopen == NULL) real_fopen = (FILE * (*)(const char *, const char *)) dlsym(RTLD_NEXT, "fopen");
  touch_path(path);
  return real_fopen(path, mode);
}

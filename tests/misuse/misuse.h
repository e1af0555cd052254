/* misuse.h -- shared harness of the misuse battery (tests/misuse/run.sh).
 *
 * Each case program commits one kind of misuse against a block that sits
 * among live "neighbour" blocks of the same size, and then checks that the
 * allocator did not silently corrupt anything:
 *   - every neighbour still holds the bytes written into it before;
 *   - many fresh blocks of the same size are distinct, do not overlap each
 *     other or a live block, and writing them leaves the neighbours intact.
 * It prints what it saw on stdout, one "misuse: ..." line each (stdout is
 * unbuffered so the lines survive an abort), and exits 0 when nothing was
 * corrupted, 3 when something was.  run.sh compares that, the messages on
 * stderr and the exit status or signal with the documented outcome.
 *
 * With --callback the program registers an error callback (mi_register_error)
 * that prints the errno-style code it receives: "misuse: error-callback EAGAIN".
 */
#ifndef MIALLOC_MISUSE_H
#define MIALLOC_MISUSE_H

#include "mialloc.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* the misuse is the point of these programs */
#pragma GCC diagnostic ignored "-Wpragmas"
#pragma GCC diagnostic ignored "-Wunknown-warning-option"
#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Warray-bounds"
#pragma GCC diagnostic ignored "-Wstringop-overflow"

/* mi_debug_check() is only in builds that have it: a weak reference lets the
 * battery compile against any version of the library. */
extern bool mi_debug_check(void) __attribute__((weak));

#define MISUSE_NEIGHBOURS 64
#define MISUSE_FRESH 3000

typedef struct {
  unsigned char *p;
  size_t size;
  unsigned char fill;
} misuse_block_t;

static misuse_block_t misuse_nb[MISUSE_NEIGHBOURS];
static int misuse_nb_count;
static int misuse_corrupt;   /* corruption seen so far */

static inline void misuse_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void misuse_say(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n > sizeof buf - 2) n = (int)sizeof buf - 2;
  buf[n++] = '\n';
  /* write(2) directly: no stdio buffer to lose in an abort, no allocation */
  ssize_t w = write(1, "misuse: ", 8);
  w = write(1, buf, (size_t)n);
  (void)w;
}

static inline const char *misuse_errname(int err) {
  switch (err) {
  case EAGAIN: return "EAGAIN";
  case EINVAL: return "EINVAL";
  case EFAULT: return "EFAULT";
  case EOVERFLOW: return "EOVERFLOW";
  case ENOMEM: return "ENOMEM";
  default: return "other";
  }
}

static inline void misuse_on_error(int err, void *arg) {
  (void)arg;
  misuse_say("error-callback %s (%d)", misuse_errname(err), err);
}

/* Call first: parses --callback. */
static inline void misuse_init(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (strcmp(argv[i], "--callback") == 0) mi_register_error(misuse_on_error, NULL);
}

/* Allocate the neighbours: count blocks of size bytes, each filled with its
 * own byte value. */
static inline void misuse_neighbours(size_t size, int count) {
  if (count > MISUSE_NEIGHBOURS) count = MISUSE_NEIGHBOURS;
  for (int i = 0; i < count; i++) {
    misuse_block_t *b = &misuse_nb[i];
    b->p = mi_malloc(size);
    b->size = size;
    b->fill = (unsigned char)(0x21 + i);
    if (b->p == NULL) {
      misuse_say("CORRUPTION: mi_malloc(%zu) returned NULL", size);
      misuse_corrupt++;
      count = i;
      break;
    }
    memset(b->p, b->fill, size);
  }
  misuse_nb_count = count;
}

static inline int misuse_by_address(const void *a, const void *b) {
  uintptr_t x = (uintptr_t)((const misuse_block_t *)a)->p;
  uintptr_t y = (uintptr_t)((const misuse_block_t *)b)->p;
  return x < y ? -1 : x > y;
}

/* Sort the neighbours by address (the victim is then picked among them). */
static inline void misuse_sort_neighbours(void) {
  qsort(misuse_nb, (size_t)misuse_nb_count, sizeof misuse_nb[0], misuse_by_address);
}

/* Take neighbour i out of the set and return its pointer: it becomes the
 * victim of the misuse. */
static inline unsigned char *misuse_take(int i) {
  unsigned char *p = misuse_nb[i].p;
  memmove(&misuse_nb[i], &misuse_nb[i + 1], (size_t)(misuse_nb_count - i - 1) * sizeof misuse_nb[0]);
  misuse_nb_count--;
  return p;
}

/* Check that every neighbour still holds its fill, except bytes in
 * [skip_lo, skip_hi) (bytes the test itself overwrote).  Returns the number
 * of bad bytes and prints what it found. */
static inline size_t misuse_verify_neighbours(const char *when, const unsigned char *skip_lo,
                                       const unsigned char *skip_hi) {
  size_t bad = 0, skipped = 0;
  for (int i = 0; i < misuse_nb_count; i++) {
    const volatile unsigned char *q = misuse_nb[i].p;
    size_t bad_here = 0;
    for (size_t k = 0; k < misuse_nb[i].size; k++) {
      if (misuse_nb[i].p + k >= skip_lo && misuse_nb[i].p + k < skip_hi) { skipped++; continue; }
      if (q[k] != misuse_nb[i].fill) bad_here++;
    }
    if (bad_here != 0)
      misuse_say("CORRUPTION: %s: neighbour %p (%zu bytes) has %zu changed bytes",
                 when, (void *)misuse_nb[i].p, misuse_nb[i].size, bad_here);
    bad += bad_here;
  }
  if (bad == 0)
    misuse_say("neighbours intact %s (%d blocks%s)", when, misuse_nb_count,
               skipped ? ", skipping the bytes the test overwrote" : "");
  misuse_corrupt += bad != 0;
  return bad;
}

static inline int misuse_by_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (unsigned char *const *)a;
  uintptr_t y = (uintptr_t) * (unsigned char *const *)b;
  return x < y ? -1 : x > y;
}

/* Whether [p, p+n) overlaps a live neighbour or [extra, extra+extra_n). */
static inline bool misuse_overlaps_live(const unsigned char *p, size_t n, const unsigned char *extra,
                                 size_t extra_n) {
  for (int i = 0; i < misuse_nb_count; i++)
    if (p < misuse_nb[i].p + misuse_nb[i].size && misuse_nb[i].p < p + n) return true;
  return extra != NULL && p < extra + extra_n && extra < p + n;
}

/* Allocate count fresh blocks of size bytes: each must be non-NULL, not
 * overlap another fresh block or a live block (the neighbours and
 * [live, live+live_n) when live is not NULL), and writing them all must
 * leave the neighbours intact.  Frees them afterwards. */
static inline void misuse_fresh_blocks(size_t size, int count, const unsigned char *live, size_t live_n) {
  unsigned char **f = calloc((size_t)count, sizeof *f);
  if (f == NULL) { misuse_say("cannot allocate the bookkeeping array"); misuse_corrupt++; return; }
  int bad = 0;
  for (int i = 0; i < count; i++) {
    f[i] = mi_malloc(size);
    if (f[i] == NULL) { misuse_say("CORRUPTION: fresh mi_malloc(%zu) returned NULL", size); bad++; count = i; break; }
    if (misuse_overlaps_live(f[i], size, live, live_n)) {
      misuse_say("CORRUPTION: fresh block %p overlaps a live block", (void *)f[i]);
      bad++;
    }
  }
  unsigned char **s = malloc((size_t)count * sizeof *s);
  if (s != NULL && count > 0) {
    memcpy(s, f, (size_t)count * sizeof *s);
    qsort(s, (size_t)count, sizeof *s, misuse_by_ptr);
    for (int i = 1; i < count; i++)
      if (s[i - 1] + size > s[i]) {
        misuse_say("CORRUPTION: fresh blocks %p and %p overlap (%s)", (void *)s[i - 1], (void *)s[i],
                   s[i - 1] == s[i] ? "the same block handed out twice" : "partly");
        bad++;
      }
  }
  free(s);
  for (int i = 0; i < count; i++) memset(f[i], 0xe5, size);
  misuse_verify_neighbours("after writing fresh blocks", NULL, NULL);
  for (int i = 0; i < count; i++) mi_free(f[i]);
  free(f);
  if (bad == 0) misuse_say("%d fresh blocks of %zu bytes are distinct and do not overlap live ones", count, size);
  misuse_corrupt += bad != 0;
}

static inline void misuse_free_neighbours(void) {
  for (int i = 0; i < misuse_nb_count; i++) mi_free(misuse_nb[i].p);
  misuse_nb_count = 0;
}

/* Last line: "done" and the exit status (3: corruption seen). */
static inline int misuse_done(void) {
  misuse_say("done, %s", misuse_corrupt ? "CORRUPTION seen" : "no corruption seen");
  return misuse_corrupt ? 3 : 0;
}

#endif

/* test-debug-fill.c -- a debug build fills every block it hands out that
 * was not asked to be zero with the fresh pattern, and checks a freed
 * block's freed pattern when the block is handed out again, whichever call
 * allocates it: malloc, the aligned family, aligned realloc.  (The aligned
 * family once skipped both: its blocks came back holding stale links and
 * freed fill, and a write after free went unreported.)
 */
#define _GNU_SOURCE
#include "config.h"   /* which build: only debug builds fill */
#include <mialloc.h>
#include "../tap.h"

#include <errno.h>
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if !MIALLOC_DEBUG
int main(void) {
  printf("1..0 # SKIP fill patterns belong to debug builds\n");
  return 0;
}
#else
#define FRESH 0xd0   /* src/check.c: handed-out memory not asked to be zero */

static volatile int codes[16];
static volatile int ncodes;
static void on_error(int err, void *arg) {
  (void)arg;
  if (ncodes < 16) codes[ncodes++] = err;
}

static bool all_bytes(const void *p, size_t n, unsigned char v) {
  const unsigned char *b = p;
  for (size_t i = 0; i < n; i++)
    if (b[i] != v) return false;
  return true;
}

static bool aligned_to(const void *p, size_t align) { return ((uintptr_t)p & (align - 1)) == 0; }

static const size_t sizes[] = {24, 512, 3000, 40000};
#define NSIZES (sizeof sizes / sizeof sizes[0])
static const size_t aligns[] = {16, 32, 64, 4096};
#define NALIGNS (sizeof aligns / sizeof aligns[0])

/* Each kind of call, for every size: a dirty heap first, so a block that
 * is not filled shows its old contents. */
static void check_fresh(void) {
  void *dirt[64];
  for (size_t i = 0; i < 64; i++) {
    dirt[i] = mi_malloc(sizes[i % NSIZES]);
    memset(dirt[i], 0x5a, sizes[i % NSIZES]);
  }
  for (size_t i = 0; i < 64; i++) mi_free(dirt[i]);

  for (size_t s = 0; s < NSIZES; s++) {
    size_t n = sizes[s];
    void *p = mi_malloc(n);
    TAP_OK(p != NULL && all_bytes(p, n, FRESH), "mi_malloc(%zu): every byte has the fresh pattern", n);
    mi_free(p);
    bool ok = true;
    for (size_t a = 0; a < NALIGNS; a++) {
      p = mi_malloc_aligned(n, aligns[a]);
      ok = ok && p != NULL && aligned_to(p, aligns[a]) && all_bytes(p, n, FRESH);
      mi_free(p);
    }
    TAP_OK(ok, "mi_malloc_aligned(%zu, 16..4096): aligned, every byte fresh", n);
    p = mi_malloc_aligned_at(n, 32, 8);
    TAP_OK(p != NULL && aligned_to((char *)p + 8, 32) && all_bytes(p, n, FRESH),
           "mi_malloc_aligned_at(%zu, 32, 8): every byte fresh", n);
    mi_free(p);
    void *q = memalign(64, n);
    void *r = NULL;
    int e = posix_memalign(&r, 128, n);
    void *t = aligned_alloc(256, (n + 255) & ~(size_t)255);
    TAP_OK(q != NULL && e == 0 && t != NULL && all_bytes(q, n, FRESH) && all_bytes(r, n, FRESH) &&
               all_bytes(t, n, FRESH),
           "memalign, posix_memalign, aligned_alloc (%zu): every byte fresh", n);
    free(q);
    free(r);
    free(t);
    p = mi_zalloc_aligned(n, 64);
    TAP_OK(p != NULL && all_bytes(p, n, 0), "mi_zalloc_aligned(%zu, 64): zero, not the pattern", n);
    mi_free(p);
    p = mi_malloc_aligned(n / 2, 32);
    memset(p, 'x', n / 2);
    p = mi_realloc_aligned(p, n, 32);
    TAP_OK(p != NULL && all_bytes(p, n / 2, 'x') && all_bytes((char *)p + n / 2, n - n / 2, FRESH),
           "mi_realloc_aligned(%zu -> %zu, 32): contents kept, the new bytes fresh", n / 2, n);
    mi_free(p);
  }
}

/* Free a block, write into it, then allocate with the same call until the
 * block comes back: the hand-out reports the write. */
typedef void *(*alloc_fn)(size_t);
static void *aligned16(size_t n) { return mi_malloc_aligned(n, 16); }
static void *aligned64(size_t n) { return mi_malloc_aligned(n, 64); }
static void *aligned_at(size_t n) { return mi_malloc_aligned_at(n, 64, 8); }

static void check_write_after_free(alloc_fn fn, const char *name) {
  enum { TRIES = 20000 };
  static void *kept[TRIES];
  unsigned char *p = fn(512);
  mi_free(p);
  p[100] = 0x41;
  ncodes = 0;
  size_t n = 0;
  void *q = NULL;
  while (n < TRIES && (q = fn(512)) != p) kept[n++] = q;
  TAP_OK(q == p && ncodes >= 1 && codes[0] == EFAULT,
         "%s: the freed block written to is reported (EFAULT) when handed out again (%d reports, %zu blocks before)",
         name, ncodes, n);
  if (q == p) mi_free(q);
  for (size_t i = 0; i < n; i++) mi_free(kept[i]);
}

/* A zeroing aligned call that lands on a guarded slot gets zeros too: the
 * slot was used before.  Every allocation is sampled here, of a size no
 * page was set up for yet (a page's sampling is armed when it is set up);
 * slots come back after a quarantine of 256 guarded allocations. */
static void check_guarded_zero(void) {
  mi_option_set(mi_option_guarded_sample_rate, 1);
  bool ok = true;
  for (int i = 0; i < 1000 && ok; i++) {
    unsigned char *z = mi_zalloc_aligned(700, 16);
    ok = z != NULL && all_bytes(z, 700, 0);
    if (z != NULL) memset(z, 0x55, 700);
    mi_free(z);
  }
  mi_option_set(mi_option_guarded_sample_rate, 0);
  TAP_OK(ok, "mi_zalloc_aligned under guarded sampling at 1 in 1: zero every time");
}

int main(void) {
  /* a guarded block (secure + debug builds sample by default) is not filled */
  mi_option_set(mi_option_guarded_sample_rate, 0);
  mi_register_error(on_error, NULL);
  check_fresh();
  check_write_after_free(mi_malloc, "mi_malloc");
  check_write_after_free(aligned16, "mi_malloc_aligned(16)");
  check_write_after_free(aligned64, "mi_malloc_aligned(64)");
  check_write_after_free(aligned_at, "mi_malloc_aligned_at(64, 8)");
  check_guarded_zero();
  return tap_done();
}
#endif

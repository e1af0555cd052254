/* common.h - helpers shared by the mialloc benchmark workloads.
 *
 * Every workload is a stand-alone C11 (+GNU) program built with
 * `cc -O2 -pthread`.  This header gives them the same conventions:
 *
 *   - a fixed-seed PRNG (splitmix64), so that a run is repeatable;
 *   - the thread count: argv[1], else $BENCH_THREADS, else the number of
 *     online CPUs;
 *   - a work multiplier $BENCH_SCALE (default 1.0) so that a quick check can
 *     run a fraction of the normal work (e.g. BENCH_SCALE=0.1);
 *   - fill/check helpers that stamp a block with a pattern derived from a
 *     tag and verify it later: overlapping or corrupted blocks are caught;
 *   - bench_fail(): print a message and exit(1), so that a broken allocator
 *     can never "win" a benchmark.
 *
 * Everything is static inline: each workload includes it once.
 */
#ifndef MIALLOC_BENCH_COMMON_H
#define MIALLOC_BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BENCH_UNUSED __attribute__((unused))
#define BENCH_NOINLINE __attribute__((noinline))

/* Name of the running workload, set by bench_init(); used in messages. */
static const char *bench_name = "bench";

static void bench_fail(const char *fmt, ...)
    __attribute__((format(printf, 1, 2), noreturn, unused));
static void bench_fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s: FAIL: ", bench_name);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    fflush(stderr);
    exit(1);
}

/* ---------------------------------------------------------------- PRNG */

/* splitmix64: tiny, fast, statistically fine for workload generation. */
typedef struct {
    uint64_t state;
} rng_t;

static inline void rng_seed(rng_t *r, uint64_t seed)
{
    r->state = seed * 0x9E3779B97F4A7C15ull + 0x2545F4914F6CDD1Dull;
}

static inline uint64_t rng_next(rng_t *r)
{
    uint64_t z = (r->state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) without division (Lemire's multiply-shift). */
static inline uint64_t rng_below(rng_t *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)rng_next(r) * n) >> 64);
}

/* Uniform in [lo, hi]. */
static inline uint64_t rng_range(rng_t *r, uint64_t lo, uint64_t hi)
{
    return lo + rng_below(r, hi - lo + 1);
}

/* Roughly log-uniform in [lo, hi]: small values are as likely per octave as
 * large ones, which is how object sizes in real programs are spread. */
static inline size_t rng_logsize(rng_t *r, size_t lo, size_t hi)
{
    unsigned lo_bits = 63u - (unsigned)__builtin_clzll(lo | 1);
    unsigned hi_bits = 63u - (unsigned)__builtin_clzll(hi | 1);
    unsigned b = (unsigned)rng_range(r, lo_bits, hi_bits);
    size_t base = (size_t)1 << b;
    size_t s = base + (size_t)rng_below(r, base);
    if (s < lo)
        s = lo;
    if (s > hi)
        s = hi;
    return s;
}

/* ----------------------------------------------------------- parameters */

static inline int bench_threads(int argc, char **argv)
{
    const char *s = NULL;
    if (argc > 1)
        s = argv[1];
    else
        s = getenv("BENCH_THREADS");
    if (s && *s) {
        char *end;
        long n = strtol(s, &end, 10);
        if (*end || n < 1 || n > 4096) {
            fprintf(stderr, "%s: bad thread count '%s'\n", bench_name, s);
            exit(2);
        }
        return (int)n;
    }
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n < 1 ? 1 : (int)n;
}

static inline double bench_scale(void)
{
    const char *s = getenv("BENCH_SCALE");
    if (!s || !*s)
        return 1.0;
    char *end;
    double d = strtod(s, &end);
    if (*end || !(d > 0) || d > 1000) {
        fprintf(stderr, "%s: bad BENCH_SCALE '%s'\n", bench_name, s);
        exit(2);
    }
    return d;
}

/* n scaled by $BENCH_SCALE, at least 1. */
static inline uint64_t bench_scaled(uint64_t n)
{
    double d = (double)n * bench_scale();
    return d < 1 ? 1 : (uint64_t)d;
}

static inline void bench_init(const char *name)
{
    bench_name = name;
}

/* ------------------------------------------------------------ allocation */

static inline void *xmalloc(size_t n)
{
    void *p = malloc(n);
    if (!p)
        bench_fail("malloc(%zu) returned NULL", n);
    return p;
}

static inline void *xcalloc(size_t n, size_t s)
{
    void *p = calloc(n, s);
    if (!p)
        bench_fail("calloc(%zu, %zu) returned NULL", n, s);
    return p;
}

static inline void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n);
    if (!q)
        bench_fail("realloc(%p, %zu) returned NULL", p, n);
    return q;
}

/* ------------------------------------------------------- fill and check */

/* The byte stamped at offset i of a block with tag t.  Cheap, and every
 * byte depends on both the tag and the position. */
static inline uint8_t pat_byte(uint64_t tag, size_t i)
{
    return (uint8_t)((tag * 0x9Du) ^ (i * 0x3Bu) ^ (i >> 8));
}

/* Fill a whole block (the usual case for small objects: programs write what
 * they allocate). */
static inline void fill_block(void *p, size_t n, uint64_t tag)
{
    uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        b[i] = pat_byte(tag, i);
}

static inline int check_block(const void *p, size_t n, uint64_t tag)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i] != pat_byte(tag, i))
            return 0;
    return 1;
}

/* For big blocks: stamp the first and last words and one word per 4 KiB
 * page, so that every page is touched (as a real program would) without the
 * workload being dominated by memset. */
static inline uint64_t page_word(uint64_t tag, size_t off)
{
    return (tag * 0x9E3779B97F4A7C15ull) ^ off;
}

static inline void fill_pages(void *p, size_t n, uint64_t tag)
{
    uint8_t *b = p;
    if (n < 16) {
        fill_block(p, n, tag);
        return;
    }
    for (size_t off = 0; off + 16 <= n; off += 4096) {
        uint64_t w = page_word(tag, off);
        memcpy(b + off, &w, 8);
    }
    uint64_t w = page_word(tag, n - 8);
    memcpy(b + n - 8, &w, 8);
}

static inline int check_pages(const void *p, size_t n, uint64_t tag)
{
    const uint8_t *b = p;
    if (n < 16)
        return check_block(p, n, tag);
    for (size_t off = 0; off + 16 <= n; off += 4096) {
        uint64_t w;
        memcpy(&w, b + off, 8);
        if (w != page_word(tag, off))
            return 0;
    }
    uint64_t w;
    memcpy(&w, b + n - 8, 8);
    return w == page_word(tag, n - 8);
}

/* After a realloc: the page words of `tag` that lie entirely in the first
 * n bytes must have survived (the old tail word may be cut off). */
static inline int check_prefix(const void *p, size_t n, uint64_t tag)
{
    const uint8_t *b = p;
    if (n < 16)
        return 1;
    for (size_t off = 0; off + 16 <= n; off += 4096) {
        uint64_t w;
        memcpy(&w, b + off, 8);
        if (w != page_word(tag, off))
            return 0;
    }
    return 1;
}

/* FNV-1a, for checksums of contents. */
static inline uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001B3ull;
    }
    return h;
}
#define FNV_INIT 0xCBF29CE484222325ull

/* -------------------------------------------------------------- threads */

/* Start n threads running fn(i) and wait for all of them. */
static inline void run_threads(int n, void *(*fn)(void *), void *args,
                               size_t arg_size)
{
    pthread_t *tid = xmalloc(sizeof(pthread_t) * (size_t)n);
    for (int i = 0; i < n; i++) {
        int e = pthread_create(&tid[i], NULL, fn, (char *)args + (size_t)i * arg_size);
        if (e)
            bench_fail("pthread_create: %s", strerror(e));
    }
    for (int i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
    free(tid);
}

#endif

/* aligncalloc.c - aligned and calloc-heavy allocation.
 *
 * Stands for: code that asks for alignment or zeroed memory all the time:
 * SIMD and numeric kernels (32/64-byte aligned vectors), lock-free data
 * structures padded to cache lines, I/O with O_DIRECT (page-aligned
 * buffers), C++ `new` of over-aligned types, and the many C programs that
 * use calloc for every struct and array.
 *
 * Why it matters: aligned requests must not waste a whole extra alignment's
 * worth of memory or fall into a slow path; natural alignment of size
 * classes can serve most of them for free.  calloc must zero recycled
 * memory but can skip zeroing pages that come fresh from the OS; a
 * calloc that always memsets big blocks doubles their cost and touches
 * memory that would otherwise never be faulted in.
 *
 * Each thread keeps 512 live blocks and replaces a random one per step with
 * calloc (small and large), posix_memalign, aligned_alloc or memalign
 * (alignments 16 B .. 64 KiB, some 2 MiB).  Before a block is freed it is
 * filled with garbage, so a calloc that hands it out again must really
 * zero it.  Alignment and zeroing are checked on every allocation.
 *
 * Usage: aligncalloc [threads]   (work per thread is constant)
 */
#include "common.h"
#include <malloc.h>

#define LIVE 512
#define OPS_PER_THREAD 1000000

typedef struct {
    uint8_t *p;
    size_t size;
} blk_t;

typedef struct {
    int id;
    uint64_t checksum;
} targ_t;

static void check_zero(const uint8_t *p, size_t n)
{
    /* Small blocks completely; big ones at one word per 64 bytes, and the
     * first and last 4 KiB completely. */
    if (n <= 8192) {
        for (size_t i = 0; i < n; i++)
            if (p[i])
                bench_fail("calloc(%zu): byte %zu not zero", n, i);
        return;
    }
    for (size_t i = 0; i < 4096; i++)
        if (p[i] || p[n - 1 - i])
            bench_fail("calloc(%zu): memory not zeroed", n);
    for (size_t i = 0; i + 8 <= n; i += 64) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        if (w)
            bench_fail("calloc(%zu): word at %zu not zero", n, i);
    }
}

static void *worker(void *arg)
{
    targ_t *t = arg;
    rng_t rng;
    rng_seed(&rng, 7000 + (uint64_t)t->id);
    blk_t live[LIVE] = {0};
    uint64_t sum = 0;
    uint64_t ops = bench_scaled(OPS_PER_THREAD);
    for (uint64_t op = 0; op < ops; op++) {
        blk_t *b = &live[rng_below(&rng, LIVE)];
        if (b->p) {
            /* dirty the whole block so that a recycled calloc shows it */
            memset(b->p, 0xA5, b->size);
            free(b->p);
        }
        unsigned kind = (unsigned)rng_below(&rng, 1000);
        size_t size, align = 0;
        void *p = NULL;
        if (kind < 450) {
            /* calloc of structs and small arrays */
            size_t each = rng_logsize(&rng, 4, 64), n = rng_logsize(&rng, 1, 64);
            size = each * n;
            p = xcalloc(n, each);
            check_zero(p, size);
        } else if (kind < 460) {
            /* calloc of big tables */
            size = rng_logsize(&rng, 64 * 1024, 1024 * 1024);
            p = xcalloc(1, size);
            check_zero(p, size);
        } else {
            unsigned a = (unsigned)rng_below(&rng, 1000);
            align = a < 400 ? 64 : a < 600 ? 32 : a < 750 ? 16 : a < 900 ? 4096
                  : a < 998 ? (size_t)1 << rng_range(&rng, 7, 16) : (size_t)2 << 20;
            size = rng_below(&rng, 4) ? rng_logsize(&rng, 8, 1024) : rng_logsize(&rng, 1024, 65536);
            int how = (int)rng_below(&rng, 3);
            if (how == 0) {
                int e = posix_memalign(&p, align, size);
                if (e)
                    bench_fail("posix_memalign(%zu, %zu): %s", align, size, strerror(e));
            } else if (how == 1) {
                size = (size + align - 1) & ~(align - 1); /* C11 wants a multiple */
                p = aligned_alloc(align, size);
            } else {
                p = memalign(align, size);
            }
            if (!p)
                bench_fail("aligned allocation (%zu, %zu) returned NULL", align, size);
            if ((uintptr_t)p & (align - 1))
                bench_fail("block %p not aligned to %zu", p, align);
        }
        b->p = p;
        b->size = size;
        /* use it: touch the start and the end */
        b->p[0] = (uint8_t)op;
        b->p[size - 1] = (uint8_t)(op >> 8);
        sum += size + align;
    }
    for (int i = 0; i < LIVE; i++)
        free(live[i].p);
    t->checksum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("aligncalloc");
    int nthreads = bench_threads(argc, argv);
    targ_t *args = xcalloc((size_t)nthreads, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        args[i].id = i;
    run_threads(nthreads, worker, args, sizeof(targ_t));
    uint64_t bytes = 0;
    for (int i = 0; i < nthreads; i++)
        bytes += args[i].checksum;
    printf("aligncalloc: ok threads=%d bytes=%llu\n", nthreads, (unsigned long long)bytes);
    free(args);
    return 0;
}

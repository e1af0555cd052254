/* large.c - large allocations (64 KiB .. 32 MiB) with reuse.
 *
 * Stands for: programs that work on big buffers: image and video frames,
 * compression and I/O buffers, column chunks in databases and data-frame
 * libraries, big hash tables and vectors that grow by realloc.  Buffers are
 * allocated, filled, dropped, and similar sizes are asked for again soon.
 *
 * Why it matters: each fresh large block costs page faults (the kernel has
 * to zero every page) and, if the allocator maps and unmaps it each time,
 * mmap/munmap system calls and TLB shootdowns.  Keeping freed large blocks
 * for reuse is fast but raises RSS; returning them promptly keeps RSS low
 * but costs faults.  realloc of a large block can use mremap instead of
 * copying, and calloc of fresh pages can skip the memset.
 *
 * Each thread keeps 8 buffers of log-uniform size and replaces (70%),
 * reallocs (20%) or callocs (10%) a random one per step, touching every page.
 * Contents are verified before every free and after every realloc, and
 * calloc memory must read as zero.
 *
 * Usage: large [threads]   (work per thread is constant)
 */
#include "common.h"

#define SLOTS 8
#define OPS_PER_THREAD 400
#define MIN_SIZE (64 * 1024)
#define MAX_SIZE (32 * 1024 * 1024)

typedef struct {
    uint8_t *p;
    size_t size;
    uint64_t tag;
} buf_t;

typedef struct {
    int id;
    uint64_t checksum;
} targ_t;

static void *worker(void *arg)
{
    targ_t *t = arg;
    rng_t rng;
    rng_seed(&rng, 9000 + (uint64_t)t->id);
    buf_t slot[SLOTS];
    uint64_t tag = (uint64_t)t->id << 40, sum = 0;
    for (int i = 0; i < SLOTS; i++) {
        slot[i].size = rng_logsize(&rng, MIN_SIZE, MAX_SIZE);
        slot[i].tag = tag++;
        slot[i].p = xmalloc(slot[i].size);
        fill_pages(slot[i].p, slot[i].size, slot[i].tag);
    }
    uint64_t ops = bench_scaled(OPS_PER_THREAD);
    for (uint64_t op = 0; op < ops; op++) {
        buf_t *b = &slot[rng_below(&rng, SLOTS)];
        size_t size = rng_logsize(&rng, MIN_SIZE, MAX_SIZE);
        unsigned kind = (unsigned)rng_below(&rng, 10);
        if (kind < 2) {
            /* grow or shrink in place if possible */
            b->p = xrealloc(b->p, size);
            size_t keep = b->size < size ? b->size : size;
            if (!check_prefix(b->p, keep, b->tag))
                bench_fail("realloc(%zu -> %zu) lost contents", b->size, size);
        } else {
            if (!check_pages(b->p, b->size, b->tag))
                bench_fail("buffer of %zu bytes corrupted", b->size);
            free(b->p);
            if (kind < 3) {
                b->p = xcalloc(1, size);
                for (size_t off = 0; off < size; off += 4096)
                    if (b->p[off] || b->p[size - 1 - off])
                        bench_fail("calloc(%zu) memory not zeroed", size);
            } else {
                b->p = xmalloc(size);
            }
        }
        b->size = size;
        b->tag = tag++;
        fill_pages(b->p, b->size, b->tag);
        sum += size;
    }
    for (int i = 0; i < SLOTS; i++) {
        if (!check_pages(slot[i].p, slot[i].size, slot[i].tag))
            bench_fail("buffer of %zu bytes corrupted", slot[i].size);
        free(slot[i].p);
    }
    t->checksum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("large");
    int nthreads = bench_threads(argc, argv);
    targ_t *args = xcalloc((size_t)nthreads, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        args[i].id = i;
    run_threads(nthreads, worker, args, sizeof(targ_t));
    uint64_t bytes = 0;
    for (int i = 0; i < nthreads; i++)
        bytes += args[i].checksum;
    printf("large: ok threads=%d bytes=%llu\n", nthreads, (unsigned long long)bytes);
    free(args);
    return 0;
}

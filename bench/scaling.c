/* scaling.c - many threads, each with a private working set.
 *
 * Stands for: embarrassingly parallel programs: a thread pool where every
 * worker builds and discards its own data structures (compilers and build
 * tools running jobs in threads, parallel parsers, per-request arenas in
 * servers, map/reduce workers).  Nothing is shared.
 *
 * Why it matters: ideally the allocator scales linearly: no shared lock, no
 * shared cache line, no global counter on the fast path.  Any contention in
 * the allocator shows up as wall time that grows with the thread count
 * while the per-thread work stays the same.
 *
 * Each thread keeps a working set of 20000 objects (mostly 16..512 bytes,
 * some up to 8 KiB) and repeatedly replaces random ones, touching and
 * verifying them.  The work per thread is constant, so with enough cores the
 * wall time should not grow with the thread count.
 *
 * Usage: scaling [threads]
 */
#include "common.h"

#define WORKING_SET 20000
#define OPS_PER_THREAD 9000000

typedef struct {
    uint32_t size;
    uint32_t magic;
    uint64_t tag;
} hdr_t;

#define MAGIC 0x5CA1E5u

typedef struct {
    int id;
    uint64_t checksum;
} targ_t;

static hdr_t *new_object(rng_t *r, uint64_t tag)
{
    size_t size = rng_below(r, 20) ? rng_logsize(r, 16, 512) : rng_logsize(r, 512, 8192);
    hdr_t *h = xmalloc(size);
    h->size = (uint32_t)size;
    h->magic = MAGIC;
    h->tag = tag;
    fill_pages(h + 1, size - sizeof(hdr_t), tag);
    return h;
}

static void free_object(hdr_t *h)
{
    if (h->magic != MAGIC || !check_pages(h + 1, h->size - sizeof(hdr_t), h->tag))
        bench_fail("object corrupted (tag %llu)", (unsigned long long)h->tag);
    h->magic = 0;
    free(h);
}

static void *worker(void *arg)
{
    targ_t *t = arg;
    rng_t rng;
    rng_seed(&rng, 3000 + (uint64_t)t->id);
    uint64_t tag = (uint64_t)t->id << 40, sum = 0;
    hdr_t **set = xmalloc(sizeof(hdr_t *) * WORKING_SET);
    for (int i = 0; i < WORKING_SET; i++)
        set[i] = new_object(&rng, tag++);
    uint64_t ops = bench_scaled(OPS_PER_THREAD);
    for (uint64_t op = 0; op < ops; op++) {
        hdr_t **s = &set[rng_below(&rng, WORKING_SET)];
        sum += (*s)->tag;
        free_object(*s);
        *s = new_object(&rng, tag++);
    }
    for (int i = 0; i < WORKING_SET; i++)
        free_object(set[i]);
    free(set);
    t->checksum = sum;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("scaling");
    int nthreads = bench_threads(argc, argv);
    targ_t *args = xcalloc((size_t)nthreads, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        args[i].id = i;
    run_threads(nthreads, worker, args, sizeof(targ_t));
    uint64_t checksum = FNV_INIT;
    for (int i = 0; i < nthreads; i++)
        checksum = fnv1a(checksum, &args[i].checksum, 8);
    printf("scaling: ok threads=%d checksum=%016llx\n", nthreads,
           (unsigned long long)checksum);
    free(args);
    return 0;
}

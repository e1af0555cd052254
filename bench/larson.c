/* larson.c - server pattern: objects allocated by one thread are freed by
 * another (in the spirit of the Larson & Krishnan server benchmark; this is
 * an independent implementation).
 *
 * Stands for: multi-threaded servers where a request object, a buffer or a
 * session is created by the thread that accepted the work and released by
 * whichever worker finished it (web and database servers, message brokers,
 * thread pools handing connections around).
 *
 * Why it matters: remote frees are the hard case for thread-caching
 * allocators.  Memory can migrate to the freeing thread (glibc's tcache, and
 * arenas that then serve the wrong thread), pile up in caches ("blowup"), or
 * need locks; a design with per-page cross-thread free lists returns it to
 * the owning page without a lock.
 *
 * Each thread owns a table of object slots for one round, replacing random
 * slots (free the old object, allocate a new one of random size 16..1024
 * bytes).  After every round the tables rotate between threads, so most
 * frees are of objects another thread allocated.  Each object carries a
 * stamp that is verified before it is freed.  The tables carry their own
 * PRNG, so the run is deterministic for a given thread count.
 *
 * Usage: larson [threads]   (work per thread is constant)
 */
#include "common.h"

#define SLOTS 4000
#define OPS_PER_ROUND 20000
#define ROUNDS 350

typedef struct {
    uint32_t size;
    uint32_t magic;
    uint64_t tag;
} hdr_t;

#define MAGIC 0x1A250Bu

typedef struct {
    hdr_t **slot;
    rng_t rng;
    uint64_t next_tag;
    uint64_t checksum;
} table_t;

typedef struct {
    int id;
} targ_t;

static int nthreads;
static uint64_t rounds;
static table_t *tables;
static pthread_barrier_t barrier;

static hdr_t *new_object(table_t *t)
{
    size_t size = rng_logsize(&t->rng, 16, 1024);
    hdr_t *h = xmalloc(size);
    h->size = (uint32_t)size;
    h->magic = MAGIC;
    h->tag = t->next_tag++;
    if (size > sizeof(hdr_t))
        fill_pages(h + 1, size - sizeof(hdr_t), h->tag);
    return h;
}

static void free_object(table_t *t, hdr_t *h)
{
    if (h->magic != MAGIC || h->size < 16 || h->size > 1024 ||
        (h->size > sizeof(hdr_t) && !check_pages(h + 1, h->size - sizeof(hdr_t), h->tag)))
        bench_fail("object corrupted (tag %llu)", (unsigned long long)h->tag);
    t->checksum += h->tag * h->size;
    h->magic = 0;
    free(h);
}

static void *worker(void *arg)
{
    targ_t *a = arg;
    for (uint64_t r = 0; r < rounds; r++) {
        table_t *t = &tables[((uint64_t)a->id + r) % (uint64_t)nthreads];
        for (int op = 0; op < OPS_PER_ROUND; op++) {
            hdr_t **s = &t->slot[rng_below(&t->rng, SLOTS)];
            free_object(t, *s);
            *s = new_object(t);
        }
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("larson");
    nthreads = bench_threads(argc, argv);
    rounds = bench_scaled(ROUNDS);
    tables = xcalloc((size_t)nthreads, sizeof(table_t));
    /* The initial population is allocated by the main thread: the first
     * round already frees foreign objects. */
    for (int i = 0; i < nthreads; i++) {
        table_t *t = &tables[i];
        rng_seed(&t->rng, 77 + (uint64_t)i);
        t->next_tag = (uint64_t)i << 40;
        t->slot = xmalloc(sizeof(hdr_t *) * SLOTS);
        for (int s = 0; s < SLOTS; s++)
            t->slot[s] = new_object(t);
    }
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    targ_t *args = xcalloc((size_t)nthreads, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        args[i].id = i;
    run_threads(nthreads, worker, args, sizeof(targ_t));

    uint64_t checksum = 0, allocated = 0;
    for (int i = 0; i < nthreads; i++) {
        table_t *t = &tables[i];
        for (int s = 0; s < SLOTS; s++)
            free_object(t, t->slot[s]);
        free(t->slot);
        allocated += t->next_tag - ((uint64_t)i << 40);
        checksum ^= t->checksum;
    }
    uint64_t expect = (uint64_t)nthreads * (SLOTS + rounds * OPS_PER_ROUND);
    if (allocated != expect)
        bench_fail("allocated %llu objects, expected %llu", (unsigned long long)allocated,
                   (unsigned long long)expect);
    printf("larson: ok threads=%d objects=%llu checksum=%016llx\n", nthreads,
           (unsigned long long)allocated, (unsigned long long)checksum);
    pthread_barrier_destroy(&barrier);
    free(args);
    free(tables);
    return 0;
}

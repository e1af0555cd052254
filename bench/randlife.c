/* randlife.c - random-lifetime stress over all size classes.
 *
 * Stands for: the general mix of a long-running application that has no
 * single dominant pattern: most objects die young, some live for a while,
 * a few for very long; sizes range from a few bytes to hundreds of KiB;
 * buffers get resized; some objects are passed to another thread.
 *
 * Why it matters: this exercises every path of the allocator at once
 * (small, medium and large classes, realloc in place and by moving,
 * remote frees, page reclamation) with a live heap whose shape keeps
 * changing, which is where fragmentation and slow paths appear.  It is
 * also a correctness stress: every block is stamped and checked.
 *
 * Each thread drives a timing wheel: at each step it allocates one object
 * with a random size (48 B .. 256 KiB, 70% under 128 B) and a random
 * lifetime, and frees the objects whose time has come; 1 in 8 of those is
 * instead resized with realloc and kept.  1 in 16 new objects is handed to
 * the next thread, which frees it later.  (The fate of each object is drawn
 * from its own PRNG, so the work is the same whatever the thread timing;
 * only the moment a handed-over object is received can vary.)  Every
 * SYNC_EVERY steps the threads meet at a barrier: without it, how far one
 * thread ran ahead of the other (the scheduler's doing, not the
 * allocator's) set how much was live at the peak, and the same library
 * peaked anywhere between 175 and 300 MiB from one run to the next.
 *
 * Usage: randlife [threads]   (work per thread is constant)
 */
#include "common.h"

#define STEPS_PER_THREAD 2000000
#define WHEEL 65536 /* power of two */
#define DRAIN_EVERY 256
#define SYNC_EVERY 16384 /* steps between barriers; bounds the threads' skew */

typedef struct obj {
    struct obj *next;
    uint64_t expiry;   /* step at which it dies (receiver's clock) */
    uint64_t lifetime; /* used when it changes hands */
    uint64_t tag;
    uint32_t size;
    uint32_t magic;
    uint64_t gen; /* times it was resized */
} obj_t;

#define MAGIC 0x0B1EC7u

typedef struct {
    int id;
    obj_t **wheel;
    uint64_t now;
    pthread_mutex_t mbox_lock;
    obj_t *mbox;
    uint64_t allocated, freed, reallocs;
} thr_t;

static int nthreads;
static thr_t *thr;
static pthread_barrier_t barrier;

static size_t pick_size(rng_t *r)
{
    unsigned c = (unsigned)rng_below(r, 1000);
    if (c < 700)
        return rng_logsize(r, sizeof(obj_t), 128);
    if (c < 920)
        return rng_logsize(r, 128, 2048);
    if (c < 990)
        return rng_logsize(r, 2048, 64 * 1024);
    return rng_logsize(r, 64 * 1024, 256 * 1024);
}

static uint64_t pick_lifetime(rng_t *r)
{
    unsigned c = (unsigned)rng_below(r, 100);
    if (c < 50)
        return rng_range(r, 1, 16);
    if (c < 85)
        return rng_logsize(r, 16, 1024);
    if (c < 98)
        return rng_logsize(r, 1024, 32768);
    return rng_logsize(r, 32768, 1 << 20);
}

static void stamp(obj_t *o)
{
    fill_pages(o + 1, o->size - sizeof(obj_t), o->tag);
}

static void verify(obj_t *o)
{
    if (o->magic != MAGIC || o->size < sizeof(obj_t) ||
        !check_pages(o + 1, o->size - sizeof(obj_t), o->tag))
        bench_fail("object corrupted (tag %llu)", (unsigned long long)o->tag);
}

/* The fate of an object at its expiry (freed, or resized and kept) is drawn
 * from its own PRNG, so the work done does not depend on thread timing. */
static rng_t obj_rng(const obj_t *o)
{
    rng_t r;
    rng_seed(&r, o->tag * 31 + o->gen);
    return r;
}

static void schedule(thr_t *t, obj_t *o, uint64_t lifetime)
{
    o->expiry = t->now + lifetime;
    obj_t **b = &t->wheel[o->expiry & (WHEEL - 1)];
    o->next = *b;
    *b = o;
}

static void release(thr_t *t, obj_t *o)
{
    verify(o);
    o->magic = 0;
    free(o);
    t->freed++;
}

static void drain_mailbox(thr_t *t)
{
    pthread_mutex_lock(&t->mbox_lock);
    obj_t *o = t->mbox;
    t->mbox = NULL;
    pthread_mutex_unlock(&t->mbox_lock);
    while (o) {
        obj_t *n = o->next;
        schedule(t, o, o->lifetime);
        o = n;
    }
}

static void *worker(void *arg)
{
    thr_t *t = arg;
    thr_t *next = &thr[(t->id + 1) % nthreads];
    rng_t rng;
    rng_seed(&rng, 4242 + (uint64_t)t->id);
    uint64_t tag = (uint64_t)t->id << 40;
    uint64_t steps = bench_scaled(STEPS_PER_THREAD);

    for (t->now = 0; t->now < steps; t->now++) {
        /* expire */
        obj_t **b = &t->wheel[t->now & (WHEEL - 1)];
        obj_t *o = *b, *keep = NULL;
        rng_t orng;
        *b = NULL;
        while (o) {
            obj_t *n = o->next;
            if (o->expiry != t->now) {
                o->next = keep; /* a later lap of the wheel */
                keep = o;
            } else if ((orng = obj_rng(o), rng_below(&orng, 8) == 0)) {
                verify(o);
                size_t old = o->size, size = pick_size(&orng);
                o = xrealloc(o, size);
                if (o->magic != MAGIC || o->size != old ||
                    !check_prefix(o + 1, (old < size ? old : size) - sizeof(obj_t), o->tag) ||
                    (old <= size && !check_pages(o + 1, old - sizeof(obj_t), o->tag)))
                    bench_fail("realloc lost contents (tag %llu)", (unsigned long long)o->tag);
                o->size = (uint32_t)size;
                o->gen++;
                stamp(o);
                t->reallocs++;
                schedule(t, o, pick_lifetime(&orng));
            } else {
                release(t, o);
            }
            o = n;
        }
        while (keep) {
            obj_t *n = keep->next;
            keep->next = *b;
            *b = keep;
            keep = n;
        }

        /* allocate */
        size_t size = pick_size(&rng);
        o = xmalloc(size);
        o->size = (uint32_t)size;
        o->magic = MAGIC;
        o->tag = tag++;
        o->gen = 0;
        o->lifetime = pick_lifetime(&rng);
        stamp(o);
        t->allocated++;
        if (nthreads > 1 && rng_below(&rng, 16) == 0) {
            pthread_mutex_lock(&next->mbox_lock);
            o->next = next->mbox;
            next->mbox = o;
            pthread_mutex_unlock(&next->mbox_lock);
        } else {
            schedule(t, o, o->lifetime);
        }
        if (t->now % DRAIN_EVERY == 0)
            drain_mailbox(t);
        /* every thread runs the same number of steps, so all meet here */
        if (nthreads > 1 && t->now % SYNC_EVERY == SYNC_EVERY - 1)
            pthread_barrier_wait(&barrier);
    }

    /* Nobody sends after this barrier: free everything. */
    pthread_barrier_wait(&barrier);
    drain_mailbox(t);
    for (size_t i = 0; i < WHEEL; i++) {
        obj_t *o = t->wheel[i];
        while (o) {
            obj_t *n = o->next;
            release(t, o);
            o = n;
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("randlife");
    nthreads = bench_threads(argc, argv);
    thr = xcalloc((size_t)nthreads, sizeof(thr_t));
    for (int i = 0; i < nthreads; i++) {
        thr[i].id = i;
        thr[i].wheel = xcalloc(WHEEL, sizeof(obj_t *));
        pthread_mutex_init(&thr[i].mbox_lock, NULL);
    }
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    run_threads(nthreads, worker, thr, sizeof(thr_t));
    uint64_t allocated = 0, freed = 0, reallocs = 0;
    for (int i = 0; i < nthreads; i++) {
        allocated += thr[i].allocated;
        freed += thr[i].freed;
        reallocs += thr[i].reallocs;
        free(thr[i].wheel);
    }
    if (allocated != freed)
        bench_fail("%llu objects allocated but %llu freed", (unsigned long long)allocated,
                   (unsigned long long)freed);
    printf("randlife: ok threads=%d objects=%llu reallocs=%llu\n", nthreads,
           (unsigned long long)allocated, (unsigned long long)reallocs);
    pthread_barrier_destroy(&barrier);
    free(thr);
    return 0;
}

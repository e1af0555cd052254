/* falseshare.c - false sharing of small objects between threads (the
 * "cache-thrash" and "cache-scratch" patterns from the Hoard paper; this is
 * an independent implementation).
 *
 * Stands for: multi-threaded programs whose threads each update a small
 * private object intensively (counters, per-connection state, small
 * accumulators), where the allocator decides whether two threads' objects
 * end up on the same 64-byte cache line.
 *
 * Why it matters: if the allocator hands neighbouring small blocks to
 * different threads, every write by one thread invalidates the line in the
 * other core's cache and the program slows down by an order of magnitude,
 * although no data is shared at all.
 *
 *  - active phase: every thread allocates its own 8 small (16-byte)
 *    objects and updates them many times.  A heap shared between threads
 *    (one arena, blocks handed out in address order) puts different
 *    threads' objects on one line.
 *  - passive phase: thread 0 allocates 8 small objects for every thread,
 *    interleaved, so that neighbours belong to different threads; each
 *    thread frees the objects it was given, allocates new ones of the same
 *    size, and updates those.  An allocator that lets the freeing thread
 *    reuse blocks from another thread's cache line keeps the false sharing
 *    alive.
 *
 * Each thread checks that its objects hold exactly the number of updates it
 * made.
 *
 * Usage: falseshare [threads]   (work per thread is constant)
 */
#include "common.h"

#define ROUNDS 1000
#define WRITES 400000 /* updates per thread per phase */
#define OBJS 8        /* small objects each thread works on */
#define OBJ_SIZE 16

typedef struct {
    int id;
    uint64_t total;
} targ_t;

static int nthreads;
static uint64_t rounds;
static pthread_barrier_t barrier;
static uint64_t *(*handed)[OBJS]; /* passive phase: OBJS objects per thread */

/* Update a thread's objects round-robin, then check they hold exactly the
 * updates made. */
static BENCH_NOINLINE uint64_t hammer(uint64_t *obj[OBJS], int id)
{
    for (int k = 0; k < OBJS; k++) {
        obj[k][0] = 0;
        obj[k][1] = (uint64_t)id;
    }
    for (int w = 0; w < WRITES / OBJS; w++)
        for (int k = 0; k < OBJS; k++)
            ((volatile uint64_t *)obj[k])[0]++;
    uint64_t total = 0;
    for (int k = 0; k < OBJS; k++) {
        if (obj[k][0] != WRITES / OBJS || obj[k][1] != (uint64_t)id)
            bench_fail("thread %d: object lost updates (%llu)", id,
                       (unsigned long long)obj[k][0]);
        total += obj[k][0];
    }
    return total;
}

static void *worker(void *arg)
{
    targ_t *t = arg;
    uint64_t *obj[OBJS];
    for (uint64_t r = 0; r < rounds; r++) {
        /* active false sharing */
        for (int k = 0; k < OBJS; k++)
            obj[k] = xmalloc(OBJ_SIZE);
        t->total += hammer(obj, t->id);
        for (int k = 0; k < OBJS; k++)
            free(obj[k]);

        /* passive false sharing: thread 0 allocates for everybody,
         * interleaved, so neighbouring blocks belong to different threads */
        if (t->id == 0)
            for (int k = 0; k < OBJS; k++)
                for (int i = 0; i < nthreads; i++)
                    handed[i][k] = xmalloc(OBJ_SIZE);
        pthread_barrier_wait(&barrier);
        for (int k = 0; k < OBJS; k++)
            free(handed[t->id][k]);
        for (int k = 0; k < OBJS; k++)
            obj[k] = xmalloc(OBJ_SIZE);
        t->total += hammer(obj, t->id);
        for (int k = 0; k < OBJS; k++)
            free(obj[k]);
        pthread_barrier_wait(&barrier);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("falseshare");
    nthreads = bench_threads(argc, argv);
    rounds = bench_scaled(ROUNDS);
    handed = xcalloc((size_t)nthreads, sizeof *handed);
    pthread_barrier_init(&barrier, NULL, (unsigned)nthreads);
    targ_t *args = xcalloc((size_t)nthreads, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        args[i].id = i;
    run_threads(nthreads, worker, args, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        if (args[i].total != rounds * 2 * (WRITES / OBJS * OBJS))
            bench_fail("thread %d made %llu updates", i, (unsigned long long)args[i].total);
    printf("falseshare: ok threads=%d updates=%llu\n", nthreads,
           (unsigned long long)(rounds * 2 * (WRITES / OBJS * OBJS) * (uint64_t)nthreads));
    pthread_barrier_destroy(&barrier);
    free(args);
    free(handed);
    return 0;
}

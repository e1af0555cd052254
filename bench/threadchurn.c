/* threadchurn.c - threads that start, allocate and exit.
 *
 * Stands for: programs that create short-lived threads instead of keeping a
 * pool: thread-per-request servers, parallel build tools and test runners,
 * language runtimes spawning helper threads, scripts using threading for a
 * single task.  Results produced by a thread outlive it and are consumed
 * (and freed) by the thread that started it.
 *
 * Why it matters: every new thread has to get its thread-local heap set up
 * (lazily, on its first malloc) and every exiting thread has to hand its
 * pages back (abandon them) so that others can reclaim them; blocks that
 * outlive their thread must stay valid and be freeable from elsewhere.
 * Allocators with expensive per-thread set-up, or that leak or never reuse
 * the memory of dead threads, show up here in time and RSS.
 *
 * The main thread starts generations of T threads.  Each thread allocates
 * 600 objects of 16 B .. 2 KiB, frees three quarters of them and returns the
 * rest; the main thread verifies and frees those while the next generation
 * is already running.
 *
 * Usage: threadchurn [threads]   (threads per generation)
 */
#include "common.h"

#define GENERATIONS 3000
#define OBJECTS 600

typedef struct {
    uint32_t size;
    uint32_t magic;
    uint64_t tag;
} hdr_t;

#define MAGIC 0x7C4u

typedef struct {
    pthread_t tid;
    uint64_t seed;
    hdr_t **kept; /* returned to the main thread */
    size_t nkept;
} job_t;

static void *worker(void *arg)
{
    job_t *j = arg;
    rng_t rng;
    rng_seed(&rng, j->seed);
    hdr_t *obj[OBJECTS];
    for (int i = 0; i < OBJECTS; i++) {
        size_t size = rng_logsize(&rng, 16, 2048);
        hdr_t *h = xmalloc(size);
        h->size = (uint32_t)size;
        h->magic = MAGIC;
        h->tag = j->seed * OBJECTS + (uint64_t)i;
        fill_pages(h + 1, size - sizeof(hdr_t), h->tag);
        obj[i] = h;
    }
    j->kept = xmalloc(sizeof(hdr_t *) * OBJECTS);
    j->nkept = 0;
    for (int i = 0; i < OBJECTS; i++) {
        hdr_t *h = obj[(i * 7) % OBJECTS]; /* free in a scattered order */
        if (rng_below(&rng, 4) == 0) {
            j->kept[j->nkept++] = h;
        } else {
            if (h->magic != MAGIC || !check_pages(h + 1, h->size - sizeof(hdr_t), h->tag))
                bench_fail("object corrupted in its own thread");
            h->magic = 0;
            free(h);
        }
    }
    return NULL;
}

static uint64_t collect(job_t *j)
{
    uint64_t n = j->nkept;
    for (size_t i = 0; i < j->nkept; i++) {
        hdr_t *h = j->kept[i];
        if (h->magic != MAGIC || !check_pages(h + 1, h->size - sizeof(hdr_t), h->tag))
            bench_fail("object corrupted after its thread exited");
        h->magic = 0;
        free(h);
    }
    free(j->kept);
    return n;
}

int main(int argc, char **argv)
{
    bench_init("threadchurn");
    int nthreads = bench_threads(argc, argv);
    uint64_t gens = bench_scaled(GENERATIONS);
    job_t *cur = xcalloc((size_t)nthreads, sizeof(job_t));
    job_t *prev = xcalloc((size_t)nthreads, sizeof(job_t));
    uint64_t kept = 0, seed = 1;
    for (uint64_t g = 0; g <= gens; g++) {
        if (g < gens)
            for (int i = 0; i < nthreads; i++) {
                cur[i].seed = seed++;
                int e = pthread_create(&cur[i].tid, NULL, worker, &cur[i]);
                if (e)
                    bench_fail("pthread_create: %s", strerror(e));
            }
        /* free what the previous generation left, while this one runs */
        if (g > 0)
            for (int i = 0; i < nthreads; i++)
                kept += collect(&prev[i]);
        if (g < gens)
            for (int i = 0; i < nthreads; i++)
                pthread_join(cur[i].tid, NULL);
        job_t *t = prev;
        prev = cur;
        cur = t;
    }
    if (kept == 0)
        bench_fail("no objects came back from the threads");
    printf("threadchurn: ok threads=%d generations=%llu returned=%llu\n", nthreads,
           (unsigned long long)gens, (unsigned long long)kept);
    free(cur);
    free(prev);
    return 0;
}

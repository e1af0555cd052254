/* frag.c - long-lived heap plus churn in changing size classes
 * (fragmentation; the peak RSS is the figure that matters).
 *
 * Stands for: long-running processes that go through phases: a server that
 * loads a configuration, then serves requests of one kind, then of another;
 * a compiler whose passes build different data structures; a browser tab
 * or an editor session.  Each phase leaves a few survivors behind (cached
 * entries, interned strings, AST nodes still referenced), scattered among
 * the memory of everything that died.
 *
 * Why it matters: the survivors pin partly-empty pages.  An allocator that
 * can only reuse a free block for the same size class cannot give that
 * memory to the next phase, which uses other sizes, so the heap grows phase
 * after phase although the live data barely does.  The result is judged by
 * peak RSS (and time); memory that is purged and reused keeps it low.
 *
 * Each thread allocates a long-lived base set (8 MiB), then runs 8 phases.
 * A phase fills 24 MiB with objects from one size range, churns them
 * (random replacement), and frees all but 1 in 32, which stay alive until
 * the end.  All objects are stamped and checked before they are freed.
 *
 * Usage: frag [threads]   (work and memory per thread are constant)
 */
#include "common.h"

#define BASE_BYTES (8u << 20)
#define PHASE_BYTES (24u << 20)
#define SURVIVOR_ONE_IN 32
#define CHURN_PER_PHASE 200000

static const size_t ranges[][2] = {
    {16, 64}, {96, 256}, {512, 2048}, {24, 48}, {2048, 8192}, {64, 128}, {300, 600}, {8192, 32768},
};
#define NPHASES (sizeof ranges / sizeof ranges[0])

typedef struct {
    uint32_t size;
    uint32_t magic;
    uint64_t tag;
} hdr_t;

#define MAGIC 0xF4A6u

typedef struct {
    int id;
    uint64_t objects;
} targ_t;

typedef struct {
    hdr_t **v;
    size_t n, cap;
} vec_t;

static void vec_push(vec_t *v, hdr_t *h)
{
    if (v->n == v->cap) {
        v->cap = v->cap ? v->cap * 2 : 1024;
        v->v = xrealloc(v->v, v->cap * sizeof(hdr_t *));
    }
    v->v[v->n++] = h;
}

static hdr_t *new_object(rng_t *r, size_t lo, size_t hi, uint64_t *tag)
{
    size_t size = rng_range(r, lo, hi);
    if (size < sizeof(hdr_t))
        size = sizeof(hdr_t);
    hdr_t *h = xmalloc(size);
    h->size = (uint32_t)size;
    h->magic = MAGIC;
    h->tag = (*tag)++;
    fill_pages(h + 1, size - sizeof(hdr_t), h->tag);
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
    rng_seed(&rng, 6000 + (uint64_t)t->id);
    uint64_t tag = (uint64_t)t->id << 40;
    vec_t base = {0}, survivors = {0}, phase = {0};

    for (size_t bytes = 0; bytes < BASE_BYTES;) {
        hdr_t *h = new_object(&rng, 16, 1024, &tag);
        bytes += h->size;
        vec_push(&base, h);
    }
    uint64_t churn = bench_scaled(CHURN_PER_PHASE);
    for (size_t p = 0; p < NPHASES; p++) {
        size_t lo = ranges[p][0], hi = ranges[p][1];
        phase.n = 0;
        for (size_t bytes = 0; bytes < PHASE_BYTES;) {
            hdr_t *h = new_object(&rng, lo, hi, &tag);
            bytes += h->size;
            vec_push(&phase, h);
        }
        for (uint64_t c = 0; c < churn; c++) {
            hdr_t **s = &phase.v[rng_below(&rng, phase.n)];
            free_object(*s);
            *s = new_object(&rng, lo, hi, &tag);
        }
        for (size_t i = 0; i < phase.n; i++) {
            if (rng_below(&rng, SURVIVOR_ONE_IN) == 0)
                vec_push(&survivors, phase.v[i]);
            else
                free_object(phase.v[i]);
        }
    }
    for (size_t i = 0; i < survivors.n; i++)
        free_object(survivors.v[i]);
    for (size_t i = 0; i < base.n; i++)
        free_object(base.v[i]);
    free(survivors.v);
    free(base.v);
    free(phase.v);
    t->objects = tag - ((uint64_t)t->id << 40);
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("frag");
    int nthreads = bench_threads(argc, argv);
    targ_t *args = xcalloc((size_t)nthreads, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        args[i].id = i;
    run_threads(nthreads, worker, args, sizeof(targ_t));
    uint64_t objects = 0;
    for (int i = 0; i < nthreads; i++)
        objects += args[i].objects;
    printf("frag: ok threads=%d objects=%llu\n", nthreads, (unsigned long long)objects);
    free(args);
    return 0;
}

/* fastpath.c - instruction count of the malloc/free fast path.
 *
 * Not a timed workload: bench/run --fastpath runs this program under
 * `valgrind --tool=callgrind --toggle-collect=measured_loop`, so that only
 * the instructions executed inside measured_loop() (and everything it calls:
 * the PLT stubs, malloc and free) are counted, and divides by the number of
 * malloc+free pairs.  Callgrind does not replace malloc (only memcheck-like
 * tools do), so the preloaded allocator is the one measured.
 *
 * The pattern is the best case every allocator optimises for: one thread,
 * small sizes (16..128 bytes, cycling through 8 sizes), each block freed
 * right after it was allocated, after a warm-up (in a separate function, so
 * it is not counted) that has set up the thread's heap, and with some live
 * blocks in every size class used.
 *
 * The loop's own instructions (table lookup, store to a volatile, loop
 * counter, the calls) are reported separately by bench/run from callgrind's
 * self cost of measured_loop, and subtracted.
 *
 * Usage: fastpath [pairs]   (default 1000000)
 */
#include "common.h"

static const size_t sizes[8] = {16, 24, 32, 48, 64, 80, 96, 128};

/* The pointer escapes through a volatile store, so the compiler cannot
 * remove the malloc/free pair. */
static void *volatile sink;

#define PAIRS_LOOP(n)                          \
    for (size_t i = 0; i < (n); i++) {        \
        void *p = malloc(sizes[i & 7]);       \
        sink = p;                             \
        free(p);                              \
    }

BENCH_NOINLINE void warmup_loop(size_t n);
BENCH_NOINLINE void measured_loop(size_t n);

BENCH_NOINLINE void warmup_loop(size_t n)
{
    PAIRS_LOOP(n)
}

BENCH_NOINLINE void measured_loop(size_t n)
{
    PAIRS_LOOP(n)
}

int main(int argc, char **argv)
{
    bench_init("fastpath");
    size_t pairs = 1000000;
    if (argc > 1) {
        char *end;
        pairs = (size_t)strtoull(argv[1], &end, 10);
        if (*end) {
            fprintf(stderr, "usage: fastpath [pairs]\n");
            return 2;
        }
    }
    /* A few live blocks of every size used, as a real program has: without
     * them every free would empty its page, and allocators that retire
     * empty pages would be measured on that slow path instead. */
    void *keep[256];
    for (int i = 0; i < 256; i++)
        keep[i] = xmalloc(sizes[i & 7]);
    warmup_loop(100000);
    measured_loop(pairs);
    if (pairs && !sink)
        bench_fail("malloc returned NULL");
    for (int i = 0; i < 256; i++)
        free(keep[i]);
    printf("fastpath: ok pairs=%zu\n", pairs);
    return 0;
}

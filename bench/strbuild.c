/* strbuild.c - realloc-heavy string building.
 *
 * Stands for: code that builds text by appending to a growing buffer:
 * serialisers (JSON, XML, HTML templates), log formatters, SQL builders,
 * and the very common C idiom `s = realloc(s, len + n + 1)` that grows a
 * string by exactly what is appended, next to better-behaved buffers that
 * double their capacity or grow in fixed steps.
 *
 * Why it matters: realloc is where allocators differ most.  Growing in place
 * (using the slack of the size class, or the free space right after the
 * block, or mremap for huge blocks) turns the naive idiom from O(n^2) copying
 * into near O(n); a finished document is often shrunk with a final realloc,
 * which should give memory back without copying.
 *
 * Every thread builds documents of 64 B .. 256 KiB from random tokens, keeps
 * the last few alive, and checks each document's hash (computed while
 * appending) when it is finished and again when it is dropped.
 *
 * Usage: strbuild [threads]   (each thread does the same amount of work)
 */
#include "common.h"

#define DOCS_PER_THREAD 2500
#define KEEP 64
#define MAX_DOC (256 * 1024)

static const char *words[] = {
    "{\"id\":", "\"name\":\"", "\",", "},", "[", "]", "<div class=\"row\">", "</div>",
    "SELECT ", " FROM ", " WHERE ", " = ", " AND ", "null", "true", "false",
    "\n", "  ", "lorem", "ipsum", "dolor", "sit", "amet", "consectetur",
};
#define NWORDS (sizeof words / sizeof words[0])

typedef struct {
    char *s;
    size_t len;
    uint64_t hash;
} doc_t;

typedef struct {
    int id;
    uint64_t checksum;
    uint64_t reallocs;
} targ_t;

enum { GROW_EXACT, GROW_DOUBLE, GROW_STEP };

static void drop_doc(doc_t *d)
{
    if (!d->s)
        return;
    if (d->s[d->len] != 0 || fnv1a(FNV_INIT, d->s, d->len) != d->hash)
        bench_fail("document corrupted after it was finished (len %zu)", d->len);
    free(d->s);
    d->s = NULL;
}

static void *worker(void *arg)
{
    targ_t *t = arg;
    rng_t rng;
    rng_seed(&rng, 1000 + (uint64_t)t->id);
    doc_t keep[KEEP] = {0};
    uint64_t docs = bench_scaled(DOCS_PER_THREAD);
    uint64_t reallocs = 0, checksum = FNV_INIT;

    for (uint64_t n = 0; n < docs; n++) {
        size_t target = rng_logsize(&rng, 64, MAX_DOC);
        int strategy = (int)rng_below(&rng, 100);
        strategy = strategy < 60 ? GROW_EXACT : strategy < 85 ? GROW_DOUBLE : GROW_STEP;
        char *s = NULL;
        size_t len = 0, cap = 0;
        uint64_t h = FNV_INIT;

        while (len < target) {
            char tmp[48];
            const char *piece;
            size_t pl;
            if (rng_below(&rng, 4) == 0) {
                pl = (size_t)snprintf(tmp, sizeof tmp, "%llu",
                                      (unsigned long long)rng_below(&rng, 1000000));
                piece = tmp;
            } else {
                piece = words[rng_below(&rng, NWORDS)];
                pl = strlen(piece);
            }
            if (len + pl + 1 > cap) {
                switch (strategy) {
                case GROW_EXACT:
                    cap = len + pl + 1;
                    break;
                case GROW_DOUBLE:
                    cap = cap ? cap * 2 : 16;
                    if (cap < len + pl + 1)
                        cap = len + pl + 1;
                    break;
                default:
                    cap = len + pl + 1 + 256;
                    break;
                }
                s = xrealloc(s, cap);
                reallocs++;
            }
            memcpy(s + len, piece, pl);
            len += pl;
            s[len] = 0;
            h = fnv1a(h, piece, pl);
        }
        /* Finished documents are often trimmed to size. */
        if (strategy != GROW_EXACT && rng_below(&rng, 2)) {
            s = xrealloc(s, len + 1);
            reallocs++;
        }
        if (fnv1a(FNV_INIT, s, len) != h || s[len] != 0)
            bench_fail("document built wrongly (len %zu)", len);
        checksum = fnv1a(checksum, &h, sizeof h);

        doc_t *slot = &keep[rng_below(&rng, KEEP)];
        drop_doc(slot);
        *slot = (doc_t){s, len, h};
    }
    for (int i = 0; i < KEEP; i++)
        drop_doc(&keep[i]);
    t->checksum = checksum;
    t->reallocs = reallocs;
    return NULL;
}

int main(int argc, char **argv)
{
    bench_init("strbuild");
    int nthreads = bench_threads(argc, argv);
    targ_t *args = xcalloc((size_t)nthreads, sizeof(targ_t));
    for (int i = 0; i < nthreads; i++)
        args[i].id = i;
    run_threads(nthreads, worker, args, sizeof(targ_t));
    uint64_t checksum = FNV_INIT, reallocs = 0;
    for (int i = 0; i < nthreads; i++) {
        checksum = fnv1a(checksum, &args[i].checksum, 8);
        reallocs += args[i].reallocs;
    }
    printf("strbuild: ok threads=%d reallocs=%llu checksum=%016llx\n", nthreads,
           (unsigned long long)reallocs, (unsigned long long)checksum);
    free(args);
    return 0;
}

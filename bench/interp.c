/* interp.c - single-threaded small-object churn of an interpreter.
 *
 * Stands for: dynamic-language runtimes (CPython with PYTHONMALLOC=malloc,
 * Perl, Ruby, Lua, Lisp systems) where every value is a heap "box" with a
 * reference count, every call allocates a frame, and lists, strings and
 * dictionaries are made of many small blocks that die almost immediately.
 *
 * Why it matters: this is the pure malloc/free fast path for 16..128-byte
 * objects in one thread, with a long-lived dictionary that keeps growing
 * in between.  Allocators that spend even a few extra instructions per call,
 * or lose locality between consecutive small objects, show it here.
 *
 * The "program" run by the mini runtime: build lists, map/filter/fold them,
 * sort a list functionally, turn numbers into strings and join them, and
 * count words in a persistent dictionary.  Every result is checked against
 * the same computation done with plain C arithmetic.
 *
 * Usage: interp [threads]   (single-threaded: the thread count is ignored)
 */
#include "common.h"

#define LIST_N 2000
#define ITERATIONS 700
#define VOCAB 600

enum { T_INT = 1, T_PAIR, T_STR, T_FRAME, T_DICT, T_ENTRY };

typedef struct obj {
    uint32_t type;
    uint32_t rc;
} obj_t;

typedef struct {
    obj_t h;
    int64_t v;
} int_t;

typedef struct {
    obj_t h;
    obj_t *car;
    obj_t *cdr; /* a pair or NULL (the empty list) */
} pair_t;

typedef struct {
    obj_t h;
    uint32_t len;
    uint32_t hash;
    char s[];
} str_t;

typedef struct {
    obj_t h;
    uint32_t n;
    obj_t *slot[];
} frame_t;

typedef struct entry {
    obj_t h;
    obj_t *key;
    obj_t *val;
    struct entry *next;
} entry_t;

typedef struct {
    obj_t h;
    uint32_t nbuckets;
    uint32_t count;
    entry_t **buckets;
} dict_t;

static uint64_t live_objects;

static void *new_obj(uint32_t type, size_t size)
{
    obj_t *o = xmalloc(size);
    o->type = type;
    o->rc = 1;
    live_objects++;
    return o;
}

static inline obj_t *incref(obj_t *o)
{
    if (o)
        o->rc++;
    return o;
}

static void decref(obj_t *o);

static void free_obj(obj_t *o)
{
    switch (o->type) {
    case T_INT:
    case T_STR:
        break;
    case T_PAIR: {
        /* Free a whole list iteratively: no deep recursion on long lists. */
        pair_t *p = (pair_t *)o;
        for (;;) {
            obj_t *next = p->cdr;
            decref(p->car);
            p->h.type = 0;
            free(p);
            live_objects--;
            if (!next || --next->rc)
                return;
            if (next->type != T_PAIR)
                bench_fail("corrupt list cell (type %u)", next->type);
            p = (pair_t *)next;
        }
    }
    case T_FRAME: {
        frame_t *f = (frame_t *)o;
        for (uint32_t i = 0; i < f->n; i++)
            decref(f->slot[i]);
        break;
    }
    case T_ENTRY: {
        entry_t *e = (entry_t *)o;
        decref(e->key);
        decref(e->val);
        break;
    }
    case T_DICT: {
        dict_t *d = (dict_t *)o;
        for (uint32_t i = 0; i < d->nbuckets; i++) {
            entry_t *e = d->buckets[i];
            while (e) {
                entry_t *n = e->next;
                decref(&e->h);
                e = n;
            }
        }
        free(d->buckets);
        break;
    }
    default:
        bench_fail("corrupt object (type %u)", o->type);
    }
    o->type = 0;
    free(o);
    live_objects--;
}

static void decref(obj_t *o)
{
    if (o && --o->rc == 0)
        free_obj(o);
}

/* ----------------------------------------------------------- constructors */

static obj_t *mk_int(int64_t v)
{
    int_t *i = new_obj(T_INT, sizeof(int_t));
    i->v = v;
    return &i->h;
}

static int64_t int_val(obj_t *o)
{
    if (!o || o->type != T_INT)
        bench_fail("expected an int");
    return ((int_t *)o)->v;
}

/* cons steals the references to car and cdr. */
static obj_t *cons(obj_t *car, obj_t *cdr)
{
    pair_t *p = new_obj(T_PAIR, sizeof(pair_t));
    p->car = car;
    p->cdr = cdr;
    return &p->h;
}

static uint32_t str_hash(const char *s, size_t n)
{
    return (uint32_t)fnv1a(FNV_INIT, s, n);
}

static obj_t *mk_str(const char *s, size_t n)
{
    str_t *o = new_obj(T_STR, sizeof(str_t) + n + 1);
    o->len = (uint32_t)n;
    memcpy(o->s, s, n);
    o->s[n] = 0;
    o->hash = str_hash(s, n);
    return &o->h;
}

static str_t *as_str(obj_t *o)
{
    if (!o || o->type != T_STR)
        bench_fail("expected a string");
    return (str_t *)o;
}

static obj_t *str_concat(obj_t *a, obj_t *b, const char *sep)
{
    str_t *x = as_str(a), *y = as_str(b);
    size_t sl = strlen(sep);
    size_t n = x->len + sl + y->len;
    str_t *o = new_obj(T_STR, sizeof(str_t) + n + 1);
    o->len = (uint32_t)n;
    memcpy(o->s, x->s, x->len);
    memcpy(o->s + x->len, sep, sl);
    memcpy(o->s + x->len + sl, y->s, y->len);
    o->s[n] = 0;
    o->hash = str_hash(o->s, n);
    return &o->h;
}

/* ------------------------------------------------------------ "calls" */

/* A builtin receives its arguments in a freshly allocated frame, exactly as a
 * naive interpreter would do it, and returns a new reference. */
typedef obj_t *(*builtin_t)(frame_t *f);

static obj_t *call(builtin_t fn, int n, obj_t *a, obj_t *b)
{
    frame_t *f = new_obj(T_FRAME, sizeof(frame_t) + (size_t)n * sizeof(obj_t *));
    f->n = (uint32_t)n;
    if (n > 0)
        f->slot[0] = incref(a);
    if (n > 1)
        f->slot[1] = incref(b);
    obj_t *r = fn(f);
    decref(&f->h);
    return r;
}

static obj_t *b_square_mod(frame_t *f)
{
    int64_t v = int_val(f->slot[0]);
    return mk_int((v * v + 7) % 1000003);
}

static obj_t *b_is_even(frame_t *f)
{
    return mk_int((int_val(f->slot[0]) & 1) == 0);
}

static obj_t *b_add(frame_t *f)
{
    return mk_int(int_val(f->slot[0]) + int_val(f->slot[1]));
}

static obj_t *b_to_str(frame_t *f)
{
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%lld", (long long)int_val(f->slot[0]));
    return mk_str(buf, (size_t)n);
}

/* ------------------------------------------------------- list functions */

static obj_t *list_range(int n)
{
    obj_t *l = NULL;
    for (int i = n - 1; i >= 0; i--)
        l = cons(mk_int(i), l);
    return l;
}

/* Build a list in order with a tail pointer. */
typedef struct {
    obj_t *head;
    pair_t *tail;
} lbuild_t;

static void lb_push(lbuild_t *b, obj_t *v)
{
    obj_t *c = cons(v, NULL);
    if (b->tail)
        b->tail->cdr = c;
    else
        b->head = c;
    b->tail = (pair_t *)c;
}

static obj_t *list_map(obj_t *l, builtin_t fn)
{
    lbuild_t b = {0};
    for (pair_t *p = (pair_t *)l; p; p = (pair_t *)p->cdr)
        lb_push(&b, call(fn, 1, p->car, NULL));
    return b.head;
}

static obj_t *list_filter(obj_t *l, builtin_t pred)
{
    lbuild_t b = {0};
    for (pair_t *p = (pair_t *)l; p; p = (pair_t *)p->cdr) {
        obj_t *t = call(pred, 1, p->car, NULL);
        if (int_val(t))
            lb_push(&b, incref(p->car));
        decref(t);
    }
    return b.head;
}

static obj_t *list_fold(obj_t *l, builtin_t fn, obj_t *acc)
{
    for (pair_t *p = (pair_t *)l; p; p = (pair_t *)p->cdr) {
        obj_t *n = call(fn, 2, acc, p->car);
        decref(acc);
        acc = n;
    }
    return acc;
}

/* Functional quicksort: every partition builds new lists. */
static obj_t *list_append(obj_t *a, obj_t *b) /* steals b, borrows a */
{
    lbuild_t r = {0};
    for (pair_t *p = (pair_t *)a; p; p = (pair_t *)p->cdr)
        lb_push(&r, incref(p->car));
    if (r.tail)
        r.tail->cdr = b;
    else
        r.head = b;
    return r.head;
}

static obj_t *list_qsort(obj_t *l) /* borrows l, returns new list */
{
    if (!l)
        return NULL;
    pair_t *p = (pair_t *)l;
    int64_t pivot = int_val(p->car);
    lbuild_t lo = {0}, hi = {0};
    for (pair_t *q = (pair_t *)p->cdr; q; q = (pair_t *)q->cdr) {
        if (int_val(q->car) < pivot)
            lb_push(&lo, incref(q->car));
        else
            lb_push(&hi, incref(q->car));
    }
    obj_t *slo = list_qsort(lo.head);
    obj_t *shi = list_qsort(hi.head);
    decref(lo.head);
    decref(hi.head);
    obj_t *r = list_append(slo, cons(incref(p->car), shi));
    decref(slo);
    return r;
}

/* Join a list of strings pairwise (a balanced tree of concatenations). */
static obj_t *list_join(obj_t *l)
{
    if (!l)
        return mk_str("", 0);
    obj_t *cur = incref(l);
    while (((pair_t *)cur)->cdr) {
        lbuild_t b = {0};
        for (pair_t *p = (pair_t *)cur; p; p = (pair_t *)p->cdr) {
            pair_t *q = (pair_t *)p->cdr;
            if (q) {
                lb_push(&b, str_concat(p->car, q->car, ","));
                p = q;
            } else {
                lb_push(&b, incref(p->car));
            }
        }
        decref(cur);
        cur = b.head;
    }
    obj_t *r = incref(((pair_t *)cur)->car);
    decref(cur);
    return r;
}

/* ----------------------------------------------------------- dictionary */

static dict_t *dict_new(void)
{
    dict_t *d = new_obj(T_DICT, sizeof(dict_t));
    d->nbuckets = 8;
    d->count = 0;
    d->buckets = xcalloc(d->nbuckets, sizeof(entry_t *));
    return d;
}

static void dict_grow(dict_t *d)
{
    uint32_t nb = d->nbuckets * 2;
    entry_t **b = xcalloc(nb, sizeof(entry_t *));
    for (uint32_t i = 0; i < d->nbuckets; i++) {
        entry_t *e = d->buckets[i];
        while (e) {
            entry_t *n = e->next;
            uint32_t h = as_str(e->key)->hash & (nb - 1);
            e->next = b[h];
            b[h] = e;
            e = n;
        }
    }
    free(d->buckets);
    d->buckets = b;
    d->nbuckets = nb;
}

static entry_t *dict_find(dict_t *d, str_t *k)
{
    for (entry_t *e = d->buckets[k->hash & (d->nbuckets - 1)]; e; e = e->next) {
        str_t *ek = as_str(e->key);
        if (ek->hash == k->hash && ek->len == k->len && !memcmp(ek->s, k->s, k->len))
            return e;
    }
    return NULL;
}

/* d[key] = d.get(key, 0) + 1 : like Python, the old count box is replaced. */
static void dict_incr(dict_t *d, obj_t *key)
{
    str_t *k = as_str(key);
    entry_t *e = dict_find(d, k);
    if (e) {
        obj_t *one = mk_int(1);
        obj_t *n = call(b_add, 2, e->val, one);
        decref(one);
        decref(e->val);
        e->val = n;
        return;
    }
    if (d->count >= d->nbuckets)
        dict_grow(d);
    e = new_obj(T_ENTRY, sizeof(entry_t));
    e->key = incref(key);
    e->val = mk_int(1);
    uint32_t h = k->hash & (d->nbuckets - 1);
    e->next = d->buckets[h];
    d->buckets[h] = e;
    d->count++;
}

/* --------------------------------------------------------------- program */

static const char *syll[] = {"ka", "lo", "mi", "ne", "su", "ta", "ri", "po",
                             "xe", "du", "fa", "gi", "ho", "ju", "be", "zo"};

static obj_t *make_word(rng_t *r)
{
    /* Words are built by concatenation, so each lookup allocates and frees
     * a few short strings, as string-processing scripts do. */
    uint64_t w = rng_below(r, VOCAB);
    obj_t *s = mk_str(syll[w & 15], 2);
    w >>= 4;
    do {
        obj_t *t = mk_str(syll[w & 15], 2);
        obj_t *n = str_concat(s, t, "");
        decref(s);
        decref(t);
        s = n;
        w >>= 4;
    } while (w);
    return s;
}

int main(int argc, char **argv)
{
    bench_init("interp");
    (void)bench_threads(argc, argv); /* validated, but this workload is single-threaded */
    uint64_t iters = bench_scaled(ITERATIONS);
    rng_t rng;
    rng_seed(&rng, 42);
    dict_t *words = dict_new();
    uint64_t checksum = FNV_INIT;

    for (uint64_t it = 0; it < iters; it++) {
        /* 1. map / filter / fold */
        obj_t *l = list_range(LIST_N);
        obj_t *sq = list_map(l, b_square_mod);
        obj_t *ev = list_filter(sq, b_is_even);
        obj_t *sum = list_fold(ev, b_add, mk_int(0));
        int64_t expect = 0;
        for (int64_t i = 0; i < LIST_N; i++) {
            int64_t v = (i * i + 7) % 1000003;
            if (!(v & 1))
                expect += v;
        }
        if (int_val(sum) != expect)
            bench_fail("fold: got %lld, expected %lld", (long long)int_val(sum),
                       (long long)expect);
        checksum = fnv1a(checksum, &expect, sizeof expect);
        decref(sum);
        decref(ev);
        decref(sq);

        /* 2. functional quicksort of random numbers */
        obj_t *rl = NULL;
        int64_t rsum = 0;
        for (int i = 0; i < LIST_N / 2; i++) {
            int64_t v = (int64_t)rng_below(&rng, 1000000);
            rsum += v;
            rl = cons(mk_int(v), rl);
        }
        obj_t *sorted = list_qsort(rl);
        decref(rl);
        int64_t prev = -1, ssum = 0;
        int count = 0;
        for (pair_t *p = (pair_t *)sorted; p; p = (pair_t *)p->cdr) {
            int64_t v = int_val(p->car);
            if (v < prev)
                bench_fail("qsort: list not sorted");
            prev = v;
            ssum += v;
            count++;
        }
        if (count != LIST_N / 2 || ssum != rsum)
            bench_fail("qsort: lost elements (%d, %lld != %lld)", count, (long long)ssum,
                       (long long)rsum);
        decref(sorted);

        /* 3. numbers to strings, joined */
        obj_t *strs = list_map(l, b_to_str);
        obj_t *joined = list_join(strs);
        decref(strs);
        str_t *js = as_str(joined);
        size_t elen = 0;
        uint64_t eh = FNV_INIT;
        for (int i = 0; i < LIST_N; i++) {
            char buf[32];
            int n = snprintf(buf, sizeof buf, i ? ",%d" : "%d", i);
            eh = fnv1a(eh, buf, (size_t)n);
            elen += (size_t)n;
        }
        if (js->len != elen || fnv1a(FNV_INIT, js->s, js->len) != eh)
            bench_fail("join: wrong string (len %u, expected %zu)", js->len, elen);
        checksum = fnv1a(checksum, &eh, sizeof eh);
        decref(joined);
        decref(l);

        /* 4. word counts in a long-lived dictionary */
        for (int i = 0; i < LIST_N; i++) {
            obj_t *w = make_word(&rng);
            dict_incr(words, w);
            decref(w);
        }
        uint64_t total = 0;
        for (uint32_t b = 0; b < words->nbuckets; b++)
            for (entry_t *e = words->buckets[b]; e; e = e->next)
                total += (uint64_t)int_val(e->val);
        if (total != (it + 1) * LIST_N)
            bench_fail("dict: total %llu, expected %llu", (unsigned long long)total,
                       (unsigned long long)((it + 1) * LIST_N));
    }
    checksum = fnv1a(checksum, &words->count, sizeof words->count);
    decref(&words->h);
    if (live_objects != 0)
        bench_fail("%llu objects leaked", (unsigned long long)live_objects);
    printf("interp: ok iterations=%llu checksum=%016llx\n", (unsigned long long)iters,
           (unsigned long long)checksum);
    return 0;
}

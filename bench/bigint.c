/* bigint.c - big integers and symbolic polynomials: many short-lived small
 * objects of varying size.
 *
 * Stands for: computer algebra and arbitrary-precision code (Python/Ruby
 * integers, GMP-style mpz temporaries in symbolic systems such as Maxima,
 * PARI, SymPy's ground types, cryptographic toolkits in scripting languages)
 * where every arithmetic operation returns a freshly allocated immutable
 * number and the operands die a moment later.
 *
 * Why it matters: sizes are not fixed but grow slowly as numbers grow
 * (24..500 bytes), allocation and free alternate rapidly with a modest live
 * set, and many size classes are in use at once.  Allocators that keep
 * per-size free lists hot win; those that coalesce eagerly lose.
 *
 * Work: expand (1+x)^N by Pascal's rule, raise random polynomials to high
 * powers, and compute long Fibonacci sequences, all with immutable bignums.
 * Results are checked modulo a prime against the same computation in plain
 * 64-bit arithmetic, and the binomial expansion must sum to 2^N exactly.
 *
 * Usage: bigint [threads]   (single-threaded: the thread count is ignored)
 */
#include "common.h"

#define ITERATIONS 50
#define PASCAL_N 700
#define POLY_DEG 8
#define POLY_POW 40
#define FIB_N 12000
#define MODP 1000000007ull

/* Immutable unsigned bignum: n little-endian 64-bit limbs, no leading zero
 * limb (zero has n == 0). */
typedef struct {
    uint32_t n;
    uint32_t magic;
    uint64_t d[];
} bn_t;

#define BN_MAGIC 0xB16B00B5u

static uint64_t live;

static bn_t *bn_alloc(uint32_t n)
{
    bn_t *b = xmalloc(sizeof(bn_t) + (size_t)n * 8);
    b->n = n;
    b->magic = BN_MAGIC;
    live++;
    return b;
}

static void bn_free(bn_t *b)
{
    if (b->magic != BN_MAGIC)
        bench_fail("bignum header corrupted");
    b->magic = 0;
    free(b);
    live--;
}

static bn_t *bn_trim(bn_t *b)
{
    while (b->n && !b->d[b->n - 1])
        b->n--;
    return b;
}

static bn_t *bn_u64(uint64_t v)
{
    bn_t *b = bn_alloc(1);
    b->d[0] = v;
    return bn_trim(b);
}

static bn_t *bn_add(const bn_t *a, const bn_t *b)
{
    if (a->n < b->n) {
        const bn_t *t = a;
        a = b;
        b = t;
    }
    bn_t *r = bn_alloc(a->n + 1);
    unsigned char c = 0;
    uint32_t i = 0;
    for (; i < b->n; i++) {
        uint64_t s;
        unsigned char c1 = __builtin_add_overflow(a->d[i], b->d[i], &s);
        unsigned char c2 = __builtin_add_overflow(s, c, &r->d[i]);
        c = c1 | c2;
    }
    for (; i < a->n; i++)
        c = __builtin_add_overflow(a->d[i], c, &r->d[i]);
    r->d[a->n] = c;
    return bn_trim(r);
}

static bn_t *bn_mul(const bn_t *a, const bn_t *b)
{
    if (!a->n || !b->n)
        return bn_alloc(0);
    bn_t *r = bn_alloc(a->n + b->n);
    memset(r->d, 0, (size_t)r->n * 8);
    for (uint32_t i = 0; i < a->n; i++) {
        uint64_t carry = 0;
        for (uint32_t j = 0; j < b->n; j++) {
            unsigned __int128 t = (unsigned __int128)a->d[i] * b->d[j] + r->d[i + j] + carry;
            r->d[i + j] = (uint64_t)t;
            carry = (uint64_t)(t >> 64);
        }
        r->d[i + b->n] = carry;
    }
    return bn_trim(r);
}

static uint64_t bn_mod(const bn_t *a, uint64_t p)
{
    unsigned __int128 r = 0;
    for (uint32_t i = a->n; i-- > 0;)
        r = ((r << 64) | a->d[i]) % p;
    return (uint64_t)r;
}

static bn_t *bn_random(rng_t *r, uint32_t limbs)
{
    bn_t *b = bn_alloc(limbs);
    for (uint32_t i = 0; i < limbs; i++)
        b->d[i] = rng_next(r);
    return bn_trim(b);
}

static uint64_t mulmod(uint64_t a, uint64_t b)
{
    return (uint64_t)((unsigned __int128)a * b % MODP);
}

/* --------------------------------------------------- (1+x)^N, Pascal */

static uint64_t pascal(void)
{
    bn_t **c = xmalloc(sizeof(bn_t *));
    uint64_t *m = xmalloc(sizeof(uint64_t) * (PASCAL_N + 1));
    c[0] = bn_u64(1);
    m[0] = 1;
    for (uint32_t k = 1; k <= PASCAL_N; k++) {
        /* A new coefficient vector per step, as an expression rewriter
         * produces a new term list per step. */
        bn_t **n = xmalloc(sizeof(bn_t *) * (k + 1));
        n[0] = bn_u64(1);
        n[k] = bn_u64(1);
        for (uint32_t i = 1; i < k; i++)
            n[i] = bn_add(c[i - 1], c[i]);
        for (uint32_t i = 0; i < k; i++)
            bn_free(c[i]);
        free(c);
        c = n;
        for (uint32_t i = k; i > 0; i--)
            m[i] = i == k ? 1 : (m[i] + m[i - 1]) % MODP;
    }
    /* Exact check: the coefficients sum to 2^N. */
    bn_t *sum = bn_u64(0);
    for (uint32_t i = 0; i <= PASCAL_N; i++) {
        if (bn_mod(c[i], MODP) != m[i])
            bench_fail("pascal: C(%u,%u) wrong mod p", PASCAL_N, i);
        bn_t *s = bn_add(sum, c[i]);
        bn_free(sum);
        sum = s;
    }
    if (sum->n != PASCAL_N / 64 + 1 || sum->d[PASCAL_N / 64] != 1ull << (PASCAL_N % 64))
        bench_fail("pascal: coefficients do not sum to 2^%u", PASCAL_N);
    for (uint32_t i = 0; i < sum->n - 1; i++)
        if (sum->d[i])
            bench_fail("pascal: coefficients do not sum to 2^%u", PASCAL_N);
    uint64_t h = m[PASCAL_N / 2];
    bn_free(sum);
    for (uint32_t i = 0; i <= PASCAL_N; i++)
        bn_free(c[i]);
    free(c);
    free(m);
    return h;
}

/* ------------------------------------------------- polynomial powers */

typedef struct {
    uint32_t deg;
    bn_t **c;
} poly_t;

static void poly_free(poly_t *p)
{
    for (uint32_t i = 0; i <= p->deg; i++)
        bn_free(p->c[i]);
    free(p->c);
}

static poly_t poly_mul(const poly_t *a, const poly_t *b)
{
    poly_t r;
    r.deg = a->deg + b->deg;
    r.c = xmalloc(sizeof(bn_t *) * (r.deg + 1));
    for (uint32_t k = 0; k <= r.deg; k++)
        r.c[k] = bn_u64(0);
    for (uint32_t i = 0; i <= a->deg; i++)
        for (uint32_t j = 0; j <= b->deg; j++) {
            bn_t *t = bn_mul(a->c[i], b->c[j]);
            bn_t *s = bn_add(r.c[i + j], t);
            bn_free(t);
            bn_free(r.c[i + j]);
            r.c[i + j] = s;
        }
    return r;
}

/* Evaluate a polynomial at x0 modulo p. */
static uint64_t poly_eval_mod(const poly_t *p, uint64_t x0)
{
    uint64_t r = 0;
    for (uint32_t i = p->deg + 1; i-- > 0;)
        r = (mulmod(r, x0) + bn_mod(p->c[i], MODP)) % MODP;
    return r;
}

static uint64_t poly_powers(rng_t *rng)
{
    poly_t base;
    base.deg = POLY_DEG;
    base.c = xmalloc(sizeof(bn_t *) * (POLY_DEG + 1));
    for (uint32_t i = 0; i <= POLY_DEG; i++)
        base.c[i] = bn_random(rng, 1 + (uint32_t)rng_below(rng, 2));
    const uint64_t x0 = 123457;
    uint64_t vb = poly_eval_mod(&base, x0), expect = vb;
    poly_t one = {0, xmalloc(sizeof(bn_t *))};
    one.c[0] = bn_u64(1);
    poly_t acc = poly_mul(&base, &one); /* a fresh copy of base */
    poly_free(&one);
    for (uint32_t k = 2; k <= POLY_POW; k++) {
        poly_t n = poly_mul(&acc, &base);
        poly_free(&acc);
        acc = n;
        expect = mulmod(expect, vb);
        if (poly_eval_mod(&acc, x0) != expect)
            bench_fail("poly: P^%u(x0) wrong mod p", k);
    }
    poly_free(&acc);
    poly_free(&base);
    return expect;
}

/* ---------------------------------------------------------- Fibonacci */

static uint64_t fibonacci(void)
{
    bn_t *a = bn_u64(0), *b = bn_u64(1);
    uint64_t ma = 0, mb = 1;
    for (uint32_t i = 0; i < FIB_N; i++) {
        bn_t *c = bn_add(a, b);
        bn_free(a);
        a = b;
        b = c;
        uint64_t mc = (ma + mb) % MODP;
        ma = mb;
        mb = mc;
    }
    if (bn_mod(a, MODP) != ma)
        bench_fail("fibonacci: F(%u) wrong mod p", FIB_N);
    bn_free(a);
    bn_free(b);
    return ma;
}

int main(int argc, char **argv)
{
    bench_init("bigint");
    (void)bench_threads(argc, argv);
    uint64_t iters = bench_scaled(ITERATIONS);
    rng_t rng;
    rng_seed(&rng, 7);
    uint64_t checksum = FNV_INIT;
    for (uint64_t it = 0; it < iters; it++) {
        uint64_t v[3] = {pascal(), poly_powers(&rng), fibonacci()};
        checksum = fnv1a(checksum, v, sizeof v);
    }
    if (live != 0)
        bench_fail("%llu bignums leaked", (unsigned long long)live);
    printf("bigint: ok iterations=%llu checksum=%016llx\n", (unsigned long long)iters,
           (unsigned long long)checksum);
    return 0;
}

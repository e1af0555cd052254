/* prodcons.c - producer/consumer pipeline.
 *
 * Stands for: staged servers and data pipelines where one thread reads and
 * decodes input into freshly allocated messages and hands them over a queue
 * to a worker that processes and frees them, sending small acknowledgements
 * back (log shippers, network stacks, actor systems, Go-style channels).
 *
 * Why it matters: every message is freed by a thread that never allocates
 * that size, and every acknowledgement travels the other way.  Allocators
 * that return remote frees to the owner cheaply keep memory bounded and
 * fast; ones that cache freed blocks in the freeing thread grow without
 * reuse or must push them back through a slow path.
 *
 * With T threads there are max(1, T/2) independent producer/consumer pairs
 * (with T = 1 the single thread alternates both roles).  Messages are 32 B ..
 * 4 KiB, consumers also allocate short-lived scratch objects, and every
 * message and acknowledgement is verified; the totals must balance.
 *
 * Usage: prodcons [threads]   (work per pair is constant)
 */
#include "common.h"

#define MSGS_PER_PAIR 3000000
#define BATCH 64
#define QCAP 4096

typedef struct {
    uint32_t size;
    uint32_t magic;
    uint64_t seq;
} msg_t;

typedef struct {
    uint64_t seq;
    uint64_t digest;
    uint32_t magic;
} ack_t;

#define MSG_MAGIC 0x4D534721u
#define ACK_MAGIC 0x41434B21u

typedef struct {
    pthread_mutex_t m;
    pthread_cond_t not_empty, not_full;
    void *buf[QCAP];
    size_t head, count;
    int closed;
} queue_t;

static void q_init(queue_t *q)
{
    pthread_mutex_init(&q->m, NULL);
    pthread_cond_init(&q->not_empty, NULL);
    pthread_cond_init(&q->not_full, NULL);
    q->head = q->count = 0;
    q->closed = 0;
}

static void q_push(queue_t *q, void **items, size_t n)
{
    pthread_mutex_lock(&q->m);
    while (q->count + n > QCAP)
        pthread_cond_wait(&q->not_full, &q->m);
    for (size_t i = 0; i < n; i++)
        q->buf[(q->head + q->count + i) % QCAP] = items[i];
    q->count += n;
    pthread_cond_signal(&q->not_empty);
    pthread_mutex_unlock(&q->m);
}

static void q_close(queue_t *q)
{
    pthread_mutex_lock(&q->m);
    q->closed = 1;
    pthread_cond_broadcast(&q->not_empty);
    pthread_mutex_unlock(&q->m);
}

/* Pop up to max items; waits if wait is set.  Returns 0 when the queue is
 * empty and (if waiting) closed. */
static size_t q_pop(queue_t *q, void **out, size_t max, int wait)
{
    pthread_mutex_lock(&q->m);
    while (wait && q->count == 0 && !q->closed)
        pthread_cond_wait(&q->not_empty, &q->m);
    size_t n = q->count < max ? q->count : max;
    for (size_t i = 0; i < n; i++)
        out[i] = q->buf[(q->head + i) % QCAP];
    q->head = (q->head + n) % QCAP;
    q->count -= n;
    if (n)
        pthread_cond_signal(&q->not_full);
    pthread_mutex_unlock(&q->m);
    return n;
}

typedef struct {
    int id;
    queue_t fwd, back;
    rng_t rng;
    uint64_t msgs;
    uint64_t produced_digest, consumed_digest, acked_digest;
    uint64_t next_ack;
} pair_t;

/* ------------------------------------------------------------ producer */

static uint64_t msg_digest(uint64_t seq, uint32_t size)
{
    return seq * 0x9E3779B97F4A7C15ull ^ size;
}

static void make_batch(pair_t *p, uint64_t *seq, void **batch, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        uint32_t size = (uint32_t)rng_logsize(&p->rng, 32, 4096);
        msg_t *m = xmalloc(size);
        m->size = size;
        m->magic = MSG_MAGIC;
        m->seq = (*seq)++;
        fill_pages(m + 1, size - sizeof(msg_t), m->seq);
        p->produced_digest += msg_digest(m->seq, size);
        batch[i] = m;
    }
}

static void take_acks(pair_t *p, void **acks, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        ack_t *a = acks[i];
        if (a->magic != ACK_MAGIC || a->seq != p->next_ack)
            bench_fail("pair %d: bad acknowledgement (expected seq %llu)", p->id,
                       (unsigned long long)p->next_ack);
        p->next_ack++;
        p->acked_digest += a->digest;
        a->magic = 0;
        free(a);
    }
}

/* ------------------------------------------------------------ consumer */

/* Process one message: verify it, "parse" it into scratch objects, and
 * build the acknowledgement.  Frees the message. */
static ack_t *consume(pair_t *p, msg_t *m, uint64_t *scratch_sum)
{
    if (m->magic != MSG_MAGIC || m->size < 32 || m->size > 4096 ||
        !check_pages(m + 1, m->size - sizeof(msg_t), m->seq))
        bench_fail("pair %d: message corrupted", p->id);
    /* Decoding typically makes a couple of small temporary objects. */
    size_t sl = 16 + (m->seq % 200);
    char *tmp = xmalloc(sl);
    memcpy(tmp, m, sizeof(msg_t));
    memset(tmp + sizeof(msg_t), (int)(m->seq & 0x7f), sl - sizeof(msg_t));
    *scratch_sum += (uint8_t)tmp[sl - 1];
    free(tmp);

    ack_t *a = xmalloc(sizeof(ack_t) + (m->seq & 3) * 8);
    a->seq = m->seq;
    a->digest = msg_digest(m->seq, m->size);
    a->magic = ACK_MAGIC;
    p->consumed_digest += a->digest;
    m->magic = 0;
    free(m);
    return a;
}

static void *producer(void *arg)
{
    pair_t *p = arg;
    void *batch[BATCH];
    uint64_t seq = 0;
    while (seq < p->msgs) {
        size_t n = p->msgs - seq < BATCH ? (size_t)(p->msgs - seq) : BATCH;
        make_batch(p, &seq, batch, n);
        q_push(&p->fwd, batch, n);
        size_t k;
        do { /* drain every acknowledgement there is, without waiting */
            k = q_pop(&p->back, batch, BATCH, 0);
            take_acks(p, batch, k);
        } while (k == BATCH);
    }
    q_close(&p->fwd);
    for (;;) {
        size_t k = q_pop(&p->back, batch, BATCH, 1);
        if (!k)
            break;
        take_acks(p, batch, k);
    }
    return NULL;
}

static void *consumer(void *arg)
{
    pair_t *p = arg;
    void *batch[BATCH];
    uint64_t scratch = 0;
    for (;;) {
        size_t n = q_pop(&p->fwd, batch, BATCH, 1);
        if (!n)
            break;
        for (size_t i = 0; i < n; i++)
            batch[i] = consume(p, batch[i], &scratch);
        q_push(&p->back, batch, n);
    }
    q_close(&p->back);
    if (scratch == 1)
        fputc(' ', stderr); /* keep the scratch work observable */
    return NULL;
}

/* T = 1: one thread plays both roles. */
static void run_inline(pair_t *p)
{
    void *batch[BATCH];
    uint64_t seq = 0, scratch = 0;
    while (seq < p->msgs) {
        size_t n = p->msgs - seq < BATCH ? (size_t)(p->msgs - seq) : BATCH;
        make_batch(p, &seq, batch, n);
        for (size_t i = 0; i < n; i++)
            batch[i] = consume(p, batch[i], &scratch);
        take_acks(p, batch, n);
    }
    if (scratch == 1)
        fputc(' ', stderr);
}

int main(int argc, char **argv)
{
    bench_init("prodcons");
    int nthreads = bench_threads(argc, argv);
    int npairs = nthreads / 2 > 0 ? nthreads / 2 : 1;
    pair_t *pairs = xcalloc((size_t)npairs, sizeof(pair_t));
    uint64_t msgs = bench_scaled(MSGS_PER_PAIR);
    for (int i = 0; i < npairs; i++) {
        pairs[i].id = i;
        pairs[i].msgs = msgs;
        rng_seed(&pairs[i].rng, 500 + (uint64_t)i);
        q_init(&pairs[i].fwd);
        q_init(&pairs[i].back);
    }
    if (nthreads == 1) {
        run_inline(&pairs[0]);
    } else {
        pthread_t *tid = xmalloc(sizeof(pthread_t) * 2 * (size_t)npairs);
        for (int i = 0; i < npairs; i++) {
            if (pthread_create(&tid[2 * i], NULL, producer, &pairs[i]) ||
                pthread_create(&tid[2 * i + 1], NULL, consumer, &pairs[i]))
                bench_fail("pthread_create failed");
        }
        for (int i = 0; i < 2 * npairs; i++)
            pthread_join(tid[i], NULL);
        free(tid);
    }
    uint64_t checksum = FNV_INIT;
    for (int i = 0; i < npairs; i++) {
        pair_t *p = &pairs[i];
        if (p->next_ack != msgs || p->produced_digest != p->consumed_digest ||
            p->consumed_digest != p->acked_digest)
            bench_fail("pair %d: messages lost (%llu of %llu acknowledged)", i,
                       (unsigned long long)p->next_ack, (unsigned long long)msgs);
        checksum = fnv1a(checksum, &p->acked_digest, 8);
    }
    printf("prodcons: ok threads=%d pairs=%d messages=%llu checksum=%016llx\n",
           npairs == 1 && nthreads == 1 ? 1 : 2 * npairs, npairs,
           (unsigned long long)(msgs * (uint64_t)npairs), (unsigned long long)checksum);
    free(pairs);
    return 0;
}

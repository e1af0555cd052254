/* fuzz-api.c -- a fuzz target for the mi_ API (libFuzzer entry point).
 *
 * The input bytes are read as a program: each operation is an opcode byte
 * followed by its arguments (a slot, a size, an alignment, a heap).  64
 * slots hold live blocks; each block is filled with a pattern derived from
 * its id (or is all zero when it came from calloc/zalloc), and the pattern
 * is checked before every free and realloc and at the end of the input, so
 * any corruption of a live block stops the run with a message and abort().
 * Operations: malloc, calloc, zalloc, realloc, rezalloc, free, free_size,
 * aligned malloc/zalloc/realloc, usable_size, heap new/malloc/calloc/
 * realloc/destroy/delete, collect, and a hand-off of a block to a second
 * thread that checks and frees it (blocks go through a small queue).
 *
 * Built two ways (Makefile.am): with clang -fsanitize=fuzzer (make fuzz),
 * and with tests/fuzz/standalone.c, a main() that replays a corpus and
 * pseudo-random inputs in make check.
 */
#include "mialloc.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define SLOTS 64
#define HEAPS 4
#define QUEUE 16
#define NO_HEAP (-1)

typedef struct {
  unsigned char *p;
  size_t size;      /* requested bytes */
  size_t align;     /* requested alignment (1: none) */
  uint32_t id;      /* the pattern's seed */
  int heap;         /* index into heaps[], or NO_HEAP (default heap) */
  bool zero;        /* all bytes are zero (calloc/zalloc), not the pattern */
} slot_t;

static slot_t slots[SLOTS];
static mi_heap_t *heaps[HEAPS];
static uint32_t next_id;

/* ---------------------------------------------------------------------------
 * Failure: say what broke and abort (a crash the fuzzer records). */
static void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void fuzz_fail(const char *fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n < 0) n = 0;
  if ((size_t)n >= sizeof buf) n = (int)sizeof buf - 1;
  ssize_t w = write(2, "fuzz-api: FAILED: ", 18);
  w = write(2, buf, (size_t)n);
  w = write(2, "\n", 1);
  (void)w;
  abort();
}

/* ---------------------------------------------------------------------------
 * Block contents: byte i of a block is byte (i & 7) of the 64-bit word
 * word(id, i / 8), so blocks are filled and checked a word at a time. */
static inline uint64_t word(uint32_t id, size_t k) {
  return ((uint64_t)id + 1) * 0x9e3779b97f4a7c15ull ^ (uint64_t)k * 0xff51afd7ed558ccdull;
}

static inline unsigned char pattern(uint32_t id, size_t i) {
  return (unsigned char)(word(id, i >> 3) >> (8 * (i & 7)));
}

static void fill(unsigned char *p, size_t from, size_t to, uint32_t id, bool zero) {
  if (zero) {
    memset(p + from, 0, to - from);
    return;
  }
  size_t i = from;
  for (; i < to && (i & 7) != 0; i++) p[i] = pattern(id, i);
  for (; i + 8 <= to; i += 8) {
    uint64_t w = word(id, i >> 3);
    __builtin_memcpy(p + i, &w, 8);   /* inlined also under -fno-builtin */
  }
  for (; i < to; i++) p[i] = pattern(id, i);
}

/* bytes [from, to) of the block at p must hold its contents */
static void verify(const char *when, const unsigned char *p, size_t from, size_t to, uint32_t id,
                   bool zero, size_t block_size) {
  size_t i = from;
  /* fast pass a word at a time; the byte loop below finds the offset */
  for (; i < to && (i & 7) != 0; i++)
    if (p[i] != (zero ? 0 : pattern(id, i))) break;
  if (i == to || (i & 7) == 0)
    for (; i + 8 <= to; i += 8) {
      uint64_t w, want = zero ? 0 : word(id, i >> 3);
      __builtin_memcpy(&w, p + i, 8);
      if (w != want) break;
    }
  for (; i < to; i++) {
    unsigned char want = zero ? 0 : pattern(id, i);
    if (p[i] != want)
      fuzz_fail("%s: block %u at %p (%zu bytes) changed at offset %zu: 0x%02x, expected 0x%02x",
                when, id, (const void *)p, block_size, i, p[i], want);
  }
}

static void verify_slot(const char *when, const slot_t *s) {
  if (s->p != NULL) verify(when, s->p, 0, s->size, s->id, s->zero, s->size);
}

static void check_new(const char *what, const slot_t *s) {
  if (s->p == NULL) fuzz_fail("%s(%zu) returned NULL", what, s->size);
  if (((uintptr_t)s->p & (s->align - 1)) != 0)
    fuzz_fail("%s(%zu, align %zu) returned %p, not aligned", what, s->size, s->align, (void *)s->p);
  if (s->size >= 16 && ((uintptr_t)s->p & 15) != 0)
    fuzz_fail("%s(%zu) returned %p, not 16-byte aligned", what, s->size, (void *)s->p);
  if (mi_usable_size(s->p) < s->size)
    fuzz_fail("%s(%zu): mi_usable_size is %zu", what, s->size, mi_usable_size(s->p));
}

/* ---------------------------------------------------------------------------
 * The second thread: checks and frees blocks handed to it. */
typedef struct {
  unsigned char *p;
  size_t size;
  uint32_t id;
  bool zero;
} handoff_t;

static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_nonempty = PTHREAD_COND_INITIALIZER;
static pthread_cond_t q_idle = PTHREAD_COND_INITIALIZER;
static handoff_t q_items[QUEUE];
static unsigned q_head, q_tail;   /* q_tail - q_head items waiting */
static unsigned q_busy;           /* items taken but not yet freed */
static pthread_once_t q_once = PTHREAD_ONCE_INIT;

static void *worker(void *arg) {
  (void)arg;
  pthread_mutex_lock(&q_lock);
  for (;;) {
    while (q_head == q_tail) pthread_cond_wait(&q_nonempty, &q_lock);
    handoff_t h = q_items[q_head % QUEUE];
    q_head++;
    q_busy++;
    pthread_mutex_unlock(&q_lock);
    verify("free by the second thread", h.p, 0, h.size, h.id, h.zero, h.size);
    mi_free(h.p);
    pthread_mutex_lock(&q_lock);
    q_busy--;
    if (q_head == q_tail && q_busy == 0) pthread_cond_broadcast(&q_idle);
  }
  return NULL;
}

static void start_worker(void) {
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
  if (pthread_create(&t, &a, worker, NULL) != 0) fuzz_fail("cannot start the second thread");
  pthread_attr_destroy(&a);
}

static void hand_off(slot_t *s) {
  pthread_once(&q_once, start_worker);
  pthread_mutex_lock(&q_lock);
  while (q_tail - q_head >= QUEUE) pthread_cond_wait(&q_idle, &q_lock);
  q_items[q_tail % QUEUE] = (handoff_t){s->p, s->size, s->id, s->zero};
  q_tail++;
  pthread_cond_signal(&q_nonempty);
  pthread_mutex_unlock(&q_lock);
  s->p = NULL;
}

/* Wait until the second thread has freed everything handed to it. */
static void drain(void) {
  pthread_mutex_lock(&q_lock);
  while (q_head != q_tail || q_busy != 0) pthread_cond_wait(&q_idle, &q_lock);
  pthread_mutex_unlock(&q_lock);
}

/* ---------------------------------------------------------------------------
 * Reading the input */
typedef struct {
  const uint8_t *d;
  size_t n, i;
} input_t;

static unsigned u8(input_t *in) { return in->i < in->n ? in->d[in->i++] : 0; }
static unsigned u16(input_t *in) { unsigned a = u8(in); return a | (u8(in) << 8); }

/* Mostly small sizes, some medium, a few large and huge ones. */
static size_t get_size(input_t *in) {
  unsigned sel = u8(in) % 64;
  if (sel < 32) return u8(in) % 129;                    /* 0..128 */
  if (sel < 52) return u16(in) % 4097;                  /* up to 4 KiB */
  if (sel < 60) return u16(in) % 65537;                 /* up to 64 KiB */
  if (sel < 63) return (size_t)(u8(in) % 8 + 1) * 65536 + u8(in); /* up to 512 KiB */
  return (size_t)(u8(in) % 4 + 1) * 512 * 1024 + u16(in); /* huge: 0.5 to 2 MiB */
}

static size_t get_align(input_t *in) { return (size_t)1 << (u8(in) % 13); } /* 1..4096 */

static slot_t *get_slot(input_t *in) { return &slots[u8(in) % SLOTS]; }

static mi_heap_t *get_heap(input_t *in, int *index) {
  int h = (int)(u8(in) % HEAPS);
  if (heaps[h] == NULL) {
    heaps[h] = mi_heap_new();
    if (heaps[h] == NULL) fuzz_fail("mi_heap_new returned NULL");
  }
  *index = h;
  return heaps[h];
}

/* ---------------------------------------------------------------------------
 * Operations */
static void release(slot_t *s) {
  if (s->p == NULL) return;
  verify_slot("free", s);
  mi_free(s->p);
  s->p = NULL;
}

static void born(slot_t *s, unsigned char *p, size_t size, size_t align, int heap, bool zero,
                 const char *what) {
  *s = (slot_t){p, size, align, next_id++, heap, zero};
  check_new(what, s);
  if (zero) verify(what, p, 0, size, s->id, true, size);   /* must come zeroed */
  fill(p, 0, size, s->id, zero);
}

static void do_realloc(slot_t *s, size_t size, bool zeroing) {
  const char *what = zeroing ? "mi_rezalloc" : "mi_realloc";
  if (s->p == NULL) {
    born(s, zeroing ? mi_rezalloc(NULL, size) : mi_realloc(NULL, size), size, 1, NO_HEAP, zeroing, what);
    return;
  }
  verify_slot(what, s);
  /* rezalloc zeroes what lies past the old block's usable size; only a
   * block that was zeroed from the start is zero up to there */
  if (zeroing && !s->zero) zeroing = false;
  size_t old_usable = mi_usable_size(s->p);
  unsigned char *p;
  if (s->heap != NO_HEAP)
    p = zeroing ? mi_heap_rezalloc(heaps[s->heap], s->p, size) : mi_heap_realloc(heaps[s->heap], s->p, size);
  else if (s->align > 1)
    p = zeroing ? mi_rezalloc_aligned(s->p, size, s->align) : mi_realloc_aligned(s->p, size, s->align);
  else
    p = zeroing ? mi_rezalloc(s->p, size) : mi_realloc(s->p, size);
  if (p == NULL) fuzz_fail("%s(%p, %zu) returned NULL", what, (void *)s->p, size);
  size_t keep = s->size < size ? s->size : size;
  /* the old contents up to the smaller size must have moved along */
  verify(what, p, 0, keep, s->id, s->zero, size);
  if (zeroing) verify(what, p, old_usable < size ? old_usable : size, size, s->id, true, size);
  size_t old = s->size;
  s->p = p;
  s->size = size;
  check_new(what, s);
  if (size > old) fill(p, old, size, s->id, s->zero);
}

/* Every live slot of heap h is visited once, inside its area. */
typedef struct {
  int h;
  size_t found[SLOTS];
  const mi_heap_area_t *area;
} visit_t;

static bool visit_block(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t bsize, void *arg) {
  visit_t *v = arg;
  (void)heap;
  if (block == NULL) return true;
  if ((unsigned char *)block < (unsigned char *)area->blocks ||
      (unsigned char *)block + bsize > (unsigned char *)area->blocks + area->reserved + area->full_block_size)
    fuzz_fail("mi_heap_visit_blocks: block %p (%zu bytes) outside its area %p", block, bsize, area->blocks);
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p == block && slots[i].heap == v->h) v->found[i]++;
  return true;
}

static void do_visit(int h) {
  drain();   /* the second thread may be freeing blocks of the heap */
  visit_t v = {.h = h};
  if (!mi_heap_visit_blocks(heaps[h], true, visit_block, &v)) fuzz_fail("mi_heap_visit_blocks returned false");
  for (int i = 0; i < SLOTS; i++)
    if (slots[i].p != NULL && slots[i].heap == h && v.found[i] != 1)
      fuzz_fail("mi_heap_visit_blocks saw live block %p of heap %d %zu times", (void *)slots[i].p, h, v.found[i]);
}

static void end_of_input(void) {
  for (int i = 0; i < SLOTS; i++) release(&slots[i]);
  drain();
  for (int h = 0; h < HEAPS; h++) {
    if (heaps[h] == NULL) continue;
    if (h & 1) mi_heap_delete(heaps[h]);
    else mi_heap_destroy(heaps[h]);
    heaps[h] = NULL;
  }
}

static int trace = -1;   /* FUZZ_API_TRACE=1: print each operation on stderr */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  input_t in = {data, size, 0};
  int h;
  if (trace < 0) trace = getenv("FUZZ_API_TRACE") != NULL;
  while (in.i < in.n) {
    unsigned op = u8(&in) % 23;
    slot_t *s = get_slot(&in);
    if (trace)
      fprintf(stderr, "op %u slot %d (%p, %zu bytes, align %zu, heap %d%s)\n", op, (int)(s - slots),
              (void *)s->p, s->size, s->align, s->heap, s->zero ? ", zero" : "");
    switch (op) {
    case 0: case 1: case 2: {                           /* malloc */
      size_t n = get_size(&in);
      release(s);
      born(s, mi_malloc(n), n, 1, NO_HEAP, false, "mi_malloc");
      break;
    }
    case 3: {                                           /* calloc */
      size_t count = u8(&in) % 17, n = get_size(&in) / 16;
      release(s);
      born(s, mi_calloc(count, n), count * n, 1, NO_HEAP, true, "mi_calloc");
      break;
    }
    case 4: {                                           /* zalloc */
      size_t n = get_size(&in);
      release(s);
      born(s, mi_zalloc(n), n, 1, NO_HEAP, true, "mi_zalloc");
      break;
    }
    case 5: case 6:                                     /* realloc */
      do_realloc(s, get_size(&in) + 1, false);
      break;
    case 7:                                             /* rezalloc */
      do_realloc(s, get_size(&in) + 1, true);
      break;
    case 8: case 9:                                     /* free */
      release(s);
      break;
    case 10:                                            /* free_size */
      if (s->p != NULL) {
        verify_slot("mi_free_size", s);
        mi_free_size(s->p, s->size);
        s->p = NULL;
      }
      break;
    case 11: {                                          /* aligned */
      size_t n = get_size(&in), a = get_align(&in);
      bool z = u8(&in) & 1;
      release(s);
      born(s, z ? mi_zalloc_aligned(n, a) : mi_malloc_aligned(n, a), n, a, NO_HEAP, z,
           z ? "mi_zalloc_aligned" : "mi_malloc_aligned");
      break;
    }
    case 12:                                            /* usable size */
      if (s->p != NULL && mi_usable_size(s->p) < s->size)
        fuzz_fail("mi_usable_size(%p) = %zu < %zu", (void *)s->p, mi_usable_size(s->p), s->size);
      if (s->p != NULL && !mi_check_owned(s->p))
        fuzz_fail("mi_check_owned(%p) is false for a live block", (void *)s->p);
      break;
    case 13: {                                          /* heap malloc */
      size_t n = get_size(&in);
      mi_heap_t *heap = get_heap(&in, &h);
      release(s);
      born(s, mi_heap_malloc(heap, n), n, 1, h, false, "mi_heap_malloc");
      break;
    }
    case 14: {                                          /* heap calloc */
      size_t count = u8(&in) % 9, n = get_size(&in) / 8;
      mi_heap_t *heap = get_heap(&in, &h);
      release(s);
      born(s, mi_heap_calloc(heap, count, n), count * n, 1, h, true, "mi_heap_calloc");
      break;
    }
    case 15:                                            /* hand to the second thread */
      if (s->p != NULL) hand_off(s);
      break;
    case 16: {                                          /* heap destroy: frees its blocks */
      h = (int)(u8(&in) % HEAPS);
      if (heaps[h] == NULL) break;
      drain();   /* no free of one of its blocks may race with the destroy */
      for (int i = 0; i < SLOTS; i++)
        if (slots[i].p != NULL && slots[i].heap == h) slots[i].p = NULL;
      mi_heap_destroy(heaps[h]);
      heaps[h] = NULL;
      break;
    }
    case 17: {                                          /* heap delete: blocks live on */
      h = (int)(u8(&in) % HEAPS);
      if (heaps[h] == NULL) break;
      drain();
      mi_heap_delete(heaps[h]);
      heaps[h] = NULL;
      for (int i = 0; i < SLOTS; i++)
        if (slots[i].p != NULL && slots[i].heap == h) {
          slots[i].heap = NO_HEAP;
          verify_slot("after mi_heap_delete", &slots[i]);
        }
      break;
    }
    case 18:                                            /* new heap */
      (void)get_heap(&in, &h);
      break;
    case 19:                                            /* collect */
      mi_collect((u8(&in) & 7) == 0);
      break;
    case 20: {                                          /* u-family: the usable size reported */
      size_t n = get_size(&in), bs = 0;
      bool z = u8(&in) & 1;
      release(s);
      born(s, z ? mi_ucalloc(1, n, &bs) : mi_umalloc(n, &bs), n, 1, NO_HEAP, z, z ? "mi_ucalloc" : "mi_umalloc");
      if (bs != mi_usable_size(s->p)) fuzz_fail("mi_umalloc(%zu) reported %zu, usable %zu", n, bs, mi_usable_size(s->p));
      break;
    }
    case 21: {                                          /* aligned recalloc (CRT name) */
      size_t count = u8(&in) % 17 + 1, n = get_size(&in) / 16 + 1, a = get_align(&in);
      if (s->p != NULL) release(s);
      born(s, mi_aligned_recalloc(NULL, count, n, a), count * n, a, NO_HEAP, true, "mi_aligned_recalloc");
      break;
    }
    case 22:                                            /* visit a heap */
      (void)get_heap(&in, &h);
      do_visit(h);
      break;
    }
  }
  end_of_input();
  return 0;
}

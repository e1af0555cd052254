/* test-heap.c -- first-class heaps, arenas and sub-processes.
 *
 * Every check compares with what the test itself knows: the blocks it
 * allocated, the bytes it wrote, the RSS the kernel reports.
 */
#include <mialloc.h>

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../rss.h"
#include "../tap.h"

#define N_BLOCKS 3000

/* ---- visiting ---- */

typedef struct visit_s {
  void **blocks;          /* what we allocated */
  size_t n;
  size_t *seen;           /* times each was visited */
  size_t visited;         /* blocks visited in total */
  size_t unknown;         /* visited blocks we did not allocate */
  size_t areas;
  size_t area_used;       /* sum of area->used */
  size_t bad_area;        /* blocks outside their area */
  const mi_heap_t *heap;
  size_t wrong_heap;
} visit_t;

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

static bool visitor(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t bsize, void *arg) {
  visit_t *v = arg;
  if (heap != v->heap) v->wrong_heap++;
  if (block == NULL) {
    v->areas++;
    v->area_used += area->used;
    return true;
  }
  if ((uint8_t *)block < (uint8_t *)area->blocks ||
      (uint8_t *)block + bsize > (uint8_t *)area->blocks + area->reserved)
    v->bad_area++;
  v->visited++;
  void **hit = bsearch(&block, v->blocks, v->n, sizeof(void *), cmp_ptr);
  if (hit == NULL) v->unknown++;
  else v->seen[hit - v->blocks]++;
  return true;
}

static void test_visit(void) {
  mi_heap_t *heap = mi_heap_new();
  TAP_OK(heap != NULL, "mi_heap_new");
  static void *blocks[N_BLOCKS];
  static size_t seen[N_BLOCKS];
  size_t kept = 0;
  for (size_t i = 0; i < N_BLOCKS; i++) {
    size_t size = 8 + (i * 37) % 3000;
    if (i % 500 == 0) size = 1 << 20;   /* a few huge ones */
    void *p = mi_heap_malloc(heap, size);
    if (i % 3 == 0) {
      mi_free(p);                       /* freed: must not be visited */
      continue;
    }
    blocks[kept++] = p;
  }
  qsort(blocks, kept, sizeof(void *), cmp_ptr);
  visit_t v = {.blocks = blocks, .n = kept, .seen = seen, .heap = heap};
  TAP_OK(mi_heap_visit_blocks(heap, true, visitor, &v), "visit returns true when not stopped");
  size_t once = 0;
  for (size_t i = 0; i < kept; i++) once += seen[i] == 1;
  TAP_OK(v.visited == kept && once == kept && v.unknown == 0,
         "every live block visited exactly once (%zu visited, %zu once, %zu live, %zu unknown)", v.visited,
         once, kept, v.unknown);
  TAP_OK(v.area_used == kept, "the areas' used counts add up to the live blocks (%zu)", v.area_used);
  TAP_OK(v.bad_area == 0 && v.wrong_heap == 0 && v.areas > 0, "blocks lie in their areas, heap passed through");
  memset(&v, 0, sizeof v);
  v.heap = heap;
  v.blocks = blocks;
  v.n = kept;
  v.seen = seen;
  memset(seen, 0, sizeof seen);
  mi_heap_visit_blocks(heap, false, visitor, &v);
  TAP_OK(v.visited == 0 && v.areas > 0, "without visit_all_blocks only areas are visited");
  mi_heap_destroy(heap);
}

static bool stop_at_first(const mi_heap_t *h, const mi_heap_area_t *a, void *b, size_t s, void *arg) {
  (void)h; (void)a; (void)s;
  if (b != NULL) (*(int *)arg)++;
  return b == NULL;
}

static void test_visit_stop(void) {
  mi_heap_t *heap = mi_heap_new();
  for (int i = 0; i < 100; i++) (void)!mi_heap_malloc(heap, 32);
  int blocks = 0;
  TAP_OK(!mi_heap_visit_blocks(heap, true, stop_at_first, &blocks) && blocks == 1,
         "a visitor returning false stops the walk");
  mi_heap_destroy(heap);
}

/* ---- allocation family ---- */

static void test_family(void) {
  mi_heap_t *heap = mi_heap_new();
  char *s = mi_heap_strdup(heap, "first-class");
  TAP_OK(s != NULL && strcmp(s, "first-class") == 0 && mi_heap_contains(heap, s), "mi_heap_strdup");
  char *t = mi_heap_strndup(heap, "abcdef", 3);
  TAP_OK(t != NULL && strcmp(t, "abc") == 0, "mi_heap_strndup");
  uint8_t *z = mi_heap_zalloc(heap, 4000);
  int zero = 1;
  for (int i = 0; i < 4000; i++) zero &= z[i] == 0;
  TAP_OK(zero && mi_heap_contains(heap, z), "mi_heap_zalloc is zeroed and in the heap");
  uint64_t *c = mi_heap_calloc(heap, 100, 8);
  TAP_OK(c != NULL && c[99] == 0, "mi_heap_calloc");
  errno = 0;
  volatile size_t huge_count = SIZE_MAX / 2;
  TAP_OK(mi_heap_calloc(heap, huge_count, 4) == NULL && errno == ENOMEM, "mi_heap_calloc overflow: NULL, ENOMEM");
  TAP_OK(mi_heap_mallocn(heap, huge_count, 4) == NULL, "mi_heap_mallocn overflow");
  char *r = mi_heap_malloc(heap, 10);
  memcpy(r, "0123456789", 10);
  r = mi_heap_realloc(heap, r, 5000);
  TAP_OK(r != NULL && memcmp(r, "0123456789", 10) == 0 && mi_heap_contains(heap, r),
         "mi_heap_realloc keeps contents, new block in the heap");
  uint8_t *rz = mi_heap_rezalloc(heap, mi_heap_zalloc(heap, 16), 3000);
  zero = 1;
  for (int i = 0; i < 3000; i++) zero &= rz[i] == 0;
  TAP_OK(zero, "mi_heap_rezalloc zeroes the grown part");
  uint8_t *rc = mi_heap_recalloc(heap, NULL, 50, 40);
  zero = rc != NULL;
  for (int i = 0; rc && i < 2000; i++) zero &= rc[i] == 0;
  TAP_OK(zero, "mi_heap_recalloc from NULL is zeroed");
  for (size_t al = 16; al <= (1u << 20); al <<= 2) {
    void *a = mi_heap_malloc_aligned(heap, 100, al);
    void *b = mi_heap_zalloc_aligned_at(heap, 200, al, 8);
    void *d = mi_heap_calloc_aligned(heap, 10, 10, al);
    TAP_OK(a && ((uintptr_t)a % al) == 0 && b && (((uintptr_t)b + 8) % al) == 0 && d && ((uintptr_t)d % al) == 0 &&
               mi_heap_contains(heap, a) && mi_heap_contains(heap, b) && mi_heap_contains(heap, d),
           "aligned variants honour alignment %zu and stay in the heap", al);
    a = mi_heap_realloc_aligned(heap, a, 5000, al);
    TAP_OK(a && ((uintptr_t)a % al) == 0 && mi_heap_contains(heap, a), "mi_heap_realloc_aligned %zu", al);
    uint8_t *e = mi_heap_rezalloc_aligned(heap, NULL, 300, al);
    zero = e != NULL;
    for (int i = 0; e && i < 300; i++) zero &= e[i] == 0;
    TAP_OK(zero && ((uintptr_t)e % al) == 0, "mi_heap_rezalloc_aligned %zu", al);
    void *f = mi_heap_recalloc_aligned(heap, NULL, 3, 100, al);
    TAP_OK(f && ((uintptr_t)f % al) == 0, "mi_heap_recalloc_aligned %zu", al);
  }
  void *big = mi_heap_malloc(heap, 8 << 20);
  TAP_OK(big && mi_heap_of(big) == heap && mi_heap_contains(heap, big), "huge blocks belong to their heap");
  void *m = mi_malloc(64);
  TAP_OK(mi_heap_of(m) == mi_heap_main() && !mi_heap_contains(heap, m) && mi_heap_contains(mi_heap_main(), m),
         "a block of the default heap is not in the new heap");
  TAP_OK(mi_check_owned(m) && mi_any_heap_contains(s) && !mi_any_heap_contains(&heap) && mi_heap_of(&zero) == NULL,
         "ownership queries: our blocks yes, a stack address no");
  TAP_OK(mi_heap_check_owned(heap, s) && mi_heap_contains_block(heap, s), "mi_heap_check_owned / contains_block");
  mi_free(m);
  TAP_OK(mi_heap_malloc(NULL, 8) == NULL, "a NULL heap gives NULL");
  mi_heap_destroy(heap);
}

/* ---- default heap ---- */

static void test_default(void) {
  mi_heap_t *heap = mi_heap_new();
  TAP_OK(mi_heap_get_default() == mi_heap_main() && mi_heap_get_backing() == mi_heap_main(),
         "the default heap starts as the main heap");
  mi_heap_t *old = mi_heap_set_default(heap);
  void *p = mi_malloc(100);
  void *q = malloc(100);
  TAP_OK(old == mi_heap_main() && mi_heap_get_default() == heap && mi_heap_of(p) == heap,
         "mi_heap_set_default: mi_malloc allocates from the new default");
  mi_heap_set_default(old);
  TAP_OK(mi_heap_of(mi_malloc(8)) == mi_heap_main(), "and back");
  (void)q;
  mi_heap_delete(heap);
  TAP_OK(mi_heap_of(p) == mi_heap_main(), "after mi_heap_delete its blocks belong to the main heap");
  mi_free(p);
}

/* ---- destroy: memory reusable, RSS drops ---- */

static void test_destroy_rss(void) {
  mi_collect(true);
  size_t before = rss_bytes();
  mi_heap_t *heap = mi_heap_new();
  size_t total = 0;
  for (int i = 0; total < (200u << 20); i++) {
    size_t size = i % 10 == 0 ? 300000 : 200 + (size_t)(i % 2000);
    char *p = mi_heap_malloc(heap, size);
    memset(p, 1, size);
    total += size;
  }
  for (int i = 0; i < 20; i++) memset(mi_heap_malloc(heap, 5 << 20), 2, 5 << 20);
  size_t full = rss_bytes();
  mi_heap_destroy(heap);
  mi_collect(true);
  size_t after = rss_bytes();
  tap_diag("rss before %zu MiB, with the heap %zu MiB, after destroy %zu MiB", before >> 20, full >> 20, after >> 20);
  TAP_OK(full > before + (250u << 20), "the heap's memory was resident");
  TAP_OK(after < before + (30u << 20), "after mi_heap_destroy and a forced collect RSS is back (%zu MiB above start)",
         (after > before ? after - before : 0) >> 20);
  /* and a new heap allocates after it */
  mi_heap_t *h2 = mi_heap_new();
  void *p = mi_heap_malloc(h2, 1000);
  TAP_OK(p != NULL && mi_heap_of(p) == h2, "a new heap allocates after a destroy");
  mi_heap_destroy(h2);
}

/* ---- delete from one thread, frees from another ---- */

typedef struct handoff_s {
  void **blocks;
  size_t n;
  size_t ok;
} handoff_t;

static void *free_elsewhere(void *arg) {
  handoff_t *h = arg;
  for (size_t i = 0; i < h->n; i++) {
    uint32_t *b = h->blocks[i];
    if (b[0] == (uint32_t)i && mi_heap_of(b) == mi_heap_main()) h->ok++;
    mi_free(b);
  }
  return NULL;
}

static void *alloc_and_delete(void *arg) {
  handoff_t *h = arg;
  mi_heap_t *heap = mi_heap_new();
  for (size_t i = 0; i < h->n; i++) {
    uint32_t *b = mi_heap_malloc(heap, 16 + (i % 700));
    b[0] = (uint32_t)i;
    h->blocks[i] = b;
  }
  mi_heap_delete(heap);
  return NULL;
}

static void test_delete_cross_thread(void) {
  static void *blocks[20000];
  handoff_t h = {.blocks = blocks, .n = 20000};
  pthread_t t;
  pthread_create(&t, NULL, alloc_and_delete, &h);
  pthread_join(t, NULL);
  pthread_create(&t, NULL, free_elsewhere, &h);
  pthread_join(t, NULL);
  TAP_OK(h.ok == h.n, "blocks of a heap deleted in one thread are valid and freed in another (%zu/%zu)", h.ok, h.n);
  /* and the memory comes back into use in this thread */
  void *p = mi_malloc(100);
  TAP_OK(p != NULL, "allocation after the hand-off");
  mi_free(p);
}

/* A heap used by two threads, destroyed by a third after they exit. */
static void *use_heap(void *arg) {
  mi_heap_t *heap = arg;
  for (int i = 0; i < 5000; i++) memset(mi_heap_malloc(heap, 100), 3, 100);
  return NULL;
}

static bool first_block(const mi_heap_t *h, const mi_heap_area_t *a, void *block, size_t s, void *arg) {
  (void)h; (void)a; (void)s;
  if (block == NULL) return true;
  *(void **)arg = block;
  return false;
}

static void test_destroy_after_threads(void) {
  mi_heap_t *heap = mi_heap_new();
  pthread_t t1, t2;
  pthread_create(&t1, NULL, use_heap, heap);
  pthread_create(&t2, NULL, use_heap, heap);
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  visit_t v = {.heap = heap};
  static void *none[1];
  static size_t seen[1];
  v.blocks = none;
  v.n = 0;
  v.seen = seen;
  mi_heap_visit_blocks(heap, true, visitor, &v);
  TAP_OK(v.visited == 10000, "a heap keeps the blocks of threads that exited (%zu of 10000 visited)", v.visited);
  /* a block the threads left behind: after the destroy it is not ours */
  void *left = NULL;
  mi_heap_visit_blocks(heap, true, first_block, &left);
  mi_heap_destroy(heap);
  TAP_OK(left != NULL && !mi_any_heap_contains(left),
         "destroying a heap whose threads exited gives their blocks back");
}

/* ---- arenas ---- */

/* A deleted heap of an exclusive arena leaves its live blocks to the main
 * heap, whose new blocks must still never come from that arena (the main
 * heap took in its segments for new pages once); when those blocks are
 * freed the arena's whole room serves its heaps again. */
#define EXCL_BLOCKS 20000
#define MAIN_BLOCKS 50000
static void test_exclusive_delete(mi_arena_id_t id, const uint8_t *base, size_t size) {
  static void *held[EXCL_BLOCKS], *mine[MAIN_BLOCKS];
  mi_heap_t *heap = mi_heap_new_in_arena(id);
  for (int i = 0; i < EXCL_BLOCKS; i++) held[i] = mi_heap_malloc(heap, 1000);
  for (int i = 0; i < EXCL_BLOCKS; i += 2) mi_free(held[i]);
  mi_heap_delete(heap);
  bool moved = mi_heap_of(held[1]) == mi_heap_main();
  int inside = 0;
  for (int i = 0; i < MAIN_BLOCKS; i++) {
    uint8_t *p = mine[i] = mi_malloc(64 + (size_t)(i % 900));
    inside += p >= base && p < base + size;
  }
  TAP_OK(moved && inside == 0,
         "after mi_heap_delete of a heap in an exclusive arena, the main heap owns its blocks and puts none of its "
         "own in the arena (%d of %d)", inside, MAIN_BLOCKS);
  for (int i = 0; i < MAIN_BLOCKS; i++) mi_free(mine[i]);
  for (int i = 1; i < EXCL_BLOCKS; i += 2) mi_free(held[i]);
  /* the main heap looks at the abandoned list again when it needs room */
  for (int i = 0; i < MAIN_BLOCKS; i++) mine[i] = mi_malloc(64 + (size_t)(i % 900));
  for (int i = 0; i < MAIN_BLOCKS; i++) mi_free(mine[i]);
  heap = mi_heap_new_in_arena(id);
  size_t got = 0;
  while (got < size / 1000 && mi_heap_malloc(heap, 1000) != NULL) got++;
  TAP_OK(got >= (size >> 20) * 900, "then a new heap in it fills the arena again (%zu blocks of 1000 bytes in %zu MiB)",
         got, size >> 20);
  mi_heap_destroy(heap);
}

static void test_arenas(void) {
  mi_arena_id_t id = 0;
  TAP_OK(mi_reserve_os_memory_ex(64 << 20, false, false, true, &id) == 0 && id != 0,
         "mi_reserve_os_memory_ex: an exclusive arena");
  size_t size = 0;
  uint8_t *base = mi_arena_area(id, &size);
  TAP_OK(base != NULL && size >= (64u << 20), "mi_arena_area reports it");
  mi_heap_t *heap = mi_heap_new_in_arena(id);
  TAP_OK(heap != NULL, "mi_heap_new_in_arena");
  int inside = 1;
  for (int i = 0; i < 1000; i++) {
    uint8_t *p = mi_heap_malloc(heap, 1000);
    inside &= p >= base && p < base + size;
  }
  TAP_OK(inside, "a heap in an exclusive arena allocates inside it");
  int outside = 1;
  for (int i = 0; i < 1000; i++) {
    uint8_t *p = mi_malloc(1000);
    outside &= !(p >= base && p < base + size);
  }
  TAP_OK(outside, "other heaps never allocate from an exclusive arena");
  void *big = mi_heap_malloc(heap, 100 << 20);
  TAP_OK(big == NULL, "an exclusive arena that is too small gives NULL, not other memory");
  mi_heap_destroy(heap);
  TAP_OK(mi_heap_new_in_arena(12345) == NULL, "an unknown arena id gives NULL");
  test_exclusive_delete(id, base, size);

  /* caller-provided memory */
  size_t len = 32 << 20;
  uint8_t *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  mi_arena_id_t mid = 0;
  TAP_OK(mi_manage_os_memory_ex(mem, len, true, false, false, -1, true, &mid) && mid != 0,
         "mi_manage_os_memory_ex takes caller memory");
  mi_heap_t *mh = mi_heap_new_in_arena(mid);
  int in_mem = 1;
  for (int i = 0; i < 100; i++) {
    uint8_t *p = mi_heap_malloc(mh, 2000);
    in_mem &= p >= mem && p < mem + len;
    memset(p, 5, 2000);
  }
  TAP_OK(in_mem, "a heap in managed memory allocates inside it");
  mi_heap_destroy(mh);
  TAP_OK(!mi_manage_os_memory(mem + 1, 100, true, false, false, -1), "memory without an aligned 4 MiB segment is refused");
  TAP_OK(mi_reserve_os_memory(8 << 20, false, false) == 0, "mi_reserve_os_memory (shared)");
}

/* ---- sub-processes ---- */

typedef struct sp_arg_s {
  mi_subproc_id_t sp;
  uint8_t *lo, *hi;      /* range of the blocks allocated */
  mi_heap_t *heap;
  mi_heap_t *main_heap;
} sp_arg_t;

static void *sp_thread(void *arg) {
  sp_arg_t *a = arg;
  mi_subproc_add_current_thread(a->sp);
  a->main_heap = mi_heap_main();
  a->heap = mi_heap_new();
  a->lo = (uint8_t *)UINTPTR_MAX;
  a->hi = NULL;
  for (int i = 0; i < 20000; i++) {
    uint8_t *p = i % 2 ? mi_malloc(64 + i % 500) : mi_heap_malloc(a->heap, 64 + i % 500);
    if (p < a->lo) a->lo = p;
    if (p > a->hi) a->hi = p;
    if (i % 3 == 0) mi_free(p);
  }
  return NULL;
}

static bool count_heaps(mi_heap_t *heap, void *arg) {
  (void)heap;
  (*(int *)arg)++;
  return true;
}

static void test_subproc(void) {
  mi_subproc_id_t sp = mi_subproc_new();
  TAP_OK(sp != NULL && sp != mi_subproc_main(), "mi_subproc_new");
  sp_arg_t a = {.sp = sp};
  pthread_t t;
  pthread_create(&t, NULL, sp_thread, &a);
  pthread_join(t, NULL);
  TAP_OK(a.main_heap != mi_heap_main(), "a thread in a sub-process has that sub-process's main heap");
  int heaps = 0;
  mi_subproc_visit_heaps(sp, count_heaps, &heaps);
  TAP_OK(heaps == 2, "mi_subproc_visit_heaps sees its main heap and the created one (%d)", heaps);
  /* isolation: nothing the main sub-process hands out now comes from the
   * other one's memory, even after its thread exited and left memory */
  int isolated = 1;
  void *mine[20000];
  for (int i = 0; i < 20000; i++) {
    uint8_t *p = mi_malloc(64 + i % 500);
    mine[i] = p;
    isolated &= mi_heap_of(p) == mi_heap_main() && !(p >= a.lo && p <= a.hi);
  }
  TAP_OK(isolated, "the main sub-process never allocates from another sub-process's memory");
  for (int i = 0; i < 20000; i++) mi_free(mine[i]);
  mi_subproc_destroy(sp);
  TAP_OK(!mi_any_heap_contains(a.lo) && mi_heap_of(a.hi) == NULL,
         "after mi_subproc_destroy its memory is no longer mialloc's");
  int main_heaps = 0;
  mi_subproc_visit_heaps(mi_subproc_main(), count_heaps, &main_heaps);
  TAP_OK(main_heaps >= 1, "the main sub-process still has its heaps");
}

/* A heap of another sub-process, used by this thread and deleted by its
 * creator: this thread's part of it is left orphaned, and released the
 * next time the thread looks for a heap's part.  Its live blocks belong
 * to the heap's sub-process (they sit in that one's arenas), and the
 * main sub-process must never take those segments in, which it did once
 * and then crashed when the other sub-process was destroyed.  Run in a
 * child so that a crash fails a check instead of ending the test. */
typedef struct orphan_arg_s {
  mi_subproc_id_t sp;
  mi_heap_t *heap, *main_heap;
  pthread_barrier_t step;
} orphan_arg_t;

static void *orphan_creator(void *arg) {
  orphan_arg_t *a = arg;
  mi_subproc_add_current_thread(a->sp);
  a->main_heap = mi_heap_main();
  a->heap = mi_heap_new();
  pthread_barrier_wait(&a->step);   /* the heap exists */
  pthread_barrier_wait(&a->step);   /* the other thread allocated from it */
  mi_heap_delete(a->heap);
  return NULL;
}

#define ORPHAN_BLOCKS 100
static int orphan_child(void) {
  orphan_arg_t a = {.sp = mi_subproc_new()};
  pthread_t t;
  pthread_barrier_init(&a.step, NULL, 2);
  if (a.sp == NULL || pthread_create(&t, NULL, orphan_creator, &a) != 0) return 3;
  pthread_barrier_wait(&a.step);
  void *held[ORPHAN_BLOCKS];
  for (int i = 0; i < ORPHAN_BLOCKS; i++) {
    held[i] = mi_heap_malloc(a.heap, 1000);
    if (held[i] != NULL) memset(held[i], 1, 1000);
  }
  pthread_barrier_wait(&a.step);
  pthread_join(t, NULL);
  mi_heap_t *other = mi_heap_new();
  mi_free(mi_heap_malloc(other, 100));   /* the walk for its part releases the orphan */
  bool owner_ok = mi_heap_of(held[0]) == a.main_heap;
  for (int i = 0; i < ORPHAN_BLOCKS; i++) mi_free(held[i]);
  mi_subproc_destroy(a.sp);
  /* the main sub-process needs pages now, and looks for abandoned ones */
  static unsigned char *blocks[20000];
  bool data_ok = true;
  for (int i = 0; i < 20000; i++) {
    blocks[i] = mi_malloc(1000 + (size_t)(i % 50) * 64);
    if (blocks[i] == NULL) return 4;
    memset(blocks[i], i & 0xff, 1000);
  }
  for (int i = 0; i < 20000; i++) {
    data_ok &= blocks[i][999] == (i & 0xff);
    mi_free(blocks[i]);
  }
  mi_heap_delete(other);
  return !data_ok ? 5 : !owner_ok ? 2 : 0;
}

static void test_subproc_orphan(void) {
  pid_t pid = fork();
  if (pid == 0) _exit(orphan_child());
  int status = 0;
  bool waited = pid > 0 && waitpid(pid, &status, 0) == pid;
  bool ran = waited && WIFEXITED(status);
  int code = ran ? WEXITSTATUS(status) : -1;
  TAP_OK(ran && code != 3 && code != 4 && code != 5,
         "a thread's part of another sub-process's deleted heap: the process runs on after that sub-process is destroyed (%s %d)",
         ran ? "exit status" : "signal", ran ? code : (waited && WIFSIGNALED(status) ? WTERMSIG(status) : -1));
  TAP_OK(ran && code == 0, "its live blocks went to that sub-process's main heap (exit status %d)", code);
}

/* A thread that joins a sub-process after it allocated: its blocks stay
 * valid and stay with the main heap of the sub-process it left
 * (mialloc(3)), and what it allocates next comes from the new one's. */
typedef struct late_arg_s {
  mi_subproc_id_t sp;
  mi_heap_t *old_main;
  bool kept, moved;
} late_arg_t;

static void *join_late(void *arg) {
  late_arg_t *a = arg;
  unsigned char *p = mi_malloc(100);
  if (p != NULL) memset(p, 7, 100);
  mi_subproc_add_current_thread(a->sp);
  unsigned char *q = mi_malloc(100);
  a->kept = p != NULL && p[99] == 7 && mi_heap_of(p) == a->old_main;
  a->moved = q != NULL && mi_heap_of(q) == mi_heap_main() && mi_heap_main() != a->old_main;
  mi_free(p);
  mi_free(q);
  return NULL;
}

static void test_subproc_late_join(void) {
  late_arg_t a = {.sp = mi_subproc_new(), .old_main = mi_heap_main()};
  pthread_t t;
  bool ran = a.sp != NULL && pthread_create(&t, NULL, join_late, &a) == 0;
  if (ran) pthread_join(t, NULL);
  TAP_OK(ran && a.kept && a.moved,
         "a thread joining a sub-process after it allocated keeps its blocks in the old main heap (%d) and allocates "
         "from the new one's (%d)", a.kept, a.moved);
  if (a.sp != NULL) mi_subproc_destroy(a.sp);
}

/* A sub-process with many heaps, visited from a thread with a small stack:
 * the walk's copy of the list must not live on the stack (20,000 heaps
 * are 160 KB of pointers, the thread has 64 KiB). */
#define MANY_HEAPS 20000
typedef struct {
  int before, after;
  bool visit_ok;
} many_arg_t;

static void *visit_on_small_stack(void *arg) {
  many_arg_t *m = arg;
  m->visit_ok = mi_subproc_visit_heaps(mi_subproc_main(), count_heaps, &m->after);
  return NULL;
}

static void test_many_heaps(void) {
  many_arg_t m = {0, 0, false};
  mi_subproc_visit_heaps(mi_subproc_main(), count_heaps, &m.before);
  static mi_heap_t *heaps[MANY_HEAPS];
  size_t made = 0;
  for (size_t i = 0; i < MANY_HEAPS && (heaps[i] = mi_heap_new()) != NULL; i++) made++;
  TAP_OK(made == MANY_HEAPS, "%d heaps created (%zu)", MANY_HEAPS, made);
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 64 * 1024);
  pthread_t t;
  bool started = pthread_create(&t, &attr, visit_on_small_stack, &m) == 0;
  if (started) pthread_join(t, NULL);
  pthread_attr_destroy(&attr);
  TAP_OK(started && m.visit_ok && m.after == m.before + (int)made,
         "mi_subproc_visit_heaps on a 64 KiB stack sees every heap (%d of %d)", m.after, m.before + (int)made);
  for (size_t i = 0; i < made; i++) mi_heap_delete(heaps[i]);
  int left = 0;
  mi_subproc_visit_heaps(mi_subproc_main(), count_heaps, &left);
  TAP_OK(left == m.before, "deleted heaps are no longer visited (%d, %d before)", left, m.before);
}

/* ---- misuse ---- */

static int last_err;
static void on_error(int err, void *arg) {
  (void)arg;
  last_err = err;
}

static void test_misuse(void) {
  mi_register_error(on_error, NULL);
  last_err = 0;
  mi_heap_destroy(mi_heap_main());
  TAP_OK(last_err == EINVAL, "destroying the main heap is refused with EINVAL");
  last_err = 0;
  mi_heap_delete(mi_heap_main());
  TAP_OK(last_err == EINVAL && mi_malloc(10) != NULL, "deleting the main heap is refused; malloc works");
  mi_subproc_destroy(mi_subproc_main());
  TAP_OK(last_err == EINVAL, "destroying the main sub-process is refused");
  last_err = 0;
  mi_heap_delete(NULL);
  mi_heap_destroy(NULL);
  TAP_OK(last_err == 0 && mi_malloc(10) != NULL, "NULL heaps are ignored by delete/destroy, without an error");
  mi_register_error(NULL, NULL);
}

int main(void) {
  test_visit();
  test_visit_stop();
  test_family();
  test_default();
  test_destroy_rss();
  test_delete_cross_thread();
  test_destroy_after_threads();
  test_arenas();
  test_subproc();
  test_subproc_orphan();
  test_subproc_late_join();
  test_many_heaps();
  test_misuse();
  return tap_done();
}

/* test-thin.c -- thinning (src/thin.c): a sparse page gives its free OS
 * pages back to the system while it keeps its live blocks, holds the free
 * blocks that touch them off its lists, reports a second free of one of
 * those, and hands them all out again (each once) when its size class
 * needs the memory.  Release builds only: the others check or fill freed
 * memory, which a purge would zero. */
#include "internal.h"
#include "tls.h"
#include "../tap.h"
#include "../errors.h"

#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>

#define SIZE 1200            /* a size class only this test uses: 1280-byte blocks */
#define COUNT (51 * 40)      /* 51 blocks fill a 64 KiB page: 40 pages */
#define KEEP_ONE_IN 25       /* 2 survivors a page: sparse enough to thin */
#define SURVIVORS ((COUNT + KEEP_ONE_IN - 1) / KEEP_ONE_IN)

static void *blocks[COUNT];
static void *again[COUNT];

static bool kept(size_t i) { return i % KEEP_ONE_IN == 0; }

static void fill(void *p, size_t tag) { memset(p, (int)(tag * 7 + 1) & 0xff, SIZE); }

static bool intact(const void *p, size_t tag) {
  const unsigned char *c = p;
  for (size_t j = 0; j < SIZE; j++)
    if (c[j] != ((tag * 7 + 1) & 0xff)) return false;
  return true;
}

/* are all the OS pages of the block at p resident? */
static bool resident(const void *p) {
  size_t ps = mia_prim_page_size();
  uintptr_t first = (uintptr_t)p & ~(uintptr_t)(ps - 1);
  uintptr_t last = ((uintptr_t)p + mia_bin_size[mia_bin_of(SIZE)] - 1) & ~(uintptr_t)(ps - 1);
  for (uintptr_t a = first; a <= last; a += ps) {
    unsigned char vec = 0;
    if (mincore((void *)a, ps, &vec) != 0 || !(vec & 1)) return false;
  }
  return true;
}

/* is p inside one of the 64 KiB slices the first round's blocks were in? */
static bool in_old_pages(const void *p) {
  for (size_t i = 0; i < COUNT; i++)
    if (((uintptr_t)blocks[i] >> MIA_SLICE_SHIFT) == ((uintptr_t)p >> MIA_SLICE_SHIFT)) return true;
  return false;
}

static bool is_survivor(const void *p) {
  for (size_t i = 0; i < COUNT; i += KEEP_ONE_IN)
    if (blocks[i] == p) return true;
  return false;
}

typedef struct { size_t live; } visit_t;

static bool count_live(const mi_heap_t *heap, const mi_heap_area_t *area, void *block, size_t size, void *arg) {
  (void)heap, (void)size;
  if (block != NULL && area->block_size == mia_bin_size[mia_bin_of(SIZE)]) ((visit_t *)arg)->live++;
  return true;
}

static void *free_in_thread(void *arg) {
  mi_free(arg);
  return NULL;
}

/* ---- stress: phases of size ranges in threads that free each other's
 * blocks, with a thinning round at every fresh page (purge delay 0) ---- */
#define STRESS_THREADS 4
#define STRESS_LIVE 4000
#define STRESS_PHASES 12
#define STRESS_SLOTS 64

typedef struct {
  uint32_t tag;
  uint32_t size;
} obj_t;

static _Atomic(obj_t *) mailbox[STRESS_THREADS][STRESS_SLOTS];
static _Atomic(int) corrupted;

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

static obj_t *obj_new(size_t size, uint32_t tag) {
  obj_t *o = mi_malloc(size);
  if (o == NULL) abort();
  o->tag = tag;
  o->size = (uint32_t)size;
  memset(o + 1, (int)(tag & 0xff), size - sizeof *o);
  return o;
}

static void obj_free(obj_t *o) {
  const unsigned char *c = (const unsigned char *)(o + 1);
  for (size_t i = 0; i < o->size - sizeof *o; i++)
    if (c[i] != (o->tag & 0xff)) {
      atomic_fetch_add(&corrupted, 1);
      break;
    }
  mi_free(o);
}

/* each phase: fill, churn, then keep 1 in 64 and send 1 in 8 to another
 * thread's mailbox; sizes cycle, so thinned pages are re-admitted */
static void *stress_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t seed = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
  static __thread obj_t *live[STRESS_LIVE];
  obj_t **kept_objs = malloc(sizeof(obj_t *) * STRESS_LIVE);
  size_t nkept = 0;
  uint32_t tag = (uint32_t)id << 24;
  static const size_t lo[4] = {600, 2000, 9000, 300};
  for (int ph = 0; ph < STRESS_PHASES; ph++) {
    size_t a = lo[ph % 4], span = 3 * a;
    for (int i = 0; i < STRESS_LIVE; i++) live[i] = obj_new(a + next_rand(&seed) % span, ++tag);
    for (int c = 0; c < STRESS_LIVE; c++) {
      int i = (int)(next_rand(&seed) % STRESS_LIVE);
      obj_free(live[i]);
      live[i] = obj_new(a + next_rand(&seed) % span, ++tag);
    }
    for (int i = 0; i < STRESS_LIVE; i++) {
      uint64_t r = next_rand(&seed) % 64;
      if (r == 0 && nkept < STRESS_LIVE) {
        kept_objs[nkept++] = live[i];
      } else if (r < 8) {
        size_t to = next_rand(&seed) % STRESS_THREADS, slot = next_rand(&seed) % STRESS_SLOTS;
        obj_t *old = atomic_exchange(&mailbox[to][slot], live[i]);
        if (old != NULL) obj_free(old);
      } else {
        obj_free(live[i]);
      }
    }
    for (int k = 0; k < 40 && nkept > 0; k++) {
      size_t i = next_rand(&seed) % nkept;
      obj_free(kept_objs[i]);
      kept_objs[i] = kept_objs[--nkept];
    }
  }
  for (size_t i = 0; i < nkept; i++) obj_free(kept_objs[i]);
  free(kept_objs);
  return NULL;
}

/* ---- the time budget: the rounds that run as the heap grows stop
 * thinning while their system calls have taken more than their share of
 * the thread's time, and thin again once time has topped it up; mi_collect
 * thins regardless.  Held blocks tell thinning apart from other purges
 * (the purge thread may return free slices meanwhile). ---- */
#define BUDGET_COUNT 600

/* n blocks of a size class this test uses nowhere else, all freed but
 * one in KEEP_ONE_IN */
static void budget_pattern(void **b, size_t size) {
  for (size_t i = 0; i < BUDGET_COUNT; i++) {
    b[i] = mi_malloc(size);
    memset(b[i], 0x5a, size);
  }
  for (size_t i = 0; i < BUDGET_COUNT; i++)
    if (!kept(i)) mi_free(b[i]);
}

static size_t held_count(void *const *b) {
  size_t n = 0;
  for (size_t i = 0; i < BUDGET_COUNT; i++) {
    const mia_page_t *page = kept(i) ? NULL : mia_page_of(b[i]);
    n += page != NULL && mia_page_block_held(page, b[i]);
  }
  return n;
}

/* overspent by 1 ms, just now: 40 ms to wait */
static void budget_spend(mia_theap_t *theap) {
  theap->thin_budget = -1000 * 1000;
  theap->thin_budget_at = mia_prim_clock_ns();
}

static void budget_checks(void) {
  static void *b1[BUDGET_COUNT], *b2[BUDGET_COUNT];
  mia_theap_t *theap = mia_theap_get();

  /* two rounds in a row: what a page needs to be thinned by them */
  budget_pattern(b1, 3000);
  budget_spend(theap);
  mia_theap_thin(theap, false);
  mia_theap_thin(theap, false);
  TAP_OK(held_count(b1) == 0 && theap->thin_budget <= 0, "with thinning's time budget spent, two rounds thin nothing (%zu held)",
         held_count(b1));

  /* 1/MIA_THIN_BUDGET_DIV of the time gone by comes back, up to the cap:
   * ten seconds later it is full, less what the rounds' calls take */
  theap->thin_budget = 0;
  theap->thin_budget_at -= (uint64_t)10 * 1000 * 1000 * 1000;
  mia_theap_thin(theap, false);
  mia_theap_thin(theap, false);
  TAP_OK(held_count(b1) > 0, "ten seconds later it has refilled, and two rounds thin (%zu blocks held)", held_count(b1));
  /* not "> 0": on a loaded machine the calls may take more than the whole
   * budget (madvise has taken 350 us a call on this project's VM) */
  TAP_OK(theap->thin_budget < MIA_THIN_BUDGET_MAX,
         "their system calls were charged to it (%lld ns left of %lld)", (long long)theap->thin_budget,
         (long long)MIA_THIN_BUDGET_MAX);

  budget_pattern(b2, 3500);
  budget_spend(theap);
  mi_collect(true);
  TAP_OK(held_count(b2) > 0, "mi_collect thins with the budget spent (%zu blocks held)", held_count(b2));

  for (size_t i = 0; i < BUDGET_COUNT; i += KEEP_ONE_IN) {
    mi_free(b1[i]);
    mi_free(b2[i]);
  }
  mi_collect(true);
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = (uintptr_t) * (void *const *)a, y = (uintptr_t) * (void *const *)b;
  return x < y ? -1 : x > y;
}

int main(void) {
#if !MIA_THIN
  printf("1..0 # SKIP thinning is a release-build feature (secure, debug and tools builds keep freed memory)\n");
  return 0;
#endif
  mi_option_set(mi_option_guarded_sample_rate, 0);
  mi_register_error(on_error, NULL);
  mi_thread_init();
  mia_theap_split_groups(mia_theap_get());   /* the pages hold one size each */

  /* MIALLOC_PAGE_THIN=0: the same pattern purges nothing inside pages */
  mi_option_disable(mi_option_page_thin);
  for (size_t i = 0; i < COUNT; i++) blocks[i] = mi_malloc(SIZE);
  for (size_t i = 0; i < COUNT; i++)
    if (!kept(i)) mi_free(blocks[i]);
  mi_collect(true);
  size_t off_resident = 0;
  for (size_t i = 0; i < COUNT; i++) off_resident += !kept(i) && resident(blocks[i]);
  TAP_OK(off_resident == COUNT - SURVIVORS, "with mi_option_page_thin off, the freed blocks stay resident (%zu of %zu)", off_resident,
         (size_t)(COUNT - SURVIVORS));
  for (size_t i = 0; i < COUNT; i += KEEP_ONE_IN) mi_free(blocks[i]);
  mi_collect(true);
  mi_option_enable(mi_option_page_thin);

  for (size_t i = 0; i < COUNT; i++) {
    blocks[i] = mi_malloc(SIZE);
    fill(blocks[i], i);
  }
  for (size_t i = 0; i < COUNT; i++)
    if (!kept(i)) mi_free(blocks[i]);

  /* the free memory was written: resident before */
  size_t free_resident = 0, candidates = 0;
  for (size_t i = 0; i < COUNT; i++) free_resident += !kept(i) && resident(blocks[i]);
  TAP_OK(free_resident > COUNT / 2, "before: the freed blocks' memory is resident (%zu)", free_resident);

  int before = atomic_load(&errors);
  int64_t purged = mia_stats_global.purged_bytes;
  mi_collect(true);

  /* OS pages no survivor touches are gone, except in the page malloc uses */
  size_t gone = 0;
  for (size_t i = 0; i < COUNT; i++) {
    if (kept(i)) continue;
    mia_page_t *page = mia_page_of(blocks[i]);
    if (page == NULL || mia_page_block_held(page, blocks[i]) != !resident(blocks[i])) {
      candidates = SIZE_MAX;   /* a held block must be exactly a purged one */
      break;
    }
    candidates++;
    gone += !resident(blocks[i]);
  }
  TAP_OK(candidates != SIZE_MAX, "every freed block is held exactly when its memory was purged");
  TAP_OK(gone * 2 > candidates, "after mi_collect: most freed blocks' memory is purged (%zu of %zu)", gone, candidates);
  TAP_OK(mia_stats_global.purged_bytes - purged >= (int64_t)(gone / 4) * 4096,
         "the statistics count the purged bytes (%lld)", (long long)(mia_stats_global.purged_bytes - purged));
  bool ok = true;
  for (size_t i = 0; i < COUNT; i += KEEP_ONE_IN) ok = ok && resident(blocks[i]) && intact(blocks[i], i);
  TAP_OK(ok, "the survivors stay resident and keep their contents");
  visit_t v = {0};
  mi_heap_visit_blocks(mi_heap_get_default(), true, count_live, &v);
  TAP_OK(v.live == SURVIVORS, "a heap walk sees the survivors as the only live blocks (%zu)", v.live);
  TAP_OK(atomic_load(&errors) == before, "no error so far");

  /* a second free of a held block: reported, ignored */
  void *held = NULL;
  for (size_t i = 0; i < COUNT && held == NULL; i++)
    if (!kept(i) && !resident(blocks[i])) held = blocks[i];
  before = atomic_load(&errors);
  mi_free(held);
  TAP_OK(held != NULL && atomic_load(&errors) == before + 1 && atomic_load(&last_error) == EAGAIN,
         "a second free of a held block is reported with EAGAIN");
  void *held2 = NULL;
  for (size_t i = COUNT; i-- > 0 && held2 == NULL;)
    if (!kept(i) && !resident(blocks[i]) && blocks[i] != held) held2 = blocks[i];
  before = atomic_load(&errors);
  pthread_t t;
  if (pthread_create(&t, NULL, free_in_thread, held2) != 0 || pthread_join(t, NULL) != 0) abort();
  TAP_OK(held2 != NULL && atomic_load(&errors) == before + 1 && atomic_load(&last_error) == EAGAIN,
         "and so is one from another thread");

  /* a survivor freed by another thread while its page holds blocks */
  before = atomic_load(&errors);
  void *remote = blocks[KEEP_ONE_IN * 3];
  if (pthread_create(&t, NULL, free_in_thread, remote) != 0 || pthread_join(t, NULL) != 0) abort();
  TAP_OK(atomic_load(&errors) == before, "a survivor freed by another thread is not an error");

  /* the size class needs memory again: the held blocks come back first */
  size_t n = COUNT - SURVIVORS + 1;   /* every free block, the remote one too */
  bool inside = true, not_live = true;
  for (size_t i = 0; i < n; i++) {
    again[i] = mi_malloc(SIZE);
    inside = inside && again[i] != NULL && in_old_pages(again[i]);
    not_live = not_live && (!is_survivor(again[i]) || again[i] == remote);
    if (again[i] != NULL) memset(again[i], 0xa5, SIZE);
  }
  TAP_OK(inside, "%zu blocks of the size class come from the thinned pages, no fresh page", n);
  TAP_OK(not_live, "none of them is a live survivor");
  qsort(again, n, sizeof again[0], cmp_ptr);
  bool once = true;
  for (size_t i = 1; i < n; i++) once = once && again[i] != again[i - 1];
  TAP_OK(once, "each is handed out once");
  ok = true;
  for (size_t i = 0; i < COUNT; i += KEEP_ONE_IN)
    if (blocks[i] != remote) ok = ok && intact(blocks[i], i);
  TAP_OK(ok, "the survivors still keep their contents");

  before = atomic_load(&errors);
  for (size_t i = 0; i < n; i++) mi_free(again[i]);
  for (size_t i = 0; i < COUNT; i += KEEP_ONE_IN)
    if (blocks[i] != remote) mi_free(blocks[i]);
  TAP_OK(atomic_load(&errors) == before, "freeing everything is not an error");
  v.live = 0;
  mi_heap_visit_blocks(mi_heap_get_default(), true, count_live, &v);
  TAP_OK(v.live == 0, "and no block of the size class is live afterwards (%zu)", v.live);

  budget_checks();

  before = atomic_load(&errors);
  purged = mia_stats_global.purged_bytes;
  mi_option_set(mi_option_purge_delay, 0);
  pthread_t threads[STRESS_THREADS];
  for (int i = 0; i < STRESS_THREADS; i++)
    if (pthread_create(&threads[i], NULL, stress_thread, (void *)(intptr_t)i) != 0) abort();
  for (int i = 0; i < STRESS_THREADS; i++) pthread_join(threads[i], NULL);
  for (int i = 0; i < STRESS_THREADS; i++)
    for (int j = 0; j < STRESS_SLOTS; j++) {
      obj_t *o = atomic_exchange(&mailbox[i][j], NULL);
      if (o != NULL) obj_free(o);
    }
  TAP_OK(mia_stats_global.purged_bytes > purged, "stress: %d threads through %d phases of cycling sizes, memory purged meanwhile",
         STRESS_THREADS, STRESS_PHASES);
  TAP_OK(atomic_load(&corrupted) == 0, "every block kept its contents, across threads and re-admissions (%d bad)",
         atomic_load(&corrupted));
  TAP_OK(atomic_load(&errors) == before, "and nothing was reported (%d)", atomic_load(&errors) - before);
  return tap_done();
}

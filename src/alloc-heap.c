/* alloc-heap.c -- the mi_heap_ allocation family and block visiting.
 *
 * Each call finds the calling thread's part of the heap (one compare when
 * the heap is the thread's default) and then runs the same paths as the
 * mi_ names.  A NULL heap, or one whose part cannot be set up, gives NULL
 * with errno ENOMEM.
 */
#include "internal.h"
#include "fastpath.h"

static mia_theap_t *mia_theap_for(mi_heap_t *heap) {
  mia_theap_t *theap = heap == NULL ? NULL : mia_heap_theap(heap);
  if (mia_unlikely(theap == NULL)) errno = ENOMEM;
  return theap;
}

static bool mia_total(size_t count, size_t size, size_t *total) {
  if (mia_unlikely(__builtin_mul_overflow(count, size, total))) {
    errno = ENOMEM;
    return false;
  }
  return true;
}

mia_export void *mi_heap_malloc(mi_heap_t *heap, size_t size) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_theap_malloc(theap, size, false);
}

mia_export void *mi_heap_zalloc(mi_heap_t *heap, size_t size) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_theap_malloc(theap, size, true);
}

mia_export void *mi_heap_malloc_small(mi_heap_t *heap, size_t size) { return mi_heap_malloc(heap, size); }
mia_export void *mi_heap_zalloc_small(mi_heap_t *heap, size_t size) { return mi_heap_zalloc(heap, size); }

mia_export void *mi_heap_calloc(mi_heap_t *heap, size_t count, size_t size) {
  size_t total;
  return mia_total(count, size, &total) ? mi_heap_zalloc(heap, total) : NULL;
}

mia_export void *mi_heap_mallocn(mi_heap_t *heap, size_t count, size_t size) {
  size_t total;
  return mia_total(count, size, &total) ? mi_heap_malloc(heap, total) : NULL;
}

mia_export void *mi_heap_realloc(mi_heap_t *heap, void *p, size_t newsize) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_realloc_zero(theap, p, newsize, false);
}

mia_export void *mi_heap_reallocn(mi_heap_t *heap, void *p, size_t count, size_t size) {
  size_t total;
  return mia_total(count, size, &total) ? mi_heap_realloc(heap, p, total) : NULL;
}

mia_export void *mi_heap_reallocf(mi_heap_t *heap, void *p, size_t newsize) {
  void *newp = mi_heap_realloc(heap, p, newsize);
  if (newp == NULL && p != NULL) mi_free(p);
  return newp;
}

mia_export void *mi_heap_rezalloc(mi_heap_t *heap, void *p, size_t newsize) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_realloc_zero(theap, p, newsize, true);
}

mia_export void *mi_heap_recalloc(mi_heap_t *heap, void *p, size_t count, size_t size) {
  size_t total;
  return mia_total(count, size, &total) ? mi_heap_rezalloc(heap, p, total) : NULL;
}

mia_export char *mi_heap_strdup(mi_heap_t *heap, const char *s) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_strdup(theap, s);
}

mia_export char *mi_heap_strndup(mi_heap_t *heap, const char *s, size_t n) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_strndup(theap, s, n);
}

mia_export char *mi_heap_realpath(mi_heap_t *heap, const char *fname, char *resolved_name) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_realpath(theap, fname, resolved_name);
}

/* ---- aligned ---- */

mia_export void *mi_heap_malloc_aligned_at(mi_heap_t *heap, size_t size, size_t alignment, size_t offset) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_malloc_aligned(theap, size, alignment, offset, false);
}

mia_export void *mi_heap_malloc_aligned(mi_heap_t *heap, size_t size, size_t alignment) {
  return mi_heap_malloc_aligned_at(heap, size, alignment, 0);
}

mia_export void *mi_heap_zalloc_aligned_at(mi_heap_t *heap, size_t size, size_t alignment, size_t offset) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_malloc_aligned(theap, size, alignment, offset, true);
}

mia_export void *mi_heap_zalloc_aligned(mi_heap_t *heap, size_t size, size_t alignment) {
  return mi_heap_zalloc_aligned_at(heap, size, alignment, 0);
}

mia_export void *mi_heap_calloc_aligned_at(mi_heap_t *heap, size_t count, size_t size, size_t alignment,
                                           size_t offset) {
  size_t total;
  return mia_total(count, size, &total) ? mi_heap_zalloc_aligned_at(heap, total, alignment, offset) : NULL;
}

mia_export void *mi_heap_calloc_aligned(mi_heap_t *heap, size_t count, size_t size, size_t alignment) {
  return mi_heap_calloc_aligned_at(heap, count, size, alignment, 0);
}

mia_export void *mi_heap_realloc_aligned_at(mi_heap_t *heap, void *p, size_t newsize, size_t alignment,
                                            size_t offset) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_realloc_aligned(theap, p, newsize, alignment, offset, false);
}

mia_export void *mi_heap_realloc_aligned(mi_heap_t *heap, void *p, size_t newsize, size_t alignment) {
  return mi_heap_realloc_aligned_at(heap, p, newsize, alignment, 0);
}

mia_export void *mi_heap_rezalloc_aligned_at(mi_heap_t *heap, void *p, size_t newsize, size_t alignment,
                                             size_t offset) {
  mia_theap_t *theap = mia_theap_for(heap);
  return theap == NULL ? NULL : mia_realloc_aligned(theap, p, newsize, alignment, offset, true);
}

mia_export void *mi_heap_rezalloc_aligned(mi_heap_t *heap, void *p, size_t newsize, size_t alignment) {
  return mi_heap_rezalloc_aligned_at(heap, p, newsize, alignment, 0);
}

mia_export void *mi_heap_recalloc_aligned_at(mi_heap_t *heap, void *p, size_t count, size_t size,
                                             size_t alignment, size_t offset) {
  size_t total;
  return mia_total(count, size, &total) ? mi_heap_rezalloc_aligned_at(heap, p, total, alignment, offset)
                                        : NULL;
}

mia_export void *mi_heap_recalloc_aligned(mi_heap_t *heap, void *p, size_t count, size_t size,
                                          size_t alignment) {
  return mi_heap_recalloc_aligned_at(heap, p, count, size, alignment, 0);
}

/* ---- visiting ---- */

typedef struct mia_visit_s {
  const mi_heap_t *heap;
  bool all;
  mi_block_visit_fun *visitor;
  void *arg;
  mi_heap_area_t area;
} mia_visit_t;

static bool mia_visit_block(mia_page_t *page, void *block, void *arg) {
  mia_visit_t *v = arg;
  void *p = mia_prof_user_pointer(page, block);
  return v->visitor(v->heap, &v->area, p, v->area.block_size, v->arg);
}

static bool mia_visit_page(mia_page_t *page, void *arg) {
  mia_visit_t *v = arg;
  if (page->block_size == 0) return true;
  size_t live = mia_page_live_count(page);
  v->area.blocks = page->start;
  v->area.reserved = (size_t)page->reserved * page->block_size;
  v->area.committed = (size_t)page->capacity * page->block_size;
  v->area.used = live;
  v->area.block_size = page->block_size;
  v->area.full_block_size = page->block_size;
  v->area.heap_tag = v->heap->tag;
  if (!v->visitor(v->heap, &v->area, NULL, 0, v->arg)) return false;
  if (!v->all || live == 0) return true;
  return mia_page_visit_live(page, mia_visit_block, v);
}

static bool mia_visit_segment_list(mia_segment_t *seg, mia_visit_t *v) {
  bool stop = false;
  for (; seg != NULL && !stop; seg = seg->next) mia_segment_visit_pages(seg, mia_visit_page, v, &stop);
  return !stop;
}

/* Abandoned segments: the list is taken off under its lock and walked
 * without it, so no thread adopts a segment mid-walk and the visitor may
 * allocate; threads wanting one meanwhile find none and claim fresh ones.
 * Then it goes back in front of what was abandoned meanwhile (the list is
 * singly linked: prev is unused there). */
bool mia_visit_abandoned(mi_heap_t *heap, bool visit_all_blocks, mi_block_visit_fun *visitor, void *arg) {
  mia_segment_t **list = heap->is_main ? &heap->subproc->abandoned : &heap->abandoned;
  mia_lock_t *lock = heap->is_main ? &heap->subproc->lock : &heap->lock;
  mia_lock(lock);
  mia_segment_t *segs = *list;
  *list = NULL;
  mia_unlock(lock);
  if (segs == NULL) return true;
  mia_visit_t v = {.heap = heap, .all = visit_all_blocks, .visitor = visitor, .arg = arg};
  bool ok = mia_visit_segment_list(segs, &v);
  mia_segment_t *tail = segs;
  while (tail->next != NULL) tail = tail->next;
  mia_lock(lock);
  tail->next = *list;
  *list = segs;
  mia_unlock(lock);
  return ok;
}

/* The threads' segments, the abandoned ones, the guarded slots, then the
 * huge blocks: the parts of a visit once the heap's lists are copied. */
static bool mia_visit_heap_parts(mi_heap_t *heap, mia_visit_t *v, const mia_snapshot_t *tlds,
                                 mia_segment_t *const *huge, size_t nhuge, bool more_huge) {
  for (size_t i = 0; i < tlds->count; i++) {
    const mia_tld_t *tld = tlds->items[i];
    if (!mia_visit_segment_list(tld->segments, v)) return false;
    if (!mia_visit_segment_list(tld->segments_full, v)) return false;
  }
  if (!mia_visit_segment_list(heap->is_main ? heap->subproc->abandoned : heap->abandoned, v)) return false;
  if (heap == &mia_subproc_main.heap_main && !mia_guarded_visit(heap, v->all, v->visitor, v->arg)) return false;
  if (more_huge) {
    /* many huge blocks: walk the list itself (the visitor must not free them) */
    for (mia_segment_t *s = heap->huge; s != NULL; s = s->next)
      if (!mia_visit_page(&s->pages[1], v)) return false;
    return true;
  }
  for (size_t i = 0; i < nhuge; i++)
    if (!mia_visit_page(&huge[i]->pages[1], v)) return false;
  return true;
}

static size_t mia_heap_thread_count(const void *heap) {
  size_t n = 0;
  for (const mia_theap_t *t = ((const mi_heap_t *)heap)->theaps; t != NULL; t = t->heap_next) n++;
  return n;
}

/* The heap's lists change when threads allocate: visiting is exact for a
 * heap no other thread uses meanwhile, and never crashes otherwise as long
 * as no thread exits or destroys the heap during the visit. */
mia_export bool mi_heap_visit_blocks(const mi_heap_t *cheap, bool visit_all_blocks,
                                     mi_block_visit_fun *visitor, void *arg) {
  if (cheap == NULL || visitor == NULL) return false;
  mi_heap_t *heap = (mi_heap_t *)cheap;
  mia_visit_t v = {.heap = heap, .all = visit_all_blocks, .visitor = visitor, .arg = arg};
  /* the calling thread's own blocks freed by others are collected first */
  mia_theap_t *own = mia_heap_theap(heap);
  if (own != NULL) mia_theap_process_remote(own);
  mia_snapshot_t tlds;
  mia_snapshot_init(&tlds);
  if (!mia_snapshot_lock(&tlds, &heap->lock, mia_heap_thread_count, heap, "mi_heap_visit_blocks", "threads"))
    return false;
  for (mia_theap_t *t = heap->theaps; t != NULL; t = t->heap_next) tlds.items[tlds.count++] = t->tld;
  mia_segment_t *huge[64];
  size_t nhuge = 0;
  for (mia_segment_t *s = heap->huge; s != NULL && nhuge < 64; s = s->next) huge[nhuge++] = s;
  bool more_huge = nhuge == 64;
  mia_unlock(&heap->lock);
  bool ok = mia_visit_heap_parts(heap, &v, &tlds, huge, nhuge, more_huge);
  mia_snapshot_done(&tlds);
  return ok;
}

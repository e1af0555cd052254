/* subproc.c -- sub-processes: isolated allocator states.
 *
 * A sub-process owns its arenas, its abandoned segments and its heaps.
 * Segments are only ever claimed from the sub-process's own arenas and
 * only reclaimed from its own abandoned list, so memory of one is never
 * handed to another.  Threads join one with mi_subproc_add_current_thread.
 */
#include "internal.h"
#include "tls.h"

/* Every sub-process but the main one, for fork and for id checks. */
static mia_lock_t mia_subprocs_lock;
static mia_subproc_t *mia_subprocs;

static mia_subproc_t *mia_subproc_check(mi_subproc_id_t id, const char *what) {
  mia_subproc_t *sp = (mia_subproc_t *)id;
  if (sp == NULL || sp == &mia_subproc_main) return &mia_subproc_main;
  mia_lock(&mia_subprocs_lock);
  mia_subproc_t *s = mia_subprocs;
  while (s != NULL && s != sp) s = s->next;
  mia_unlock(&mia_subprocs_lock);
  if (s == NULL) mia_error(EINVAL, "%s: %p is not a live sub-process\n", what, id);
  return s;
}

/* mia_arenas_visit_claimed over every sub-process's arenas. */
void mia_subprocs_visit_claimed(size_t (*fn)(mia_segment_t *seg, void *arg), void *arg) {
  mia_arenas_visit_claimed(&mia_subproc_main, fn, arg);
  mia_lock(&mia_subprocs_lock);
  for (mia_subproc_t *sp = mia_subprocs; sp != NULL; sp = sp->next) mia_arenas_visit_claimed(sp, fn, arg);
  mia_unlock(&mia_subprocs_lock);
}

/* One sub-process's part of the purge thread's pass: its arenas (and
 * abandoned segments) purged where due; the deadline left, 0 if none. */
static uint64_t mia_subproc_purge_due(mia_subproc_t *sp, uint64_t now) {
  uint64_t next = mia_arenas_next_purge(sp);
  if (next == 0 || next > now) return next;
  mia_arenas_purge(sp, false);
  return mia_arenas_next_purge(sp);
}

/* The purge thread serves every sub-process, whichever one's frees started
 * it.  It holds the list's lock throughout, so mi_subproc_destroy, which
 * unlinks a sub-process under that lock before freeing it, waits for the
 * pass rather than unmapping memory the pass is reading. */
uint64_t mia_subprocs_purge_due(uint64_t now) {
  uint64_t next = mia_subproc_purge_due(&mia_subproc_main, now);
  mia_lock(&mia_subprocs_lock);
  for (mia_subproc_t *sp = mia_subprocs; sp != NULL; sp = sp->next)
    next = mia_deadline_min(next, mia_subproc_purge_due(sp, now));
  mia_unlock(&mia_subprocs_lock);
  return next;
}

mia_export mi_subproc_id_t mi_subproc_main(void) { return &mia_subproc_main; }

mia_export mi_subproc_id_t mi_subproc_new(void) {
  if (atomic_load(&mia_process_state) != 2) mia_process_init();
  size_t size = (sizeof(mia_subproc_t) + mia_prim_page_size() - 1) & ~(mia_prim_page_size() - 1);
  mia_subproc_t *sp = mia_prim_reserve(size, 0, false);
  if (sp == NULL) {
    mia_error(ENOMEM, "mi_subproc_new: out of memory\n");
    return NULL;
  }
  memset(sp, 0, sizeof *sp);
  sp->heap_main.subproc = sp;
  sp->heap_main.is_main = true;
  mia_lock(&mia_subprocs_lock);
  sp->next = mia_subprocs;
  mia_subprocs = sp;
  mia_unlock(&mia_subprocs_lock);
  return sp;
}

/* The thread leaves its current sub-process as if it exited there (its
 * live blocks stay valid and are reclaimed by that sub-process's threads)
 * and continues with an empty theap in the new one. */
mia_export void mi_subproc_add_current_thread(mi_subproc_id_t id) {
  mia_subproc_t *sp = mia_subproc_check(id, "mi_subproc_add_current_thread");
  if (sp == NULL) return;
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) theap = mia_thread_init_slow();
  if (theap == NULL) return;
  mia_tld_t *tld = theap->tld->thread_tld;
  if (tld->subproc == sp) return;
  mia_theap_t *main_theap = tld->theap_default;
  mia_theap_set(main_theap);
  mia_heap_unlink_theap(main_theap);
  mia_theap_abandon_to(main_theap, &tld->subproc->abandoned, &tld->subproc->lock);
  tld->subproc = sp;
  tld->heap = &sp->heap_main;
  mia_theap_init(main_theap, tld);
  mia_heap_link_theap(tld->heap, main_theap);
}

static size_t mia_subproc_heap_count(const void *sp) {
  size_t n = 0;
  for (const mi_heap_t *h = ((const mia_subproc_t *)sp)->heaps; h != NULL; h = h->next) n++;
  return n;
}

mia_export bool mi_subproc_visit_heaps(mi_subproc_id_t id, mi_heap_visit_fun *visitor, void *arg) {
  mia_subproc_t *sp = mia_subproc_check(id, "mi_subproc_visit_heaps");
  if (sp == NULL || visitor == NULL) return false;
  if (!visitor(&sp->heap_main, arg)) return false;
  /* the visitor may create heaps (they go to the front): walk a snapshot */
  mia_snapshot_t snap;
  mia_snapshot_init(&snap);
  if (!mia_snapshot_lock(&snap, &sp->heaps_lock, mia_subproc_heap_count, sp, "mi_subproc_visit_heaps", "heaps"))
    return false;
  for (mi_heap_t *h = sp->heaps; h != NULL; h = h->next) snap.items[snap.count++] = h;
  mia_unlock(&sp->heaps_lock);
  bool ok = true;
  for (size_t i = 0; i < snap.count && ok; i++) ok = visitor(snap.items[i], arg);
  mia_snapshot_done(&snap);
  return ok;
}

typedef struct mia_abandoned_visit_s {
  int tag;
  bool all;
  mi_block_visit_fun *visitor;
  void *arg;
} mia_abandoned_visit_t;

static bool mia_visit_heap_abandoned(mi_heap_t *heap, void *arg) {
  mia_abandoned_visit_t *a = arg;
  /* a negative tag stands for every heap, as in mimalloc's API */
  return (a->tag >= 0 && heap->tag != a->tag) || mia_visit_abandoned(heap, a->all, a->visitor, a->arg);
}

mia_export bool mi_abandoned_visit_blocks(mi_subproc_id_t id, int heap_tag, bool visit_blocks,
                                          mi_block_visit_fun *visitor, void *arg) {
  mia_subproc_t *sp = mia_subproc_check(id, "mi_abandoned_visit_blocks");
  if (sp == NULL || visitor == NULL) return false;
  mia_abandoned_visit_t a = {.tag = heap_tag, .all = visit_blocks, .visitor = visitor, .arg = arg};
  return mi_subproc_visit_heaps(sp, mia_visit_heap_abandoned, &a);
}

/* What the main heap still holds once the threads are gone (the segments
 * they left, huge blocks never freed) goes back to the arenas as a
 * destroyed heap's does, so that the statistics stop counting memory that
 * mia_arenas_destroy then unmaps with the arenas. */
static void mia_subproc_destroy_leftovers(mia_subproc_t *sp) {
  mia_lock(&sp->lock);
  mia_segment_t *ab = sp->abandoned;
  sp->abandoned = NULL;
  sp->abandoned_purge_at = 0;
  atomic_store(&sp->orphans_due, 0);
  mia_unlock(&sp->lock);
  mia_lock(&sp->heap_main.lock);
  mia_segment_t *huge = sp->heap_main.huge;
  sp->heap_main.huge = NULL;
  mia_unlock(&sp->heap_main.lock);
  mia_segments_destroy_lists(ab, huge);
}

mia_export void mi_subproc_destroy(mi_subproc_id_t id) {
  mia_subproc_t *sp = mia_subproc_check(id, "mi_subproc_destroy");
  if (sp == NULL) return;
  if (sp == &mia_subproc_main) {
    mia_error(EINVAL, "mi_subproc_destroy: the main sub-process cannot be destroyed\n");
    return;
  }
  mia_theap_t *theap = mia_theap_get();
  if (theap != &mia_theap_empty && theap->tld->thread_tld->subproc == sp) {
    mia_error(EINVAL, "mi_subproc_destroy: the calling thread still belongs to it\n");
    return;
  }
  mia_lock(&mia_subprocs_lock);
  mia_subproc_t **link = &mia_subprocs;
  while (*link != sp) link = &(*link)->next;
  *link = sp->next;
  mia_unlock(&mia_subprocs_lock);
  while (sp->heaps != NULL) mi_heap_destroy(sp->heaps);
  mia_subproc_destroy_leftovers(sp);
  mia_arenas_destroy(sp);
  size_t size = (sizeof(mia_subproc_t) + mia_prim_page_size() - 1) & ~(mia_prim_page_size() - 1);
  mia_prim_release(sp, size);
}

mia_export void mi_subproc_delete(mi_subproc_id_t id) { mi_subproc_destroy(id); }

/* ---- fork: no lock may be held by a thread that does not exist in the
 * child, so the parent takes them all around fork ---- */

static void mia_subproc_lock_all(mia_subproc_t *sp) {
  mia_lock_fork_prepare(&sp->heaps_lock);
  for (mi_heap_t *h = sp->heaps; h != NULL; h = h->next) mia_lock_fork_prepare(&h->lock);
  mia_lock_fork_prepare(&sp->heap_main.lock);
  mia_lock_fork_prepare(&sp->lock);
}

static void mia_subproc_unlock_all(mia_subproc_t *sp, bool child) {
  if (child) mia_prof_fork_child(&sp->prof);
  void (*release)(mia_lock_t *) = child ? mia_lock_fork_child : mia_lock_fork_parent;
  release(&sp->lock);
  release(&sp->heap_main.lock);
  for (mi_heap_t *h = sp->heaps; h != NULL; h = h->next) release(&h->lock);
  release(&sp->heaps_lock);
}

void mia_subprocs_fork_prepare(void) {
  mia_heaps_fork_prepare();
  mia_lock_fork_prepare(&mia_subprocs_lock);
  mia_subproc_lock_all(&mia_subproc_main);
  for (mia_subproc_t *sp = mia_subprocs; sp != NULL; sp = sp->next) mia_subproc_lock_all(sp);
}

static void mia_subprocs_fork_release(bool child) {
  for (mia_subproc_t *sp = mia_subprocs; sp != NULL; sp = sp->next) mia_subproc_unlock_all(sp, child);
  mia_subproc_unlock_all(&mia_subproc_main, child);
  if (child) mia_lock_fork_child(&mia_subprocs_lock);
  else mia_lock_fork_parent(&mia_subprocs_lock);
  mia_heaps_fork_release(child);
}

void mia_subprocs_fork_parent(void) { mia_subprocs_fork_release(false); }
void mia_subprocs_fork_child(void) { mia_subprocs_fork_release(true); }

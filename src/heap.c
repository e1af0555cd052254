/* heap.c -- first-class heaps: creation, the per-thread parts (theaps),
 * delete (live blocks move to the main heap), destroy (everything freed at
 * once), ownership queries and block visiting.
 *
 * A heap has one theap per thread that allocates from it.  Each of those
 * theaps owns its segments through its own tld, so the memory of one heap
 * never shares a segment with another heap's: destroy can hand whole
 * segments back to the arenas, and delete can abandon them to the main
 * heap, without looking at any other heap.
 */
#include "internal.h"
#include "tls.h"

/* ---- heap structs: from a metadata pool, never unmapped, so a thread
 * that raced with a destroy can still read a stale heap's lock word ---- */

static mia_lock_t mia_heap_pool_lock;
static mi_heap_t *mia_heap_pool;
static uint8_t *mia_heap_chunk;
static size_t mia_heap_chunk_left;

static mi_heap_t *mia_heap_struct_alloc(void) {
  mia_lock(&mia_heap_pool_lock);
  mi_heap_t *heap = mia_heap_pool;
  if (heap != NULL) {
    mia_heap_pool = heap->next;
  } else {
    if (mia_heap_chunk_left < sizeof(mi_heap_t)) {
      size_t chunk = 64 * sizeof(mi_heap_t);
      mia_heap_chunk = mia_prim_reserve(chunk, 0, false);
      mia_heap_chunk_left = mia_heap_chunk == NULL ? 0 : chunk;
    }
    if (mia_heap_chunk_left >= sizeof(mi_heap_t)) {
      heap = (mi_heap_t *)mia_heap_chunk;
      mia_heap_chunk += sizeof(mi_heap_t);
      mia_heap_chunk_left -= sizeof(mi_heap_t);
    }
  }
  mia_unlock(&mia_heap_pool_lock);
  if (heap != NULL) memset(heap, 0, sizeof *heap);
  return heap;
}

static void mia_heap_struct_free(mi_heap_t *heap) {
  mia_lock(&mia_heap_pool_lock);
  heap->next = mia_heap_pool;
  mia_heap_pool = heap;
  mia_unlock(&mia_heap_pool_lock);
}

void mia_heaps_fork_prepare(void) { mia_lock_fork_prepare(&mia_heap_pool_lock); }
void mia_heaps_fork_release(bool child) {
  if (child) mia_lock_fork_child(&mia_heap_pool_lock);
  else mia_lock_fork_parent(&mia_heap_pool_lock);
}

/* ---- the heap's list of theaps ---- */

void mia_heap_link_theap(mi_heap_t *heap, mia_theap_t *theap) {
  mia_lock(&heap->lock);
  theap->heap_prev = NULL;
  theap->heap_next = heap->theaps;
  if (heap->theaps != NULL) heap->theaps->heap_prev = theap;
  heap->theaps = theap;
  atomic_store_explicit(&theap->heap, heap, memory_order_release);
  mia_unlock(&heap->lock);
}

/* Caller holds heap->lock. */
static void mia_heap_unlink_theap_locked(mi_heap_t *heap, mia_theap_t *theap) {
  if (theap->heap_prev) theap->heap_prev->heap_next = theap->heap_next;
  else heap->theaps = theap->heap_next;
  if (theap->heap_next) theap->heap_next->heap_prev = theap->heap_prev;
  theap->heap_next = theap->heap_prev = NULL;
}

void mia_heap_unlink_theap(mia_theap_t *theap) {
  mi_heap_t *heap = atomic_load_explicit(&theap->heap, memory_order_acquire);
  if (heap == NULL) return;
  mia_lock(&heap->lock);
  /* re-check under the lock: a destroy in another thread may have taken it */
  if (atomic_load_explicit(&theap->heap, memory_order_relaxed) == heap) {
    mia_heap_unlink_theap_locked(heap, theap);
    atomic_store_explicit(&theap->heap, NULL, memory_order_release);
  }
  mia_unlock(&heap->lock);
}

/* ---- finding the calling thread's part of a heap ---- */

static mia_tld_t *mia_thread_tld(void) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) {
    theap = mia_thread_init_slow();
    if (theap == NULL) return NULL;
  }
  return theap->tld->thread_tld;
}

/* A part whose heap was deleted or destroyed by another thread: its live
 * blocks (after a delete) go to the main heap of the heap's sub-process,
 * which need not be this thread's: the segments came from that one's
 * arenas and go when it is destroyed.  Then the part is freed. */
static void mia_theap_release_orphan(mia_theap_t *theap) {
  mia_tld_t *tld = theap->tld;
  mia_theap_abandon_to(theap, &tld->subproc->abandoned, &tld->subproc->lock);
  mia_thread_data_free(tld);
}

static mia_theap_t *mia_theap_new_for(mia_tld_t *ttld, mi_heap_t *heap) {
  mia_tld_t *tld = mia_thread_data_alloc();
  if (tld == NULL) return NULL;
  mia_theap_t *theap = tld->theap_default;
  tld->subproc = heap->subproc;
  tld->heap = heap;
  tld->thread_tld = ttld;
  mia_theap_init(theap, tld);
  theap->tld_next = ttld->heap_theaps;
  ttld->heap_theaps = theap;
  mia_heap_link_theap(heap, theap);
  return theap;
}

mia_theap_t *mia_heap_theap_slow(mi_heap_t *heap) {
  mia_tld_t *ttld = mia_thread_tld();
  if (ttld == NULL || heap == NULL) return NULL;
  if (ttld->heap == heap) return ttld->theap_default;
  mia_theap_t **link = &ttld->heap_theaps;
  mia_theap_t *found = NULL;
  while (*link != NULL) {
    mia_theap_t *theap = *link;
    mi_heap_t *h = atomic_load_explicit(&theap->heap, memory_order_acquire);
    if (h == NULL) {               /* orphaned: clean up on the way */
      *link = theap->tld_next;
      mia_theap_release_orphan(theap);
      continue;
    }
    if (h == heap) {
      found = theap;
      *link = theap->tld_next;     /* move to the front: heaps are used in bursts */
      break;
    }
    link = &theap->tld_next;
  }
  if (found == NULL) return mia_theap_new_for(ttld, heap);
  found->tld_next = ttld->heap_theaps;
  ttld->heap_theaps = found;
  return found;
}

/* Thread exit: each part of a first-class heap leaves its live blocks with
 * the heap (destroy still frees them; delete hands them to the main heap). */
void mia_thread_release_heap_theaps(mia_tld_t *ttld) {
  mia_theap_t *theap = ttld->heap_theaps;
  ttld->heap_theaps = NULL;
  while (theap != NULL) {
    mia_theap_t *next = theap->tld_next;
    mi_heap_t *heap = atomic_load_explicit(&theap->heap, memory_order_acquire);
    if (heap != NULL && heap->is_main) {
      /* a main heap's part (mia_theap_use_process_main), never orphaned:
       * it goes as the thread's own main theap does, to its sub-process's
       * list and outside the heap's lock, which the purge thread's start
       * from the abandon may need (a malloc of this exiting thread sets
       * up a theap of the main heap) */
      mia_heap_unlink_theap(theap);
      mia_theap_abandon_to(theap, &heap->subproc->abandoned, &heap->subproc->lock);
      mia_thread_data_free(theap->tld);
      theap = next;
      continue;
    }
    bool kept = false;
    if (heap != NULL) {
      mia_lock(&heap->lock);
      if (atomic_load_explicit(&theap->heap, memory_order_relaxed) == heap) {
        mia_theap_abandon_to(theap, &heap->abandoned, NULL);
        mia_heap_unlink_theap_locked(heap, theap);
        atomic_store_explicit(&theap->heap, NULL, memory_order_release);
        kept = true;
      }
      mia_unlock(&heap->lock);
    }
    if (kept) mia_thread_data_free(theap->tld);
    else mia_theap_release_orphan(theap);
    theap = next;
  }
}

/* ---- creation ---- */

mia_export mi_heap_t *mi_heap_new_ex(int heap_tag, bool allow_destroy, mi_arena_id_t arena_id) {
  mia_tld_t *ttld = mia_thread_tld();
  if (ttld == NULL) return NULL;
  mia_subproc_t *sp = ttld->subproc;
  mia_arena_t *arena = NULL;
  if (arena_id != 0) {
    arena = mia_arena_by_id(sp, arena_id);
    if (arena == NULL) {
      mia_error(EINVAL, "mi_heap_new_in_arena: no arena %d in this sub-process\n", arena_id);
      return NULL;
    }
  }
  mi_heap_t *heap = mia_heap_struct_alloc();
  if (heap == NULL) {
    mia_error(ENOMEM, "mi_heap_new: out of memory for heap metadata\n");
    return NULL;
  }
  heap->subproc = sp;
  heap->arena = arena;
  heap->tag = heap_tag;
  heap->allow_destroy = allow_destroy;
  mia_lock(&sp->heaps_lock);
  heap->prev = NULL;
  heap->next = sp->heaps;
  if (sp->heaps != NULL) sp->heaps->prev = heap;
  sp->heaps = heap;
  mia_unlock(&sp->heaps_lock);
  return heap;
}

mia_export mi_heap_t *mi_heap_new(void) { return mi_heap_new_ex(0, true, 0); }

mia_export mi_heap_t *mi_heap_new_in_arena(mi_arena_id_t arena_id) {
  return mi_heap_new_ex(0, true, arena_id);
}

mia_export mi_heap_t *mi_heap_main(void) {
  mia_tld_t *ttld = mia_thread_tld();
  return ttld == NULL ? &mia_subproc_main.heap_main : &ttld->subproc->heap_main;
}

mia_export mi_heap_t *mi_heap_get_backing(void) { return mi_heap_main(); }

mia_export mi_heap_t *mi_heap_get_default(void) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) theap = mia_thread_init_slow();
  return theap == NULL ? &mia_subproc_main.heap_main : atomic_load(&theap->heap);
}

/* Blocks the library allocates and keeps beyond the call (pthread_create
 * allocates the new thread's TLS vector with malloc, and glibc frees it
 * only when the thread's stack is reused) must not come from memory the
 * program may take back: a heap it destroys, or a sub-process.  So for the
 * call the thread allocates from the main sub-process's main heap.
 * Returns the theap mia_theap_restore puts back, NULL if none changed. */
mia_theap_t *mia_theap_use_process_main(void) {
  mia_theap_t *own = mia_theap_get();
  /* a thread without a theap yet sets one up in the main sub-process */
  if (own == &mia_theap_empty || atomic_load(&own->heap) == &mia_subproc_main.heap_main) return NULL;
  mia_theap_t *host = mia_heap_theap(&mia_subproc_main.heap_main);
  if (host == NULL) return NULL;
  mia_theap_set(host);
  return own;
}

void mia_theap_restore(mia_theap_t *own) {
  if (own != NULL) mia_theap_set(own);
}

/* malloc and the mi_ names allocate from the default heap: switching it is
 * switching the theap the thread's TLS points at. */
mia_export mi_heap_t *mi_heap_set_default(mi_heap_t *heap) {
  mi_heap_t *old = mi_heap_get_default();
  if (heap == NULL) return old;
  mia_theap_t *theap = mia_heap_theap(heap);
  if (theap == NULL) return old;
  mia_theap_set(theap);
  return old;
}

static bool mia_heap_check_usable(const mi_heap_t *heap, const char *what) {
  if (heap == NULL) return false;
  if (heap->is_main) {
    mia_error(EINVAL, "%s: the main heap cannot be deleted or destroyed\n", what);
    return false;
  }
  return true;
}

/* The calling thread's default must not keep pointing at a heap that goes. */
static void mia_heap_leave_default(mi_heap_t *heap) {
  mia_theap_t *theap = mia_theap_get();
  if (theap != &mia_theap_empty && atomic_load(&theap->heap) == heap)
    mia_theap_set(theap->tld->thread_tld->theap_default);
}

static void mia_heap_unlist(mi_heap_t *heap) {
  mia_subproc_t *sp = heap->subproc;
  mia_lock(&sp->heaps_lock);
  if (heap->prev) heap->prev->next = heap->next;
  else sp->heaps = heap->next;
  if (heap->next) heap->next->prev = heap->prev;
  mia_unlock(&sp->heaps_lock);
}

/* Drop the calling thread's parts of heaps that are gone. */
static void mia_thread_prune_orphans(void) {
  mia_theap_t *theap = mia_theap_get();
  if (theap == &mia_theap_empty) return;
  mia_tld_t *ttld = theap->tld->thread_tld;
  mia_theap_t **link = &ttld->heap_theaps;
  while (*link != NULL) {
    mia_theap_t *t = *link;
    if (atomic_load_explicit(&t->heap, memory_order_acquire) == NULL) {
      *link = t->tld_next;
      mia_theap_release_orphan(t);
    } else {
      link = &t->tld_next;
    }
  }
}

/* ---- ending a heap ---- */

/* End every part of the heap (destroy frees each part's pages first) and
 * take its abandoned segments and huge spans; the owner threads of other
 * parts see them orphaned and let go of them the next time they look. */
static void mia_heap_detach(mi_heap_t *heap, bool destroy, mia_segment_t **abandoned, mia_segment_t **huge) {
  mia_lock(&heap->lock);
  for (mia_theap_t *t = heap->theaps, *next; t != NULL; t = next) {
    next = t->heap_next;
    if (destroy) mia_theap_destroy_pages(t);
    t->heap_next = t->heap_prev = NULL;
    atomic_store_explicit(&t->heap, NULL, memory_order_release);
  }
  heap->theaps = NULL;
  *abandoned = heap->abandoned;
  heap->abandoned = NULL;
  *huge = heap->huge;
  heap->huge = NULL;
  mia_unlock(&heap->lock);
}

/* The calling thread's parts go at once; then the heap itself. */
static void mia_heap_finish(mi_heap_t *heap) {
  mia_thread_prune_orphans();
  mia_heap_unlist(heap);
  mia_heap_struct_free(heap);
}

/* mi_heap_delete: live blocks move to the main heap. */
mia_export void mi_heap_delete(mi_heap_t *heap) {
  if (!mia_heap_check_usable(heap, "mi_heap_delete")) return;
  mia_heap_leave_default(heap);
  mia_subproc_t *sp = heap->subproc;
  mia_segment_t *ab, *huge;
  mia_heap_detach(heap, false, &ab, &huge);
  size_t waiting = 0;
  for (mia_segment_t *next; ab != NULL; ab = next) {
    next = ab->next;
    __atomic_store_n(&ab->heap, NULL, __ATOMIC_RELAXED);   /* remote frees read it */
    mia_lock(&sp->lock);
    ab->prev = NULL;
    ab->next = sp->abandoned;
    __atomic_store_n(&sp->abandoned, ab, __ATOMIC_RELAXED);
    waiting += mia_abandoned_note(sp, ab);
    mia_unlock(&sp->lock);
  }
  if (waiting != 0) mia_purge_schedule(waiting);
  for (mia_segment_t *next; huge != NULL; huge = next) {
    next = huge->next;
    mia_huge_move_to_heap(huge, &sp->heap_main);
  }
  mia_heap_finish(heap);
}

/* mi_heap_destroy and mi_subproc_destroy: segments left by threads and
 * huge spans go back to their arenas with whatever they still hold. */
void mia_segments_destroy_lists(mia_segment_t *abandoned, mia_segment_t *huge) {
  for (mia_segment_t *next; abandoned != NULL; abandoned = next) {
    next = abandoned->next;
    mia_segment_destroy(abandoned);
  }
  for (mia_segment_t *next; huge != NULL; huge = next) {
    next = huge->next;
    mia_huge_destroy(huge);
  }
}

/* mi_heap_destroy: everything at once. */
mia_export void mi_heap_destroy(mi_heap_t *heap) {
  if (!mia_heap_check_usable(heap, "mi_heap_destroy")) return;
  if (!heap->allow_destroy) {
    mi_heap_delete(heap);
    return;
  }
  mia_heap_leave_default(heap);
  mia_segment_t *ab, *huge;
  mia_heap_detach(heap, true, &ab, &huge);
  mia_segments_destroy_lists(ab, huge);
  mia_heap_finish(heap);
}

mia_export void mi_heap_collect(mi_heap_t *heap, bool force) {
  if (heap == NULL) return;
  mia_theap_t *theap = mia_heap_theap(heap);
  if (theap == NULL) return;
  mia_deferred_free(theap, force);
  mia_theap_collect(theap, force);
  if (force && heap->is_main) mi_collect(true);
}

/* ---- ownership ---- */

mi_heap_t *mia_heap_of_page(const mia_page_t *page) {
  mia_segment_t *seg = mia_segment_of_page(page);
  if (!page->is_huge) {
    mia_theap_t *theap = atomic_load_explicit(&((mia_page_t *)page)->theap, memory_order_acquire);
    if (theap != NULL) {
      mi_heap_t *heap = atomic_load_explicit(&theap->heap, memory_order_acquire);
      if (heap != NULL) return heap;
    }
  }
  mi_heap_t *heap = __atomic_load_n(&seg->heap, __ATOMIC_ACQUIRE);
  return heap != NULL ? heap : &seg->subproc->heap_main;
}

mia_export mi_heap_t *mi_heap_of(const void *p) {
  const mia_page_t *page = mia_page_of(p);
  return page == NULL ? NULL : mia_heap_of_page(page);
}

mia_export bool mi_heap_contains(const mi_heap_t *heap, const void *p) {
  return heap != NULL && mi_heap_of(p) == heap;
}

mia_export bool mi_heap_contains_block(mi_heap_t *heap, const void *p) { return mi_heap_contains(heap, p); }
mia_export bool mi_heap_check_owned(mi_heap_t *heap, const void *p) { return mi_heap_contains(heap, p); }
mia_export bool mi_any_heap_contains(const void *p) { return mia_page_of(p) != NULL; }

mia_export void mi_heap_profile_disable(mi_heap_t *heap) {
  if (heap != NULL) heap->no_profile = true;
}

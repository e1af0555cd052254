/* snapshot.c -- copies of a list's pointers, taken under the list's lock
 * so that a walk can call the program's code (visitors) with the lock
 * released.  Short lists fit in the caller's frame; longer ones get pages
 * of their own from the OS.  Never a variable-length array: the lists are
 * as long as the program makes them (its heaps, its threads), and the
 * calling thread's stack may be small. */
#include "internal.h"

void mia_snapshot_init(mia_snapshot_t *s) {
  s->items = s->inline_items;
  s->count = 0;
  s->cap = MIA_SNAPSHOT_INLINE;
  s->mapped = 0;
}

/* Room for at least n pointers (the caller holds no lock: this maps).
 * false when the OS has no memory for it; the snapshot stays usable. */
bool mia_snapshot_fit(mia_snapshot_t *s, size_t n) {
  if (n <= s->cap) return true;
  size_t page = mia_prim_page_size();
  if (n > (SIZE_MAX - page) / sizeof(void *)) return false;
  size_t bytes = (n * sizeof(void *) + page - 1) & ~(page - 1);
  void **items = mia_prim_reserve(bytes, 0, false);
  if (items == NULL) return false;
  mia_snapshot_done(s);
  s->items = items;
  s->cap = bytes / sizeof(void *);
  s->mapped = bytes;
  return true;
}

void mia_snapshot_done(mia_snapshot_t *s) {
  if (s->mapped != 0) mia_prim_release(s->items, s->mapped);
  mia_snapshot_init(s);
}

/* Take lock with room in s for every entry of a list that count (called
 * under the lock) measures; the room is mapped with the lock released, and
 * the list counted again.  false, with the lock released and an ENOMEM
 * report naming fn and what, when the room cannot be mapped. */
bool mia_snapshot_lock(mia_snapshot_t *s, mia_lock_t *lock, size_t (*count)(const void *owner),
                       const void *owner, const char *fn, const char *what) {
  for (;;) {
    mia_lock(lock);
    size_t n = count(owner);
    if (n <= s->cap) return true;
    mia_unlock(lock);
    if (!mia_snapshot_fit(s, n + n / 4)) {
      mia_error(ENOMEM, "%s: no memory to list %zu %s\n", fn, n, what);
      return false;
    }
  }
}

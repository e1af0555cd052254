/* abandoned.h -- what the unit tests of abandoned segments look at: the
 * segment of a block, whether a segment is on the abandoned list, whether
 * an address is resident.  Needs internal.h. */
#ifndef MIALLOC_TEST_ABANDONED_H
#define MIALLOC_TEST_ABANDONED_H

#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static inline mia_segment_t *segment_of(void *p) {
  mia_page_t *page = mia_page_of(p);
  return page != NULL ? mia_segment_of_page(page) : NULL;
}

static inline void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

static inline bool resident(const void *p) {
  unsigned char v = 0;
  return mincore((void *)((uintptr_t)p & ~(uintptr_t)(sysconf(_SC_PAGESIZE) - 1)), 1, &v) == 0 && (v & 1);
}

static inline bool on_abandoned_list(mia_subproc_t *sp, const mia_segment_t *seg) {
  bool found = false;
  mia_lock(&sp->lock);
  for (mia_segment_t *s = sp->abandoned; s != NULL && !found; s = s->next) found = s == seg;
  mia_unlock(&sp->lock);
  return found;
}

#endif

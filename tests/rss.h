/* rss.h -- the resident set of the calling process, as tests measure it:
 * from /proc/self/statm, independent of mialloc's own accounting. */
#ifndef MIALLOC_TEST_RSS_H
#define MIALLOC_TEST_RSS_H

#include <stdio.h>
#include <unistd.h>

static inline size_t rss_bytes(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  unsigned long size = 0, resident = 0;
  if (f) {
    if (fscanf(f, "%lu %lu", &size, &resident) != 2) resident = 0;
    fclose(f);
  }
  return resident * (size_t)sysconf(_SC_PAGESIZE);
}

/* RSS after the program, its blocks freed, does nothing (no allocation,
 * no mi_collect) until it has fallen by drop from busy or 5 s have
 * passed: the whole criterion, since the purge may be caught half done. */
static inline size_t rss_after_idling(size_t busy, size_t drop) {
  size_t idle = busy;
  for (int i = 0; i < 50 && idle + drop > busy; i++) {
    usleep(100000);
    idle = rss_bytes();
  }
  return idle;
}

#endif

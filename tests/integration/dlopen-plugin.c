/* dlopen-plugin.c -- a small library linked against libmialloc, loaded
 * with dlopen by a program that is not: mialloc's TLS must fit. */
#include "mialloc.h"
#include <string.h>

__attribute__((visibility("default"))) int plugin_work(void) {
  int ok = 1;
  for (int i = 0; i < 10000; i++) {
    char *p = mi_malloc(16 + (size_t)i % 3000);
    if (p == NULL) return 0;
    memset(p, 1, 16);
    if (!mi_is_in_heap_region(p)) ok = 0;
    mi_free(p);
  }
  /* loaded with RTLD_LOCAL by a program on glibc's malloc: not redirected */
  return ok && !mi_is_redirected();
}

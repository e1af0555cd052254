/* test-override-h.c -- mialloc-override.h: the standard names and the
 * Microsoft C runtime's become macros for the mi_ functions. */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <mialloc-override.h>

#include "../tap.h"

#if !defined(malloc) || !defined(free) || !defined(posix_memalign) || !defined(_aligned_malloc)
#error "mialloc-override.h did not define its macros"
#endif

static bool zero_bytes(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != 0) return false;
  return true;
}

int main(void) {
  char *s = strdup("override");
  TAP_OK(s != NULL && strcmp(s, "override") == 0 && mi_usable_size(s) >= 9, "strdup is mi_strdup");
  s = realloc(s, 4000);
  TAP_OK(s != NULL && strcmp(s, "override") == 0 && malloc_usable_size(s) >= 4000, "realloc keeps the string");
  free(s);

  void *p = NULL;
  TAP_OK(posix_memalign(&p, 4096, 100) == 0 && (uintptr_t)p % 4096 == 0 && mi_check_owned(p),
         "posix_memalign is mi_posix_memalign");
  free(p);
  TAP_OK(posix_memalign(&p, 24, 100) == EINVAL, "posix_memalign: EINVAL for an alignment that is not a power of two");

  unsigned char *a = _aligned_malloc(100, 256);
  TAP_OK(a != NULL && (uintptr_t)a % 256 == 0 && _msize(a) >= 100 && _aligned_msize(a, 256, 0) >= 100,
         "_aligned_malloc and _msize");
  a = _aligned_realloc(a, 10000, 256);
  TAP_OK(a != NULL && (uintptr_t)a % 256 == 0 && _msize(a) >= 10000, "_aligned_realloc keeps the alignment");
  _aligned_free(a);
  a = _aligned_offset_malloc(200, 128, 16);
  TAP_OK(a != NULL && ((uintptr_t)a + 16) % 128 == 0, "_aligned_offset_malloc aligns p + offset");
  _aligned_free(a);

  unsigned char *z = calloc(10, 10);
  memset(z, 7, 100);
  z = _recalloc(z, 50, 10);
  TAP_OK(z != NULL && z[99] == 7 && zero_bytes(z + 100, 400), "_recalloc zeroes what it adds");
  free(z);

  int *arr = NULL;
  TAP_OK(reallocarr(&arr, 1000, sizeof *arr) == 0 && arr != NULL && malloc_usable_size(arr) >= 4000,
         "reallocarr is mi_reallocarr");
  free(arr);

  setenv("MIA_OVERRIDE_TEST", "v", 1);
  char *buf = NULL;
  size_t len = 0;
  TAP_OK(_dupenv_s(&buf, &len, "MIA_OVERRIDE_TEST") == 0 && buf != NULL && strcmp(buf, "v") == 0 && len == 2,
         "_dupenv_s is mi_dupenv_s");
  free(buf);
  void *e = _expand(malloc(32), 16);
  TAP_OK(e != NULL && mi_usable_size(e) >= 32, "_expand shrinks in place");
  free(e);
  return tap_done();
}

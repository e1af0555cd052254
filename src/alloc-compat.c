/* alloc-compat.c -- entry points that code written for the reference
 * allocator calls under other names: the u-family (which also reports the
 * usable size of the block) and the Microsoft CRT-style names.  Each is a
 * thin layer over the mi_ functions, with their error conventions.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>
#include <wchar.h>

/* ---- the u-family: the usable size through an out parameter ---- */

static void *mia_with_size(void *p, size_t *block_size) {
  if (block_size != NULL) *block_size = p == NULL ? 0 : mia_usable_size(p);
  return p;
}

mia_export void *mi_umalloc(size_t size, size_t *block_size) { return mia_with_size(mi_malloc(size), block_size); }

mia_export void *mi_ucalloc(size_t count, size_t size, size_t *block_size) {
  return mia_with_size(mi_calloc(count, size), block_size);
}

mia_export void *mi_umalloc_small(size_t size, size_t *block_size) {
  return mia_with_size(mi_malloc_small(size), block_size);
}

mia_export void *mi_uzalloc_small(size_t size, size_t *block_size) {
  return mia_with_size(mi_zalloc_small(size), block_size);
}

mia_export void *mi_umalloc_aligned(size_t size, size_t alignment, size_t *block_size) {
  return mia_with_size(mi_malloc_aligned(size, alignment), block_size);
}

mia_export void *mi_uzalloc_aligned(size_t size, size_t alignment, size_t *block_size) {
  return mia_with_size(mi_zalloc_aligned(size, alignment), block_size);
}

/* On failure p stays valid and *block_size_post is 0. */
mia_export void *mi_urealloc(void *p, size_t newsize, size_t *block_size_pre, size_t *block_size_post) {
  if (block_size_pre != NULL) *block_size_pre = p == NULL ? 0 : mia_usable_size(p);
  return mia_with_size(mi_realloc(p, newsize), block_size_post);
}

mia_export void mi_ufree(void *p, size_t *block_size) {
  if (block_size != NULL) *block_size = p == NULL ? 0 : mia_usable_size(p);
  mi_free(p);
}

mia_export void mi_free_small(void *p) { mi_free(p); }

mia_export size_t mi_malloc_good_size(size_t size) { return mi_good_size(size); }

/* ---- Microsoft CRT-style names ---- */

mia_export void *mi__expand(void *p, size_t newsize) { return mi_expand(p, newsize); }

mia_export void *mi_aligned_recalloc(void *p, size_t newcount, size_t size, size_t alignment) {
  return mi_recalloc_aligned(p, newcount, size, alignment);
}

mia_export void *mi_aligned_offset_recalloc(void *p, size_t newcount, size_t size, size_t alignment,
                                            size_t offset) {
  return mi_recalloc_aligned_at(p, newcount, size, alignment, offset);
}

mia_export int mi_dupenv_s(char **buf, size_t *size, const char *name) {
  if (buf == NULL || name == NULL) return EINVAL;
  if (size != NULL) *size = 0;
  *buf = NULL;
  const char *value = getenv(name);
  if (value == NULL) return 0;
  *buf = mi_strdup(value);
  if (*buf == NULL) return ENOMEM;
  if (size != NULL) *size = strlen(value) + 1;
  return 0;
}

/* Linux has no wide environment. */
mia_export int mi_wdupenv_s(wchar_t **buf, size_t *size, const wchar_t *name) {
  if (buf == NULL || name == NULL) return EINVAL;
  if (size != NULL) *size = 0;
  *buf = NULL;
  return EINVAL;
}

mia_export wchar_t *mi_wcsdup(const wchar_t *s) {
  if (s == NULL) return NULL;
  size_t bytes = (wcslen(s) + 1) * sizeof(wchar_t);
  wchar_t *t = mi_malloc(bytes);
  if (t != NULL) memcpy(t, s, bytes);
  return t;
}

mia_export unsigned char *mi_mbsdup(const unsigned char *s) {
  return (unsigned char *)mi_strdup((const char *)s);
}

/* test-pagemap.c -- the page map answers "which page owns p" for any
 * address, including ones mialloc never handed out. */
#include "internal.h"
#include "../tap.h"

#include <dlfcn.h>
#include <stdlib.h>

static int static_var;

int main(void) {
  int stack_var;
  TAP_OK(mia_page_of(NULL) == NULL, "NULL has no page");
  TAP_OK(mia_page_of(&stack_var) == NULL, "a stack address has no page");
  TAP_OK(mia_page_of(&static_var) == NULL, "a static address has no page");
  TAP_OK(mia_page_of((void *)(uintptr_t)0xffff800000001000ull) == NULL, "a kernel address has no page");
  TAP_OK(mia_page_of((void *)(uintptr_t)0x0000800000000000ull) == NULL, "a non-canonical address has no page");
  TAP_OK(mia_page_of((void *)(uintptr_t)~(uintptr_t)0) == NULL, "all-ones has no page");

  void *libc = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
  void *(*glibc_malloc)(size_t) = (void *(*)(size_t))dlsym(libc, "malloc");
  void *foreign = glibc_malloc ? glibc_malloc(100) : NULL;
  TAP_OK(foreign != NULL && mia_page_of(foreign) == NULL, "glibc's memory has no page");

  bool ok = true;
  for (size_t size = 1; size < (64u << 20); size = size * 3 / 2 + 1) {
    uint8_t *p = mi_malloc(size);
    mia_page_t *page = mia_page_of(p);
    if (page == NULL || mia_page_of(p + size - 1) != page || page->block_size < size) {
      ok = false;
      tap_diag("size %zu: page %p", size, (void *)page);
    }
    mi_free(p);
  }
  TAP_OK(ok, "every byte of blocks from 1 B to 64 MiB maps to the block's page");

  uint8_t *huge = mi_malloc(32u << 20);
  mia_page_t *hp = mia_page_of(huge + (20u << 20));
  TAP_OK(hp != NULL && hp->is_huge, "an interior address of a huge block maps to its page");
  mi_free(huge);
  TAP_OK(mia_page_of(huge) == NULL, "a freed huge block no longer maps");
  return tap_done();
}

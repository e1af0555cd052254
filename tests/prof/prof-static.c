/* prof-static.c -- run by test-symbols.sh.  Linked stripped (no .symtab,
 * no debug information) and without -rdynamic: its dynamic symbol table
 * exports only sym_exported_before and sym_exported_alloc (Makefile.am,
 * --export-dynamic-symbol).  static_site, the allocation site under test,
 * lies between the two in .text, so a symboliser that named an address
 * after the nearest symbol below it would call static_site's frames
 * sym_exported_before.  The profile must leave them unnamed.
 *
 *   prof-static     keep 32 x 1 MiB from static_site and 32 x 1 MiB from
 *                   sym_exported_alloc; print "between 1" when static_site
 *                   lies between the two exported functions
 */
/* separate functions with their own call instructions, in source order,
 * whatever CFLAGS say (see prof-sites.c) */
#pragma GCC optimize("O0")

#include "mialloc-prof.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))
#define EXPORTED __attribute__((visibility("default"))) /* CFLAGS hide everything */

void sym_exported_before(void);
void *sym_exported_alloc(size_t n);

static void *volatile kept[64];

/* exported, never allocates: it must never appear in the profile */
EXPORTED NOINLINE void sym_exported_before(void) { kept[0] = kept[0]; }

/* used: clang emits a static function where it is first called (after
 * main) unless told to keep it, which would move it out from between */
__attribute__((used)) NOINLINE static void *static_site(size_t n) {
  void *p = malloc(n);
  if (p == NULL) abort();
  memset(p, 1, n);
  return p;
}

/* exported allocation site: named from the dynamic symbol table */
EXPORTED NOINLINE void *sym_exported_alloc(size_t n) {
  void *p = malloc(n);
  if (p == NULL) abort();
  memset(p, 2, n);
  return p;
}

int main(void) {
  sym_exported_before();
  for (int i = 0; i < 32; i++) kept[i] = static_site(1 << 20);
  for (int i = 32; i < 64; i++) kept[i] = sym_exported_alloc(1 << 20);
  uintptr_t before = (uintptr_t)sym_exported_before, site = (uintptr_t)static_site,
            after = (uintptr_t)sym_exported_alloc;
  printf("between %d\n", before < site && site < after);
  /* (also links libmialloc-prof, which the profile comes from) */
  printf("profiler %d\n", mi_pprof_env_profiler() != NULL);
  return 0; /* the exit snapshot sees the 64 MiB still in use */
}

/* exec-heap.c -- run code from a live 64-byte block: heap memory is not
 * executable, so the call faults (SIGSEGV) whatever the build.  Under
 * guarded sampling at rate 1 the block is a guarded sample, and the
 * handler must not call it a use after free or an overflow: the block is
 * live and the fault is inside it. */
#include "misuse.h"

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  unsigned char *p = mi_malloc(64);
  if (p == NULL) return 2;
  memset(p, 0xc3, 64);   /* x86 "ret"; any other byte faults the same */
  misuse_say("victim %p size 64", (void *)p);
  void (*fn)(void);
  memcpy(&fn, &p, sizeof fn);
  fn();
  misuse_say("wrote: the call returned");
  mi_free(p);
  return misuse_done();
}

/* uaf-write.c first|middle [nocheck] -- write into a freed 64-byte block:
 * its first word (where the free-list link lives) or one byte in the
 * middle; then call mi_debug_check() (unless nocheck) and allocate enough
 * blocks of the size to get the freed one handed out again.
 * debug: any changed byte is found when the block is handed out again or
 * by mi_debug_check().  secure: a changed first word is found when the
 * block is next handed out (EFAULT, corrupted free list); a changed middle
 * byte is harmless.  guarded sampling: the freed block is PROT_NONE, the
 * write traps (SIGSEGV). */
#include "misuse.h"

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  int first = 1, check = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "middle") == 0) first = 0;
    if (strcmp(argv[i], "nocheck") == 0) check = 0;
  }
  const size_t size = 64;
  misuse_neighbours(size, 48);
  misuse_sort_neighbours();
  unsigned char *p = misuse_take(misuse_nb_count / 2);
  misuse_say("victim %p size %zu write %s", (void *)p, size, first ? "first word" : "middle byte");
  mi_free(p);
  if (first) {
    volatile uint64_t *w = (volatile uint64_t *)p;
    *w = 0x4141414141414141ull;
  } else {
    volatile unsigned char *w = p;
    w[size / 2 + 3] ^= 0x5a;
  }
  misuse_say("wrote into the freed block");
  if (!check) {
    misuse_say("mi_debug_check() not called");
  } else if (mi_debug_check != NULL) {
    bool ok = mi_debug_check();
    misuse_say("mi_debug_check() returned %s", ok ? "true" : "false");
  } else {
    misuse_say("mi_debug_check() is not in this library");
  }
  misuse_verify_neighbours("after the use after free", NULL, NULL);
  /* hands the freed block (and the rest of its page) out again */
  misuse_fresh_blocks(size, MISUSE_FRESH, NULL, 0);
  misuse_free_neighbours();
  return misuse_done();
}

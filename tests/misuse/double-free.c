/* double-free.c -- free the same block twice.
 * secure/debug: reported (EAGAIN, naming the block) and ignored, so the
 * block is never handed out twice. */
#include "misuse.h"

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  const size_t size = 64;
  misuse_neighbours(size, 48);
  misuse_sort_neighbours();
  unsigned char *p = misuse_take(misuse_nb_count / 2);
  misuse_say("victim %p size %zu", (void *)p, size);
  mi_free(p);
  misuse_say("second free of %p", (void *)p);
  mi_free(p);
  misuse_say("returned from the second free");
  misuse_verify_neighbours("after the double free", NULL, NULL);
  misuse_fresh_blocks(size, MISUSE_FRESH, NULL, 0);
  misuse_free_neighbours();
  return misuse_done();
}

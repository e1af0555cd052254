/* free-interior.c -- free a pointer into the middle of a live block.
 * secure/debug: reported (EINVAL) and ignored: the block stays live, keeps
 * its contents, and is not handed out again until it is really freed. */
#include "misuse.h"

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  const size_t size = 64;
  misuse_neighbours(size, 48);
  misuse_sort_neighbours();
  /* the victim stays in the neighbour set: it must stay live and intact */
  unsigned char *p = misuse_nb[misuse_nb_count / 2].p;
  unsigned char *q = p + 16;
  misuse_say("victim %p size %zu", (void *)p, size);
  misuse_say("interior %p", (void *)q);
  mi_free(q);
  misuse_say("returned from the free of the interior pointer");
  misuse_verify_neighbours("after the interior free", NULL, NULL);
  misuse_fresh_blocks(size, MISUSE_FRESH, NULL, 0);
  misuse_verify_neighbours("at the end", NULL, NULL);
  /* now the real free of every block, the victim included: no error */
  misuse_say("freeing the victim properly");
  misuse_free_neighbours();
  return misuse_done();
}

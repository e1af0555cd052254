/* free-interior.c [OFFSET] -- free a pointer OFFSET bytes (16 unless given)
 * into a live block.  secure/debug, and release builds where OFFSET is off
 * the 16-byte boundary of every block start: reported (EINVAL) and
 * ignored: the block stays live, keeps its contents, and is not handed out
 * again until it is really freed. */
#include "misuse.h"

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  const size_t size = 64;
  size_t offset = 16;
  for (int i = 1; i < argc; i++)
    if (argv[i][0] != '-') offset = (size_t)strtoul(argv[i], NULL, 0);
  misuse_neighbours(size, 48);
  misuse_sort_neighbours();
  /* the victim stays in the neighbour set: it must stay live and intact */
  unsigned char *p = misuse_nb[misuse_nb_count / 2].p;
  unsigned char *q = p + offset;
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

/* realloc-freed.c same|grow|interior [OFFSET] -- realloc a block that was
 * freed already (to the size it had: realloc would keep it in place; or
 * larger: realloc would move it), or a pointer OFFSET bytes (16 unless
 * given) into a live block.
 * Every build that checks its frees (release: a block still free; secure,
 * debug) reports it like the free would (EAGAIN "freed already", EINVAL
 * "middle") and leaves the pointer alone: realloc returns NULL with errno
 * EINVAL, so the block is neither handed out twice nor freed twice. */
#include "misuse.h"

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  const char *how = "same";
  size_t offset = 16;
  for (int i = 1, n = 0; i < argc; i++)
    if (argv[i][0] != '-') {
      if (n++ == 0) how = argv[i];
      else offset = (size_t)strtoul(argv[i], NULL, 0);
    }
  const size_t size = 64;
  bool interior = strcmp(how, "interior") == 0;
  misuse_neighbours(size, 48);
  misuse_sort_neighbours();
  unsigned char *p = misuse_take(misuse_nb_count / 2);
  misuse_say("victim %p size %zu", (void *)p, size);
  if (!interior) mi_free(p);
  unsigned char *arg = interior ? p + offset : p;
  size_t newsize = strcmp(how, "grow") == 0 ? 4 * size : size;
  misuse_say("realloc(%p, %zu) of a %s", (void *)arg, newsize, interior ? "pointer into a live block" : "freed block");
  errno = 0;
  void *q = mi_realloc(arg, newsize);
  int err = errno;
  misuse_say("realloc returned %p, errno %s", q, misuse_errname(err));
  if (q != NULL || err != EINVAL) {
    misuse_say("CORRUPTION: realloc of a %s returned %p (errno %d), not NULL with EINVAL",
               interior ? "pointer into a live block" : "freed block", q, err);
    misuse_corrupt++;
  }
  misuse_verify_neighbours("after the realloc", NULL, NULL);
  /* a freed victim must not come back while the fresh blocks are live; a
   * live one (interior) must stay live and is checked like a neighbour */
  misuse_fresh_blocks(size, MISUSE_FRESH, interior ? p : NULL, interior ? size : 0);
  if (interior) mi_free(p);
  misuse_free_neighbours();
  return misuse_done();
}

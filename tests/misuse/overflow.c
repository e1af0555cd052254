/* overflow.c N -- write N bytes (1 or 64) past the end of a 64-byte block,
 * then free it.
 * secure/debug: the canary after the block is found overwritten when the
 * block is freed (EOVERFLOW, naming the block).
 * guarded sampling: the write hits the guard page and traps (SIGSEGV).
 * The victim is chosen so that the bytes it overflows into belong to its
 * own padding or to live neighbours (never to a free block), and the check
 * of the neighbours skips exactly the bytes the test wrote. */
#include "misuse.h"

int main(int argc, char **argv) {
  misuse_init(argc, argv);
  size_t n = 1;
  for (int i = 1; i < argc; i++)
    if (argv[i][0] >= '0' && argv[i][0] <= '9') n = strtoul(argv[i], NULL, 10);
  const size_t size = 64;
  misuse_neighbours(size, 64);
  misuse_sort_neighbours();
  /* the block stride: the smallest distance between two neighbours */
  uintptr_t stride = UINTPTR_MAX;
  for (int i = 1; i < misuse_nb_count; i++) {
    uintptr_t d = (uintptr_t)misuse_nb[i].p - (uintptr_t)misuse_nb[i - 1].p;
    if (d < stride) stride = d;
  }
  /* a victim followed by two neighbours at exactly that stride: whatever it
   * overflows into (n <= 2 * stride) is live memory of this test */
  int v = -1;
  for (int i = misuse_nb_count / 2; i + 2 < misuse_nb_count && v < 0; i++)
    if ((uintptr_t)misuse_nb[i + 1].p - (uintptr_t)misuse_nb[i].p == stride &&
        (uintptr_t)misuse_nb[i + 2].p - (uintptr_t)misuse_nb[i + 1].p == stride && n <= 2 * stride)
      v = i;
  if (v < 0) {
    misuse_say("no victim with live neighbours right after it (stride %zu): taking the middle one",
               (size_t)stride);
    v = misuse_nb_count / 2;
  }
  unsigned char *p = misuse_take(v);
  misuse_say("victim %p size %zu stride %zu overflow %zu", (void *)p, size, (size_t)stride, n);
  volatile unsigned char *w = p;
  /* zeros, as an off-by-one string terminator writes: the canary's first
   * byte is random but odd, so any zero byte over it is seen, where a
   * random odd byte would match it once in 128 runs (CI saw that) */
  for (size_t i = 0; i < n; i++) w[size + i] = 0;
  misuse_say("wrote %zu bytes past the block", n);
  mi_free(p);
  misuse_say("returned from the free of the overflowed block");
  misuse_verify_neighbours("after the overflow", p + size, p + size + n);
  /* the test's own bytes in the neighbours stay what they are: rewrite them
   * to the neighbours' fill so later checks see only the allocator's doing */
  for (int i = 0; i < misuse_nb_count; i++)
    for (size_t k = 0; k < misuse_nb[i].size; k++)
      if (misuse_nb[i].p + k >= p + size && misuse_nb[i].p + k < p + size + n) misuse_nb[i].p[k] = misuse_nb[i].fill;
  misuse_fresh_blocks(size, MISUSE_FRESH, NULL, 0);
  misuse_free_neighbours();
  return misuse_done();
}

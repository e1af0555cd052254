/* guarded-sample.c SIZE COUNT -- allocate COUNT blocks of SIZE bytes and
 * count those that guarded sampling placed against a guard page: the block
 * ends less than 64 bytes before a page boundary and the page after it
 * cannot be read.  Readability is probed with write(2) from the page into
 * a pipe (EFAULT, no signal).  Prints "guarded G of COUNT". */
#include "misuse.h"

#include <sys/mman.h>

static int pipefd[2];

static bool readable(const void *addr) {
  if (write(pipefd[1], addr, 1) != 1) return false;
  char c;
  if (read(pipefd[0], &c, 1) != 1) return false;
  return true;
}

int main(int argc, char **argv) {
  size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 64;
  int count = argc > 2 ? atoi(argv[2]) : 1000;
  if (size == 0 || count <= 0 || pipe(pipefd) != 0) return 2;
  const uintptr_t pg = (uintptr_t)sysconf(_SC_PAGESIZE);
  unsigned char **b = calloc((size_t)count, sizeof *b);
  if (b == NULL) return 2;
  int guarded = 0, bad = 0;
  for (int i = 0; i < count; i++) {
    b[i] = mi_malloc(size);
    if (b[i] == NULL) { bad++; continue; }
    memset(b[i], 0x77, size);
    uintptr_t end = (uintptr_t)b[i] + size;
    uintptr_t next = (end + pg - 1) & ~(pg - 1);
    if (next - end < 64 && !readable((void *)next)) guarded++;
  }
  for (int i = 0; i < count; i++) {
    for (size_t k = 0; b[i] != NULL && k < size; k++)
      if (b[i][k] != 0x77) { bad++; break; }
    mi_free(b[i]);
  }
  free(b);
  misuse_say("guarded %d of %d (size %zu)", guarded, count, size);
  if (bad) misuse_say("CORRUPTION: %d blocks failed or lost their contents", bad);
  return bad ? 3 : 0;
}

/* no-guard-markers.c PROG ARGS... -- run PROG as on a kernel without guard
 * markers (before Linux 6.13), see tests/seccomp.h: guarded sampling and
 * the secure build's page guards must take their mprotect paths.  The
 * misuse battery runs its guard cases both ways (run.sh).  Exits 77 where
 * it cannot install the filter. */
#include <stdbool.h>
#include <unistd.h>

#include "../seccomp.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: no-guard-markers PROG ARGS...\n");
    return 2;
  }
  if (!no_guard_markers()) return 77;
  execv(argv[1], argv + 1);
  perror("no-guard-markers: exec");
  return 126;
}

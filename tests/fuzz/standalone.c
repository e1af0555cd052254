/* standalone.c -- runs the fuzz target without libFuzzer (make check).
 *
 *   fuzz-api-standalone [CORPUS-DIR [COUNT [SEED]]]
 *
 * Replays every file of the corpus (default $MIALLOC_SRCDIR/tests/fuzz/corpus),
 * then COUNT pseudo-random inputs (default 2000, env MIALLOC_FUZZ_RUNS) from a
 * fixed seed (default 1, env MIALLOC_FUZZ_SEED), stopping early after
 * MIALLOC_FUZZ_SECONDS (default 15) so make check stays short on a slow
 * machine.  Prints TAP.  A failing input aborts the run; the handler names
 * the input and, for a random one, writes it to fuzz-crash-SEED-N so that
 * `tests/fuzz/fuzz-api fuzz-crash-...` (or this program with a directory
 * holding it) replays it.
 */
#include "../tap.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *current_name = "(none)";
static const uint8_t *current_data;
static size_t current_size;
static char crash_file[64];

static void put(const char *s) {
  ssize_t w = write(2, s, strlen(s));
  (void)w;
}

static void on_crash(int sig) {
  put("fuzz-api-standalone: crashed on input ");
  put(current_name);
  put("\n");
  if (crash_file[0] != 0 && current_data != NULL) {
    int fd = open(crash_file, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ssize_t w = write(fd, current_data, current_size);
      (void)w;
      close(fd);
      put("fuzz-api-standalone: the input is in ");
      put(crash_file);
      put("\n");
    }
  }
  signal(sig, SIG_DFL);
  raise(sig);
}

static uint64_t rng;
static uint64_t next_random(void) {   /* xorshift64* */
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static int run_corpus(const char *dir, int *files) {
  DIR *d = opendir(dir);
  if (d == NULL) return -1;
  struct dirent *e;
  static char path[4096];
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    FILE *f = fopen(path, "rb");
    if (f == NULL) continue;
    uint8_t *buf = malloc(1 << 20);
    size_t n = buf != NULL ? fread(buf, 1, 1 << 20, f) : 0;
    fclose(f);
    current_name = path;
    current_data = buf;
    current_size = n;
    crash_file[0] = 0;
    LLVMFuzzerTestOneInput(buf, n);
    free(buf);
    (*files)++;
  }
  closedir(d);
  return 0;
}

int main(int argc, char **argv) {
  static char dflt[4096];
  const char *srcdir = getenv("MIALLOC_SRCDIR");
  snprintf(dflt, sizeof dflt, "%s/tests/fuzz/corpus", srcdir != NULL ? srcdir : ".");
  const char *dir = argc > 1 ? argv[1] : dflt;
  const char *e;
  long count = argc > 2 ? atol(argv[2]) : (e = getenv("MIALLOC_FUZZ_RUNS")) ? atol(e) : 2000;
  uint64_t seed = argc > 3 ? strtoull(argv[3], NULL, 0) : (e = getenv("MIALLOC_FUZZ_SEED")) ? strtoull(e, NULL, 0) : 1;
  double budget = (e = getenv("MIALLOC_FUZZ_SECONDS")) ? atof(e) : 15;
  signal(SIGABRT, on_crash);
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);

  double t0 = now();
  int files = 0;
  int rc = run_corpus(dir, &files);
  TAP_OK(rc == 0 && files > 0, "replayed %d corpus inputs from %s (%.1f s), every block intact", files,
         dir, now() - t0);

  rng = seed != 0 ? seed : 1;
  double t1 = now();
  static char name[64];
  static uint8_t buf[8192];
  long i;
  for (i = 0; i < count && now() - t1 < budget; i++) {
    /* mostly short programs, some long ones */
    size_t n = (next_random() & 7) == 0 ? next_random() % sizeof buf : next_random() % 512;
    for (size_t k = 0; k < n; k++) buf[k] = (uint8_t)(next_random() >> 56);
    snprintf(name, sizeof name, "random #%ld (seed %llu)", i, (unsigned long long)seed);
    snprintf(crash_file, sizeof crash_file, "fuzz-crash-%llu-%ld", (unsigned long long)seed, i);
    current_name = name;
    current_data = buf;
    current_size = n;
    LLVMFuzzerTestOneInput(buf, n);
  }
  TAP_OK(i > 0, "ran %ld of %ld pseudo-random inputs (seed %llu) in %.1f s, every block intact%s", i,
         count, (unsigned long long)seed, now() - t1, i < count ? " (time budget reached)" : "");
  return tap_done();
}

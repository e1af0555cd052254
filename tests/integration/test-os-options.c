/* test-os-options.c -- options that change how mialloc uses the OS, each
 * checked in a re-executed child with the variable set:
 *   MIALLOC_PURGE_DELAY=0          freed memory leaves RSS at once
 *   MIALLOC_RESERVE_OS_MEMORY=256MiB  an arena of that size exists at start
 *   MIALLOC_ALLOW_LARGE_OS_PAGES=1 arenas are marked for huge pages (VmFlags hg),
 *                                  except in secure builds, whose pages each end
 *                                  with a guard page (VmFlags nh: never)
 */
#include "config.h"
#include "mialloc.h"
#include "../tap.h"
#include "../rss.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>


/* VmFlags of the mapping that holds p, from /proc/self/smaps */
static bool mapping_has_flag(const void *p, const char *flag) {
  FILE *f = fopen("/proc/self/smaps", "r");
  char line[512];
  bool inside = false, found = false;
  uintptr_t a = (uintptr_t)p;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = a >= lo && a < hi;
    } else if (inside && strncmp(line, "VmFlags:", 8) == 0) {
      char pat[8];
      snprintf(pat, sizeof pat, " %s", flag);
      found = strstr(line, pat) != NULL;
      break;
    }
  }
  if (f) fclose(f);
  return found;
}

static int child(const char *mode) {
  if (strcmp(mode, "purge0") == 0) {
    /* a huge block and many small ones, freed: no mi_collect */
    size_t before = rss_bytes();
    char *big = malloc(64u << 20);
    memset(big, 1, 64u << 20);
    void **small = malloc(65536 * sizeof(void *));
    for (int i = 0; i < 65536; i++) {
      small[i] = malloc(1000);
      memset(small[i], 2, 1000);
    }
    size_t peak = rss_bytes();
    free(big);
    for (int i = 0; i < 65536; i++) free(small[i]);
    size_t after = rss_bytes();
    printf("before=%zu peak=%zu after=%zu\n", before >> 10, peak >> 10, after >> 10);
    return peak > before + (100u << 20) && after < before + (24u << 20) ? 0 : 1;
  }
  if (strcmp(mode, "reserve") == 0) {
    char json[4096];
    mi_free(mi_malloc(16));
    if (mi_stats_get_json(sizeof json, json) == NULL) return 2;
    const char *key = "\"reserved\": {\"current\": ";
    const char *r = strstr(json, key);
    unsigned long long reserved = r ? strtoull(r + strlen(key), NULL, 10) : 0;
    printf("reserved=%llu\n", reserved);
    /* the small block came from the reserved arena: nothing else exists */
    return reserved == (256ull << 20) ? 0 : 1;
  }
  if (strcmp(mode, "thp") == 0 || strcmp(mode, "nothp") == 0) {
    void *p = malloc(100);
    bool hg = mapping_has_flag(p, "hg");
    printf("hg=%d\n", hg);
    free(p);
    return hg == (strcmp(mode, "thp") == 0) ? 0 : 1;
  }
  return 3;
}

static int run(const char *mode, const char *var) {
  pid_t pid = fork();
  if (pid == 0) {
    /* only the variable under test, plus the library path the libtool
     * wrapper set up for the uninstalled library */
    char ldpath[4096];
    snprintf(ldpath, sizeof ldpath, "LD_LIBRARY_PATH=%s", getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "");
    char *envp[] = {(char *)var, ldpath, NULL};
    char *argv[] = {(char *)"test-os-options", (char *)mode, NULL};
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

int main(int argc, char **argv) {
  if (argc > 1) return child(argv[1]);
  TAP_OK(run("purge0", "MIALLOC_PURGE_DELAY=0") == 0,
         "MIALLOC_PURGE_DELAY=0: 64 MiB huge and 64 MiB small blocks leave RSS as they are freed");
  TAP_OK(run("reserve", "MIALLOC_RESERVE_OS_MEMORY=256MiB") == 0,
         "MIALLOC_RESERVE_OS_MEMORY=256MiB: an arena of exactly that size, used first");
  TAP_OK(run("reserve", "MIALLOC_VERBOSE=0") == 1,
         "without it the first arena has the default size (not 256 MiB)");
#if MIALLOC_SECURE
  TAP_OK(run("thp", "MIALLOC_ALLOW_LARGE_OS_PAGES=1") == 1,
         "secure build: MIALLOC_ALLOW_LARGE_OS_PAGES=1 is ignored, the arena is not marked for huge pages");
#else
  TAP_OK(run("thp", "MIALLOC_ALLOW_LARGE_OS_PAGES=1") == 0,
         "MIALLOC_ALLOW_LARGE_OS_PAGES=1: the arena is marked for huge pages");
#endif
  TAP_OK(run("nothp", "MIALLOC_ALLOW_LARGE_OS_PAGES=0") == 0,
         "without it the arena is not marked");
  return tap_done();
}

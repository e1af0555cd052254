/* test-os-options.c -- options that change how mialloc uses the OS, each
 * checked in a re-executed child with the variable set:
 *   MIALLOC_PURGE_DELAY=0          freed memory leaves RSS at once
 *   MIALLOC_RESERVE_OS_MEMORY=256MiB  an arena of that size exists at start
 *   MIALLOC_ALLOW_LARGE_OS_PAGES=1 arenas are marked for huge pages (VmFlags hg),
 *                                  except in secure builds, whose pages each end
 *                                  with a guard page (VmFlags nh: never); without
 *                                  it, where the system's THP mode is always, the
 *                                  first 16 MiB of the arena (a small heap) nh
 *   (an address-space limit)       under ulimit -v 512 MiB, below the 1 GiB a
 *                                  default arena takes, smaller arenas serve
 *                                  160 MiB of blocks; under limits from 2 to
 *                                  128 MiB, a program either cannot start or
 *                                  allocate (ENOMEM, no crash) or allocates, and
 *                                  once it can it can under every higher limit
 *   (a data limit)                 the same from 1 to 32 MiB, and the library
 *                                  loads and allocates under ulimit -d 8 MiB
 *   MIALLOC_ARENA_EAGER_COMMIT=0   (the default) arena segments are writable
 *                                  only while claimed (or freed and not yet
 *                                  purged): a kernel that does not overcommit
 *                                  charges only those, a small program's
 *                                  writable mappings stay under 10 MiB, and
 *                                  mlockall locks megabytes, not the arena;
 *                                  1: the whole arena at once; 2: 1 except
 *                                  where vm.overcommit_memory is 2
 */
#include "config.h"
#include "mialloc.h"
#include "../tap.h"
#include "../rss.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
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

/* The permissions ("rw-p", "---p") of the mapping that holds p. */
static const char *perms_of(const void *p) {
  static char perms[8];
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  strcpy(perms, "none");
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char pr[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, pr) == 3 && (uintptr_t)p >= lo && (uintptr_t)p < hi) {
      strcpy(perms, pr);
      break;
    }
  }
  if (f) fclose(f);
  return perms;
}

static bool writable(const void *p) { return strncmp(perms_of(p), "rw", 2) == 0; }

/* Bytes of writable private mappings: what a kernel that does not
 * overcommit charges against its commit limit. */
static size_t writable_private_bytes(void) {
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  size_t total = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    char pr[8];
    if (sscanf(line, "%lx-%lx %7s", &lo, &hi, pr) == 3 && pr[1] == 'w' && pr[3] == 'p') total += hi - lo;
  }
  if (f) fclose(f);
  return total;
}

/* eager: is the arena writable beyond what is claimed?  on demand: are
 * claimed segments writable, unclaimed and purged ones not, and is memory
 * committed again zero and usable? */
static int commit_child(bool eager) {
  uint8_t *first = malloc(100);
  size_t arena_size;
  uint8_t *base = mi_arena_area(1, &arena_size);
  if (base == NULL || first < base || first >= base + arena_size) return 2;
  uint8_t *far = base + arena_size - 1;   /* no segment claimed up there yet */
  size_t charged = writable_private_bytes();
  printf("first block %s, ", perms_of(first));
  printf("arena end %s, writable private mappings %zu KiB\n", perms_of(far), charged >> 10);
  if (eager) return writable(first) && writable(far) && charged >= arena_size ? 0 : 1;
  /* one segment, the page map's part for the arena, the libraries' data;
   * where guarded sampling is on (secure builds), a sample taken during
   * start-up (about 1 run in 30) claims the guarded pages' own segment */
  size_t limit = (10u << 20) + (mi_option_get(mi_option_guarded_sample_rate) > 0 ? (4u << 20) : 0);
  if (!writable(first) || writable(far) || charged > limit) return 1;
  /* 64 MiB of small blocks and a 64 MiB huge block claim some 32 segments */
  enum { N = 16384 };
  static uint8_t *small[N];
  for (int i = 0; i < N; i++) small[i] = malloc(4000);
  uint8_t *huge = malloc(64u << 20);
  bool ok = writable(small[N - 1]) && writable(huge) && writable(huge + (64u << 20) - 1);
  memset(huge, 1, 64u << 20);
  for (int i = 0; i < N; i++) free(small[i]);
  free(huge);
  mi_collect(true);
  bool decommitted = !writable(huge) && !writable(small[N - 1]);
  printf("in use: %d, purged: %s\n", ok, perms_of(huge));
  uint8_t *again = calloc(1, 64u << 20);
  bool zero = again != NULL && writable(again) && again[0] == 0 && again[(64u << 20) - 1] == 0;
  if (again != NULL) memset(again, 2, 64u << 20);
  free(again);
  free(first);
  return ok && decommitted && zero ? 0 : 1;
}

/* 160 MiB of small blocks and a 32 MiB huge one under a 512 MiB limit
 * (under 256 MiB, with the libraries and the transient over-reservation
 * of an aligned mapping, it fit with a few MiB to spare, and CI once ran
 * out of them) */
static int limited_child(void) {
  enum { N = 160 * 1024 };
  /* mapped, not .bss: under the data limits of check_tight_limits the
   * kernel could not even start this program with 1.25 MiB of .bss */
  uint8_t **blocks = mmap(NULL, N * sizeof *blocks, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (blocks == MAP_FAILED) return 2;
  bool ok = true;
  for (int i = 0; i < N && ok; i++) {
    blocks[i] = malloc(1000);
    ok = blocks[i] != NULL;
    if (ok) memset(blocks[i], i & 0xff, 1000);
  }
  uint8_t *huge = ok ? malloc(32u << 20) : NULL;
  if (huge != NULL) memset(huge, 3, 32u << 20);
  for (int i = 0; i < N && ok; i++) ok = blocks[i][999] == (i & 0xff);
  printf("blocks %s, huge block %s\n", ok ? "ok" : "failed", huge != NULL ? "ok" : "failed");
  for (int i = 0; i < N; i++) free(blocks[i]);
  munmap(blocks, N * sizeof *blocks);
  free(huge);
  return ok && huge != NULL ? 0 : 1;
}

/* Under a tight address-space limit: the first allocations either work
 * or fail with ENOMEM (1), never crash. */
static int tight_child(void) {
  for (int i = 0; i < 1000; i++) {
    errno = 0;
    char *p = malloc(100 + (size_t)i);
    if (p == NULL) return errno == ENOMEM ? 1 : 2;
    p[99] = 1;   /* kept: the heap grows as a program's would */
  }
  return 0;
}

#if MIALLOC_SECURE
static const bool secure_build = true;
#else
static const bool secure_build = false;
#endif

static bool thp_always(void) {
  char buf[128] = "";
  FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
  if (f != NULL) {
    if (fgets(buf, sizeof buf, f) == NULL) buf[0] = 0;
    fclose(f);
  }
  return strstr(buf, "[always]") != NULL;
}

static size_t status_kib(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  size_t v = 0;
  while (f && fgets(line, sizeof line, f))
    if (strncmp(line, key, strlen(key)) == 0) v = strtoul(line + strlen(key) + 1, NULL, 10);
  if (f) fclose(f);
  return v;
}

/* mlockall after the arena exists (MCL_CURRENT faults in and locks every
 * accessible mapping), then more blocks (MCL_FUTURE: every new one) */
static int mlock_child(void) {
  free(malloc(100));
  if (mlockall(MCL_CURRENT | MCL_FUTURE) != 0) return 77;   /* RLIMIT_MEMLOCK */
  void *p[1000];
  for (int i = 0; i < 1000; i++) p[i] = malloc(1000);
  size_t locked = status_kib("VmLck:"), rss = status_kib("VmRSS:");
  printf("locked %zu KiB, rss %zu KiB\n", locked, rss);
  for (int i = 0; i < 1000; i++) free(p[i]);
  return rss < 64 * 1024 ? 0 : 1;
}

/* mi_reserve_os_memory_ex's commit flag: the whole arena writable at once,
 * or (without it) a segment at a time */
static int reserve_commit_child(void) {
  mi_arena_id_t eager_id, lazy_id;
  if (mi_reserve_os_memory_ex(64u << 20, true, false, true, &eager_id) != 0) return 2;
  if (mi_reserve_os_memory_ex(64u << 20, false, false, true, &lazy_id) != 0) return 2;
  size_t eager_size, lazy_size;
  uint8_t *eager = mi_arena_area(eager_id, &eager_size), *lazy = mi_arena_area(lazy_id, &lazy_size);
  bool ok = eager != NULL && lazy != NULL && writable(eager + eager_size - 1) && !writable(lazy + lazy_size - 1);
  printf("committed arena end %s, ", perms_of(eager + eager_size - 1));
  printf("uncommitted arena end %s\n", perms_of(lazy + lazy_size - 1));
  return ok ? 0 : 1;
}

static int child(const char *mode) {
  if (strcmp(mode, "limited") == 0) return limited_child();
  if (strcmp(mode, "tight") == 0) return tight_child();
  if (strcmp(mode, "reservecommit") == 0) return reserve_commit_child();
  if (strcmp(mode, "mlock") == 0) return mlock_child();
  if (strcmp(mode, "eager") == 0) return commit_child(true);
  if (strcmp(mode, "ondemand") == 0) return commit_child(false);
  if (strcmp(mode, "kernel") == 0) {
    char buf[8] = "";
    FILE *f = fopen("/proc/sys/vm/overcommit_memory", "r");
    if (f == NULL || fgets(buf, sizeof buf, f) == NULL) return 2;
    fclose(f);
    return commit_child(buf[0] != '2');
  }
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
  if (strcmp(mode, "thp") == 0) {
    void *p = malloc(100);
    bool hg = mapping_has_flag(p, "hg");
    printf("hg=%d\n", hg);
    free(p);
    return hg ? 0 : 1;
  }
  if (strcmp(mode, "nothp") == 0) {
    /* not asked for: secure builds and systems whose THP mode is
     * "always" mark the arena "nh" (no huge pages), others leave it be */
    void *p = malloc(100);
    bool hg = mapping_has_flag(p, "hg"), nh = mapping_has_flag(p, "nh");
    /* "always" spares only a small program's heap, the first 16 MiB of
     * the arena: past it the system decides again */
    uintptr_t first = (uintptr_t)p & ~(uintptr_t)((4u << 20) - 1);
    void *big[16] = {0};
    int far = -1;
    for (int i = 0; i < 16 && far < 0; i++) {
      big[i] = malloc(8u << 20);
      if (big[i] != NULL && (uintptr_t)big[i] >= first + (16u << 20) && (uintptr_t)big[i] < first + (1u << 30))
        far = mapping_has_flag(big[i], "nh");
    }
    printf("hg=%d nh=%d, past 16 MiB nh=%d, system THP mode always: %d\n", hg, nh, far, thp_always());
    for (int i = 0; i < 16; i++) free(big[i]);
    free(p);
    return !hg && nh == (secure_build || thp_always()) && far == secure_build ? 0 : 1;
  }
  return 3;
}

static bool quiet_children;   /* the loader's and mialloc's messages of expected failures */

static int run_rlimited(const char *mode, const char *var, const char *var2, int resource, size_t limit) {
  pid_t pid = fork();
  if (pid == 0) {
    if (quiet_children && freopen("/dev/null", "w", stderr) == NULL) _exit(125);
    struct rlimit rl = {limit, limit};
    if (limit != 0 && setrlimit(resource, &rl) != 0) _exit(126);
    /* only the variables under test, plus the library path the libtool
     * wrapper set up for the uninstalled library */
    char ldpath[4096];
    snprintf(ldpath, sizeof ldpath, "LD_LIBRARY_PATH=%s", getenv("LD_LIBRARY_PATH") ? getenv("LD_LIBRARY_PATH") : "");
    char *envp[] = {(char *)var, ldpath, (char *)var2, NULL};
    char *argv[] = {(char *)"test-os-options", (char *)mode, NULL};
    execve("/proc/self/exe", argv, envp);
    _exit(127);
  }
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128;
}

static int run_limited(const char *mode, const char *var, const char *var2, size_t as_limit) {
  return run_rlimited(mode, var, var2, RLIMIT_AS, as_limit);
}

/* A program started under limits of resource from 1 MiB to max_mib in
 * steps of step_mib: below some limit it cannot start or allocate, and
 * from there on it must allocate under every limit.  Returns that limit
 * (-1: none). */
static int check_tight_limits(int resource, const char *what, int step_mib, int max_mib) {
  int first_ok = -1, failed_after = -1, crashed = -1;
  quiet_children = true;
  for (int mib = step_mib; mib <= max_mib; mib += step_mib) {
    int rc = run_rlimited("tight", "MIALLOC_VERBOSE=0", NULL, resource, (size_t)mib << 20);
    if (rc == 0 && first_ok < 0) first_ok = mib;
    if (rc != 0 && first_ok >= 0 && failed_after < 0) failed_after = mib;
    if (rc == 2 || rc >= 128) crashed = mib;   /* 127: the loader could not map a library */
  }
  quiet_children = false;
  printf("# %s: allocations work from %d MiB on\n", what, first_ok);
  TAP_OK(first_ok > 0, "a program allocates under %s of %d MiB or less", what, max_mib);
  TAP_OK(failed_after < 0, "and under every higher limit (first failure above it: %d MiB)", failed_after);
  TAP_OK(crashed < 0, "under lower limits malloc fails with ENOMEM, never a crash (last: %d MiB)", crashed);
  return first_ok;
}

/* Under address-space limits: the first arena is reserved at half the
 * size after each refusal, and a reservation that fits but leaves no room
 * for its page-map leaf used to fail every allocation under a band of
 * limits (36 MiB for ls) while lower ones worked.  Under data limits
 * (ulimit -d: writable private memory): the page map's 8 MiB empty leaf is
 * read-only from the start (src/empty-leaf.ld); as .bss it kept the
 * library from loading under 9 MiB.  A first segment (4 MiB, made writable
 * when claimed) and the rest fit in 8 MiB. */
static void check_tight_rlimits(void) {
  check_tight_limits(RLIMIT_AS, "an address-space limit", 2, 128);
  int data_ok = check_tight_limits(RLIMIT_DATA, "a data limit", 1, 32);
  TAP_OK(data_ok > 0 && data_ok <= 8, "the library loads and allocates under a data limit of 8 MiB (from %d MiB)",
         data_ok);
}

static int run2(const char *mode, const char *var, const char *var2) { return run_limited(mode, var, var2, 0); }
static int run(const char *mode, const char *var) { return run2(mode, var, NULL); }

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
         "without it the arena is not marked; where the system's mode is always, its first 16 MiB are marked "
         "for no huge pages, the rest is not (secure builds: all of it)");
  TAP_OK(run_limited("limited", "MIALLOC_VERBOSE=0", NULL, 512u << 20) == 0,
         "under an address-space limit of 512 MiB (below a default arena) smaller arenas serve 160 MiB of blocks");
  check_tight_rlimits();
  TAP_OK(run2("ondemand", "MIALLOC_ARENA_EAGER_COMMIT=0", "MIALLOC_PURGE_DELAY=0") == 0,
         "MIALLOC_ARENA_EAGER_COMMIT=0: claimed segments are writable, unclaimed and purged ones are not, "
         "and memory committed again reads zero");
  TAP_OK(run("eager", "MIALLOC_ARENA_EAGER_COMMIT=1") == 0,
         "MIALLOC_ARENA_EAGER_COMMIT=1: the whole arena is writable at once");
  TAP_OK(run2("kernel", "MIALLOC_ARENA_EAGER_COMMIT=2", "MIALLOC_PURGE_DELAY=0") == 0,
         "MIALLOC_ARENA_EAGER_COMMIT=2: on demand exactly where the kernel does not overcommit");
  TAP_OK(run2("ondemand", "MIALLOC_VERBOSE=0", "MIALLOC_PURGE_DELAY=0") == 0, "by default arenas commit on demand");
  TAP_OK(run("reservecommit", "MIALLOC_VERBOSE=0") == 0,
         "mi_reserve_os_memory_ex(commit = true): the arena is writable at once; without commit, not");
  int rc = run("mlock", "MIALLOC_VERBOSE=0");
  if (rc == 77)
    printf("ok %d - mlockall # SKIP mlockall refused here (RLIMIT_MEMLOCK)\n", ++tap_count);
  else
    TAP_OK(rc == 0, "mlockall(MCL_CURRENT | MCL_FUTURE) with an arena in place: the RSS stays under 64 MiB");
  return tap_done();
}

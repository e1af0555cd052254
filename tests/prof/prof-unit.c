/* prof-unit.c -- unit tests of libmialloc-prof's parts, linked statically
 * against its convenience library.
 *
 *   prof-unit              TAP: size parsing, base names, safe output files,
 *                          build ids, the location table
 *   prof-unit --write DIR  write a synthetic profile through the internal
 *                          encoders (DIR/synth.<pid>.0.pb.gz and
 *                          DIR/synth.<pid>.0.heap) for the readers
 *                          (test-encoders.sh); prints "pid build-id"
 */
/* The allocation sites must stay separate functions with their own call
 * instructions whatever CFLAGS say (automake puts the user's -O2 after the
 * per-program flags; -O2 merges and splits such small functions). */
#pragma GCC optimize("O0")

#include "../../prof/internal.h"
#include "../tap.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static mi_heap_t *heap;

/* Captures the way on_alloc does (its own frame is dropped). */
__attribute__((noinline)) static unsigned capture(uintptr_t *frames, unsigned max) {
  void *raw[PROF_RAW_FRAMES];
  unsigned n = prof_stack_trim(raw, prof_stack_unwind(raw, PROF_RAW_FRAMES), frames, max);
  __asm__ volatile("" ::: "memory");
  return n;
}

/* Two allocation sites the readers must name. */
__attribute__((noinline)) static unsigned site_alpha(uintptr_t *frames) {
  unsigned n = capture(frames, PROF_MAX_FRAMES);
  __asm__ volatile("" ::: "memory");
  return n;
}

__attribute__((noinline)) static unsigned site_beta(uintptr_t *frames) {
  unsigned n = capture(frames, PROF_MAX_FRAMES - 1); /* (differs from alpha) */
  __asm__ volatile("" ::: "memory");
  return n;
}

/* one call site for repeated captures */
__attribute__((noinline)) static unsigned capture_in_loop(uintptr_t *frames) {
  unsigned n = site_alpha(frames);
  __asm__ volatile("" ::: "memory");
  return n;
}

static int write_synthetic(const char *dir) {
  static uintptr_t fa[PROF_MAX_FRAMES], fb[PROF_MAX_FRAMES];
  unsigned na = site_alpha(fa), nb = site_beta(fb);
  /* Estimates as the profiler forms them: k samples of size bytes at rate
   * R stand for k/q objects and k*size/q bytes, q = 1 - exp(-size/R). */
  const double R = 524288, one = (double)((uint64_t)1 << PROF_COUNT_SHIFT);
  double qa = -expm1(-100 / R), qb = -expm1(-1048576 / R);
  prof_sample_t s[2] = {
      /* alpha: 100-byte objects, 4 samples in use, 8 allocated */
      {.tid = 11, .depth = na, .frames = fa, .alloc_count = (uint64_t)(8 / qa * one),
       .alloc_bytes = (uint64_t)(800 / qa), .inuse_count = (uint64_t)(4 / qa * one),
       .inuse_bytes = (uint64_t)(400 / qa)},
      /* beta: 1 MiB objects, 10 samples in use, 20 allocated */
      {.tid = 12, .depth = nb, .frames = fb, .alloc_count = (uint64_t)(20 / qb * one),
       .alloc_bytes = (uint64_t)(20 * 1048576 / qb), .inuse_count = (uint64_t)(10 / qb * one),
       .inuse_bytes = (uint64_t)(10 * 1048576 / qb)},
  };
  prof_maps_t maps;
  if (!prof_maps_read(&maps, heap)) return 1;
  prof_snapshot_t snap = {.rate = 524288, .time_nanos = 1700000000000000000ull, .duration_nanos = 5,
                          .samples = s, .nsamples = 2, .maps = &maps};
  char base[4096];
  snprintf(base, sizeof base, "%s/synth", dir);
  for (int text = 0; text < 2; text++) {
    prof_buf_t out;
    prof_buf_init(&out, heap);
    bool ok = text ? prof_encode_text(&out, &snap) : prof_encode_proto(&out, &snap);
    _Atomic long seq = 0;
    if (!ok || prof_output_write(base, text ? "heap" : "pb.gz", getpid(), &seq, &out, !text, heap) != 0) {
      fprintf(stderr, "writing the %s profile failed\n", text ? "text" : "proto");
      return 1;
    }
    prof_buf_free(&out);
  }
  printf("%d %s\n", (int)getpid(), maps.count > 0 ? maps.map[0].build_id : "-");
  prof_maps_free(&maps);
  return 0;
}

static void check_sizes(void) {
  struct {
    const char *s;
    bool ok;
    uint64_t v;
  } cases[] = {
      {"0", true, 0},          {"512", true, 512},       {"512K", true, 512 << 10}, {"512KiB", true, 512 << 10},
      {"4k", true, 4096},      {"3M", true, 3 << 20},    {"3MiB", true, 3 << 20},   {"1G", true, 1u << 30},
      {"2GiB", true, 2ull << 30}, {"1GB", true, 1u << 30}, {"", false, 0},        {"K", false, 0},
      {"12Q", false, 0},       {"-1", false, 0},         {"1KiBx", false, 0},       {"99999999999999999999", false, 0},
      {"17179869184G", false, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    uint64_t v = 12345;
    bool ok = prof_parse_size(cases[i].s, &v);
    TAP_OK(ok == cases[i].ok && (!ok || v == cases[i].v), "size \"%s\" %s", cases[i].s,
           cases[i].ok ? "parses" : "is rejected");
  }
}

static void check_base(void) {
  struct {
    const char *in, *out;
    bool text;
  } cases[] = {
      {"/tmp/x", "/tmp/x", false},          {"/tmp/x.heap", "/tmp/x", true}, {"/tmp/x.text", "/tmp/x", true},
      {"/tmp/x.pb.gz", "/tmp/x", false},    {"prof.pb", "prof", false},      {"a.b", "a.b", false},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char out[256];
    bool text = !cases[i].text;
    bool ok = prof_output_base(cases[i].in, out, sizeof out, &text);
    TAP_OK(ok && strcmp(out, cases[i].out) == 0 && text == cases[i].text, "base %s -> %s (%s)", cases[i].in,
           cases[i].out, cases[i].text ? "text" : "protobuf");
  }
  char out[16];
  bool text;
  TAP_OK(!prof_output_base(".heap", out, sizeof out, &text), "a base that is only an extension is refused");
}

static char *slurp(const char *path) {
  static char buf[4096];
  int fd = open(path, O_RDONLY);
  if (fd < 0) return NULL;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  buf[n > 0 ? n : 0] = 0;
  return buf;
}

static void check_output_files(void) {
  char dir[] = "/tmp/prof-unit-XXXXXX";
  if (mkdtemp(dir) == NULL) {
    TAP_OK(0, "mkdtemp");
    return;
  }
  char base[256], p0[300], p1[300], p2[300], victim[300];
  snprintf(base, sizeof base, "%s/out", dir);
  snprintf(p0, sizeof p0, "%s.%d.0.heap", base, (int)getpid());
  snprintf(p1, sizeof p1, "%s.%d.1.heap", base, (int)getpid());
  snprintf(p2, sizeof p2, "%s.%d.2.heap", base, (int)getpid());
  snprintf(victim, sizeof victim, "%s/victim", dir);
  int fd = open(victim, O_WRONLY | O_CREAT, 0644);
  (void)!write(fd, "precious\n", 9);
  close(fd);
  (void)!symlink(victim, p0); /* planted symlink at the first name */
  fd = open(p1, O_WRONLY | O_CREAT, 0644);
  (void)!write(fd, "existing\n", 9); /* an existing file at the second */
  close(fd);

  prof_buf_t data;
  prof_buf_init(&data, heap);
  prof_buf_puts(&data, "profile\n");
  _Atomic long seq = 0;
  long got = prof_output_write(base, "heap", getpid(), &seq, &data, false, heap);
  TAP_OK(got == 2, "the output skips a planted symlink and an existing file (seq %ld)", got);
  char *v = slurp(victim);
  TAP_OK(v && strcmp(v, "precious\n") == 0, "the symlink's target is untouched");
  struct stat st;
  TAP_OK(lstat(p0, &st) == 0 && S_ISLNK(st.st_mode), "the symlink is still a symlink");
  v = slurp(p1);
  TAP_OK(v && strcmp(v, "existing\n") == 0, "the existing file is not overwritten");
  v = slurp(p2);
  TAP_OK(v && strcmp(v, "profile\n") == 0, "the profile went to the next free name");
  int rc = stat(p2, &st);
  TAP_OK(rc == 0 && (st.st_mode & 0777) == 0600, "the profile has mode 0600 (%o)", st.st_mode & 0777);
  got = prof_output_write(base, "heap", getpid(), &seq, &data, false, heap);
  TAP_OK(got == 3, "the sequence continues (%ld)", got);
  /* no temporary files are left */
  char cmd[400];
  snprintf(cmd, sizeof cmd, "ls %s | grep -c tmp", dir);
  FILE *f = popen(cmd, "r");
  int tmps = -1;
  if (f) {
    if (fscanf(f, "%d", &tmps) != 1) tmps = -1;
    pclose(f);
  }
  TAP_OK(tmps == 0, "no temporary files remain (%d)", tmps);
  /* an unwritable directory fails cleanly */
  char bad[300];
  snprintf(bad, sizeof bad, "%s/no/such/dir/x", dir);
  errno = 0;
  got = prof_output_write(bad, "heap", getpid(), &seq, &data, false, heap);
  TAP_OK(got == -1 && errno == ENOENT, "a missing directory gives -1/ENOENT");
  prof_buf_free(&data);
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  (void)!system(cmd);
}

static void check_build_id(void) {
  char id[160];
  bool ok = prof_elf_build_id("/proc/self/exe", id, sizeof id);
  char cmd[256], want[160] = "";
  snprintf(cmd, sizeof cmd, "readelf -n /proc/%d/exe 2>/dev/null | awk '/Build ID/ {print $3}'", (int)getpid());
  FILE *f = popen(cmd, "r");
  if (f) {
    if (fscanf(f, "%159s", want) != 1) want[0] = 0;
    pclose(f);
  }
  TAP_OK(ok && want[0] && strcmp(id, want) == 0, "build id of the test program (%s) is readelf's (%s)", id, want);
  TAP_OK(!prof_elf_build_id("/etc/passwd", id, sizeof id), "a non-ELF file has no build id");
  prof_maps_t m;
  ok = prof_maps_read(&m, heap);
  TAP_OK(ok && m.count > 2, "mappings read (%zu)", m.count);
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  TAP_OK(m.count > 0 && strcmp(m.map[0].path, exe) == 0, "mapping 0 is the main program");
  TAP_OK(prof_maps_find(&m, (uint64_t)(uintptr_t)&check_build_id) == 0, "a function of the program is in mapping 0");
  prof_maps_free(&m);
}

static void check_table(void) {
  prof_table_t t;
  TAP_OK(prof_table_init(&t, heap, 4), "table");
  uintptr_t f1[3] = {1, 2, 3}, f2[3] = {1, 2, 4};
  prof_loc_t *a = prof_table_get(&t, 1, f1, 3), *b = prof_table_get(&t, 1, f2, 3);
  prof_loc_t *c = prof_table_get(&t, 2, f1, 3), *d = prof_table_get(&t, 1, f1, 2);
  TAP_OK(a && b && c && d && a != b && a != c && a != d && b != c, "distinct keys, distinct locations");
  TAP_OK(prof_table_get(&t, 1, f1, 3) == a && prof_table_get(&t, 2, f1, 3) == c, "same key, same location");
  for (uintptr_t i = 0; i < 1000; i++) prof_table_get(&t, (pid_t)i, f1, 3);
  /* (1, f1) and (2, f1) existed already */
  TAP_OK(atomic_load(&t.count) == 4 + 1000 - 2, "one location per key (%zu)", atomic_load(&t.count));
}

int main(int argc, char **argv) {
  heap = mi_heap_new();
  mi_heap_profile_disable(heap);
  prof_stack_init();
  if (argc == 3 && strcmp(argv[1], "--write") == 0) return write_synthetic(argv[2]);
  check_sizes();
  check_base();
  check_output_files();
  check_build_id();
  check_table();
  uintptr_t fr[PROF_MAX_FRAMES];
  unsigned n = site_alpha(fr);
  TAP_OK(n >= 2 && fr[0] > (uintptr_t)&site_alpha && fr[0] < (uintptr_t)&site_alpha + 256,
         "the captured stack starts at the capture's caller (%u frames)", n);
  /* A thread's first captures take backtrace, the later ones (in builds
   * with libunwind) unw_backtrace's cached unwinder: the same stack must
   * come out either way, or one site would count as two. */
  static uintptr_t again[10][PROF_MAX_FRAMES];
  unsigned depth[10], same = 0;
  for (int k = 0; k < 10; k++) depth[k] = capture_in_loop(again[k]);
  /* (the loop's own return addresses differ where the compiler unrolls
   * it: frames from site_alpha up to capture_in_loop are compared) */
  for (int k = 1; k < 10; k++)
    if (depth[k] == depth[0] && memcmp(again[k], again[0], 2 * sizeof again[0][0]) == 0) same++;
  TAP_OK(depth[0] >= 3 && same == 9, "ten captures at one site give one stack (%u frames; %u of 9 the same)",
         depth[0], same);
  return tap_done();
}

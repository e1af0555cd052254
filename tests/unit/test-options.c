/* test-options.c -- MIALLOC_* environment parsing, mi_option_* and the
 * privileged-process rule.  Environment cases run in a re-executed child
 * so each sees a fresh process with exactly the variables we set. */
#include "internal.h"
#include "../tap.h"

#include <fcntl.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* the documented default of MIALLOC_PURGE_DELAY (mialloc-options(7)) */
#define DEFAULT_PURGE_DELAY 25

/* Child mode: print the option values the allocator settled on. */
#include <sys/auxv.h>

static int child_main(void) {
  printf("secure=%lu ", getauxval(AT_SECURE));
  printf("arena_reserve=%ld purge_delay=%ld verbose=%ld show_errors=%ld purge_decommits=%ld\n",
         mi_option_get(mi_option_arena_reserve), mi_option_get(mi_option_purge_delay),
         mi_option_get(mi_option_verbose), mi_option_get(mi_option_show_errors),
         mi_option_get(mi_option_purge_decommits));
  return 0;
}

/* Run path (default: ourselves) in child mode with envp; capture stdout
 * and stderr into out/err. */
static int run_child(const char *path, char *const envp[], char *out, size_t outn, char *err,
                     size_t errn) {
  int po[2], pe[2];
  if (pipe(po) != 0 || pipe(pe) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    dup2(po[1], 1);
    dup2(pe[1], 2);
    close(po[0]);
    close(pe[0]);
    char *const argv[] = {(char *)path, (char *)"child", NULL};
    execve(path, argv, envp);
    _exit(127);
  }
  close(po[1]);
  close(pe[1]);
  ssize_t n = read(po[0], out, outn - 1);
  out[n > 0 ? n : 0] = 0;
  size_t total = 0;
  while ((n = read(pe[0], err + total, errn - 1 - total)) > 0) total += (size_t)n;
  err[total] = 0;
  close(po[0]);
  close(pe[0]);
  int status;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static long field(const char *out, const char *name) {
  const char *p = strstr(out, name);
  if (p == NULL) return -12345;
  return strtol(p + strlen(name) + 1, NULL, 10);
}

static void check_env(const char *var, const char *opt, long expect, bool expect_warning) {
  char out[512], err[2048];
  char *envp[] = {(char *)var, NULL};
  int rc = run_child("/proc/self/exe", envp, out, sizeof out, err, sizeof err);
  long got = field(out, opt);
  TAP_OK(rc == 0 && got == expect, "%s gives %s=%ld (got %ld)", var, opt, expect, got);
  bool warned = strstr(err, "invalid value") != NULL;
  TAP_OK(warned == expect_warning, "%s %s a warning", var, expect_warning ? "gives" : "gives no");
  if (warned != expect_warning) tap_diag("stderr: %s", err);
}

/* A setuid copy of this test, owned by nobody and run by root, starts with
 * AT_SECURE set: it must ignore the environment. */
static bool try_privileged_run(const char *dir, char *out, size_t outn, char *err, size_t errn) {
  struct passwd *pw = getpwnam("nobody");
  char path[256];
  snprintf(path, sizeof path, "%s/test-options-setuid-XXXXXX", dir);
  int fd = mkstemp(path);
  if (pw == NULL || fd < 0) return false;
  int src = open("/proc/self/exe", O_RDONLY);
  char buf[65536];
  ssize_t n;
  while ((n = read(src, buf, sizeof buf)) > 0)
    if (write(fd, buf, (size_t)n) != n) break;
  close(src);
  fchown(fd, pw->pw_uid, pw->pw_gid);
  fchmod(fd, 04755);
  close(fd);
  char *envp[] = {(char *)"MIALLOC_PURGE_DELAY=777", (char *)"MIALLOC_VERBOSE=1", NULL};
  int rc = run_child(path, envp, out, outn, err, errn);
  unlink(path);
  /* a nosuid file system ignores the bit: then try another directory */
  return rc == 0 && field(out, "secure") == 1;
}

static void check_privileged(void) {
  char out[512], err[2048];
  TAP_OK(getuid() == 0, "running as root, so a setuid copy can be made");
  bool ran = try_privileged_run(".", out, sizeof out, err, sizeof err) ||
             try_privileged_run("/tmp", out, sizeof out, err, sizeof err) ||
             try_privileged_run("/var/tmp", out, sizeof out, err, sizeof err);
  TAP_OK(ran, "a setuid copy ran with AT_SECURE set");
  TAP_OK(field(out, "purge_delay") == DEFAULT_PURGE_DELAY, "privileged process ignores MIALLOC_PURGE_DELAY (got %ld)",
         field(out, "purge_delay"));
  TAP_OK(field(out, "verbose") == 0 && strstr(err, "mialloc:") == NULL,
         "privileged process ignores MIALLOC_VERBOSE");
}

/* mi_options_print: one line per option of the enum, in enum order, each
 * with the value mi_option_get gives, its default and where it came from. */
static char printed[16384];
static void capture(const char *msg, void *arg) {
  (void)arg;
  strncat(printed, msg, sizeof printed - strlen(printed) - 1);
}

static void check_options_print(void) {
  mi_option_set(mi_option_max_segment_reclaim, 7);
  printed[0] = 0;
  mi_register_output(capture, NULL);
  mi_options_print();
  mi_register_output(NULL, NULL);
  /* (the parse below cuts the text into lines) */
  const char *r = strstr(printed, "MIALLOC_MAX_SEGMENT_RECLAIM ");
  bool set_shown = r != NULL && strstr(r, "from mi_option_set)") != NULL &&
                   strstr(r, "from mi_option_set)") < strchr(r, '\n');
  const char *t = strstr(printed, "MIALLOC_OS_TAG ");
  bool compat_shown = t != NULL && strstr(t, "accepted for compatibility") != NULL &&
                      strstr(t, "accepted for compatibility") < strchr(t, '\n');
  int lines = 0, good = 0;
  char names[_mi_option_last][40];
  for (char *line = printed; *line != 0; lines++) {
    char *end = strchr(line, '\n');
    if (end == NULL) break;
    *end = 0;
    char name[40];
    long value, def;
    if (lines < _mi_option_last &&
        sscanf(line, "mialloc: option MIALLOC_%39s = %ld (default %ld, from", name, &value, &def) == 3 &&
        value == mi_option_get((mi_option_t)lines) && strstr(line, ") ") != NULL &&
        strlen(strstr(line, ") ")) > 4) {
      good++;
      snprintf(names[lines], sizeof names[lines], "%s", name);
    } else {
      tap_diag("unexpected line: %s", line);
    }
    line = end + 1;
  }
  TAP_OK(lines == _mi_option_last, "mi_options_print prints %d lines, one per option (%d)",
         (int)_mi_option_last, lines);
  TAP_OK(good == _mi_option_last, "each with name, current value, default and a description");
  bool unique = true;
  for (int i = 0; i < good; i++)
    for (int k = 0; k < i; k++) unique = unique && strcmp(names[i], names[k]) != 0;
  TAP_OK(unique, "no name twice");
  TAP_OK(good == _mi_option_last && strcmp(names[mi_option_show_errors], "SHOW_ERRORS") == 0 &&
         strcmp(names[mi_option_purge_delay], "PURGE_DELAY") == 0 &&
         strcmp(names[mi_option_purge_thread], "PURGE_THREAD") == 0,
         "names follow the enum (SHOW_ERRORS first, PURGE_THREAD last)");
  TAP_OK(set_shown, "a value set by the program says so");
  TAP_OK(compat_shown, "a compatibility-only option says so");
  mi_option_set(mi_option_max_segment_reclaim, 10);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "child") == 0) return child_main();

  check_env("MIALLOC_ARENA_RESERVE=12Q", "arena_reserve", 1L << 30, true);
  check_env("MIALLOC_ARENA_RESERVE=64MiB", "arena_reserve", 64L << 20, false);
  check_env("MIALLOC_ARENA_RESERVE=2g", "arena_reserve", 2L << 30, false);
  check_env("MIALLOC_ARENA_RESERVE=512k", "arena_reserve", 512L << 10, false);
  check_env("MIALLOC_ARENA_RESERVE=3M", "arena_reserve", 3L << 20, false);
  check_env("MIALLOC_ARENA_RESERVE=1GB", "arena_reserve", 1L << 30, false);
  check_env("MIALLOC_ARENA_RESERVE=", "arena_reserve", 1L << 30, false);
  check_env("MIALLOC_ARENA_RESERVE=99999999999999999999999", "arena_reserve", 1L << 30, true);
  check_env("MIALLOC_PURGE_DELAY=250", "purge_delay", 250, false);
  check_env("MIALLOC_PURGE_DELAY=-1", "purge_delay", -1, false);
  check_env("MIALLOC_PURGE_DELAY=10K", "purge_delay", DEFAULT_PURGE_DELAY, true);
  check_env("mialloc_purge_delay=42", "purge_delay", 42, false);
  check_env("MIALLOC_VERBOSE=yes", "verbose", 1, false);
  check_env("MIALLOC_SHOW_ERRORS=Off", "show_errors", 0, false);
  check_env("MIALLOC_PURGE_DECOMMITS=FALSE", "purge_decommits", 0, false);
  check_env("MIALLOC_PURGE_DECOMMITS=maybe", "purge_decommits", 1, true);

  /* the API */
  long old = mi_option_get(mi_option_purge_delay);
  mi_option_set(mi_option_purge_delay, 5);
  TAP_OK(mi_option_get(mi_option_purge_delay) == 5, "mi_option_set/get round trip");
  mi_option_set(mi_option_purge_delay, old);
  mi_option_enable(mi_option_show_stats);
  TAP_OK(mi_option_is_enabled(mi_option_show_stats), "mi_option_enable");
  mi_option_disable(mi_option_show_stats);
  TAP_OK(!mi_option_is_enabled(mi_option_show_stats), "mi_option_disable");
  TAP_OK(mi_option_get_clamp(mi_option_purge_delay, 0, 10) == 10, "mi_option_get_clamp clamps");
  TAP_OK(mi_option_get((mi_option_t)9999) == 0, "unknown option reads as 0");
  TAP_OK(mi_option_get_size(mi_option_arena_reserve) == (size_t)1 << 30, "mi_option_get_size");

  check_options_print();
  check_privileged();
  return tap_done();
}

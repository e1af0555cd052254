/* test-secrets.c -- the process secrets (the seed of free-list keys and
 * segment cookies, the free mark of release builds) differ from run to
 * run: drawn with getrandom, and where it fails (before the kernel's
 * generator is ready at boot, or refused by a sandbox's seccomp filter,
 * emulated here) from the fallback, never left at the built-in values. */
#include "internal.h"
#include "../tap.h"

#include <sys/wait.h>
#include <unistd.h>

#include "../seccomp.h"

#define BUILT_IN_MARK ((uintptr_t)0x6d69616c6c6f6321u)

/* The secrets of a fresh process (this program re-executed), with
 * getrandom refused if asked; false if it could not run. */
static bool secrets_of_child(bool refuse, uintptr_t out[2]) {
  int fds[2];
  if (pipe(fds) != 0) return false;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    if (refuse && !refuse_getrandom()) _exit(77);
    char *argv[] = {(char *)"test-secrets", (char *)"print", NULL};
    execv("/proc/self/exe", argv);
    _exit(127);
  }
  close(fds[1]);
  char buf[128] = "";
  ssize_t n = read(fds[0], buf, sizeof buf - 1);
  close(fds[0]);
  int st;
  waitpid(pid, &st, 0);
  if (n <= 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) return false;
  unsigned long a, b;
  if (sscanf(buf, "%lx %lx", &a, &b) != 2) return false;
  out[0] = a;
  out[1] = b;
  return true;
}

static bool fresh(const uintptr_t s[2]) { return s[0] > 1 && (s[0] & 1) && (s[1] & 1) && s[1] != (BUILT_IN_MARK | 1); }

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "print") == 0) {
    mi_free(mi_malloc(16));   /* initialised for sure */
    printf("%lx %lx\n", (unsigned long)mia_process_secret, (unsigned long)mia_free_mark);
    return 0;
  }
  for (int refuse = 0; refuse <= 1; refuse++) {
    const char *how = refuse ? "getrandom refused" : "getrandom working";
    uintptr_t a[2], b[2];
    bool ran = secrets_of_child(refuse, a) && secrets_of_child(refuse, b);
    if (!ran && refuse) {
      printf("ok %d - %s # SKIP no seccomp filter here\n", ++tap_count, how);
      continue;
    }
    TAP_OK(ran, "%s: two processes report their secrets", how);
    if (!ran) continue;
    TAP_OK(fresh(a) && fresh(b), "%s: neither is the built-in value (%lx %lx, %lx %lx)", how, (unsigned long)a[0],
           (unsigned long)a[1], (unsigned long)b[0], (unsigned long)b[1]);
    TAP_OK(a[0] != b[0] && a[1] != b[1], "%s: they differ between the two processes", how);
  }
  return tap_done();
}

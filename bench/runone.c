/* runone.c - run one command and measure it (helper of bench/run, not a
 * workload).
 *
 * Why a C helper: Linux accounts the peak RSS (ru_maxrss) of a process as
 * the maximum over every address space it had, including the one it had
 * before execve().  A child spawned directly by the Python harness would
 * therefore report at least the harness's own RSS (tens of MiB).  This small
 * program forks the command from its own tiny address space, so the peak RSS
 * reported is the command's.
 *
 * It also keeps LD_PRELOAD away from itself: bench/run passes the libraries
 * in BENCH_PRELOAD, and only the child gets them as LD_PRELOAD, so a broken
 * allocator cannot take the measuring process down with it.
 *
 * Usage: runone RESULT_FILE TIMEOUT_SECONDS COMMAND [ARGS...]
 * Writes one line to RESULT_FILE:
 *     <wait status> <wall s> <user s> <sys s> <maxrss KiB> <timed out 0/1>
 * The command runs in its own process group; on timeout the whole group is
 * killed with SIGKILL.  Exit status: 0 if the result was written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t timed_out;
static pid_t child;

static void on_alarm(int sig)
{
    (void)sig;
    timed_out = 1;
    kill(-child, SIGKILL);
}

/* Interrupted (Ctrl-C reaches the harness's process group, not the
 * command's): take the command down with us. */
static void on_stop(int sig)
{
    kill(-child, SIGKILL);
    signal(sig, SIG_DFL);
    raise(sig);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double tv(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec * 1e-6;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: runone RESULT_FILE TIMEOUT_SECONDS COMMAND [ARGS...]\n");
        return 2;
    }
    const char *result = argv[1];
    double timeout = strtod(argv[2], NULL);
    const char *preload = getenv("BENCH_PRELOAD");

    double t0 = now();
    child = fork();
    if (child < 0) {
        perror("runone: fork");
        return 2;
    }
    if (child == 0) {
        setpgid(0, 0);
        if (preload && *preload)
            setenv("LD_PRELOAD", preload, 1);
        unsetenv("BENCH_PRELOAD");
        execvp(argv[3], argv + 3);
        fprintf(stderr, "runone: cannot execute %s: %s\n", argv[3], strerror(errno));
        _exit(127);
    }
    setpgid(child, child); /* also here, so that killpg works at once */

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    sa.sa_handler = on_stop;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    struct itimerval it = {{0, 0}, {(time_t)timeout, (long)((timeout - (double)(time_t)timeout) * 1e6)}};
    if (timeout > 0)
        setitimer(ITIMER_REAL, &it, NULL);

    int status;
    struct rusage ru;
    pid_t r;
    do
        r = wait4(child, &status, 0, &ru);
    while (r < 0 && errno == EINTR);
    double wall = now() - t0;
    if (r < 0) {
        perror("runone: wait4");
        return 2;
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    kill(-child, SIGKILL); /* whatever the command left behind in its group */

    FILE *f = fopen(result, "w");
    if (!f) {
        perror("runone: result file");
        return 2;
    }
    fprintf(f, "%d %.6f %.6f %.6f %ld %d\n", status, wall, tv(ru.ru_utime), tv(ru.ru_stime),
            ru.ru_maxrss, (int)timed_out);
    return fclose(f) == 0 ? 0 : 2;
}

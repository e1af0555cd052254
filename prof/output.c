/* output.c -- profile file names and safe creation.
 *
 * A snapshot goes to <base>.<pid>.<seq>.<ext>.  It is written to a temporary
 * name created with O_CREAT|O_EXCL|O_NOFOLLOW (a planted file or symlink
 * makes the open fail; another random name is tried), mode 0600, then moved
 * to the final name with renameat2(RENAME_NOREPLACE), or link()+unlink()
 * where the file system does not support that: both fail rather than
 * replace an existing name, and neither follows a symlink at the final
 * name.  An existing final name is never overwritten: the next sequence
 * number is tried.  Readers never see half a profile.
 */
#include "internal.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h> /* RENAME_NOREPLACE, renameat2 */
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static bool ends_with(const char *s, size_t n, const char *suffix) {
  size_t m = strlen(suffix);
  return n >= m && memcmp(s + n - m, suffix, m) == 0;
}

bool prof_output_base(const char *base, char *out, size_t outn, bool *text) {
  size_t n = strlen(base);
  *text = false;
  if (n == 0 || n >= outn) return false;
  if (ends_with(base, n, ".heap") || ends_with(base, n, ".text")) {
    *text = true;
    n -= 5;
  } else if (ends_with(base, n, ".pb.gz")) {
    n -= 6;
  } else if (ends_with(base, n, ".pb")) {
    n -= 3;
  }
  if (n == 0) return false;
  memcpy(out, base, n);
  out[n] = 0;
  return true;
}

/* path = base.pid.seq.ext */
static bool make_name(char *path, size_t pathn, const char *base, pid_t pid, long seq, const char *ext) {
  char num[24];
  size_t n = strlen(base);
  if (n + 1 + 21 + 1 + 21 + 1 + strlen(ext) + 1 > pathn) return false;
  memcpy(path, base, n);
  path[n++] = '.';
  n += prof_fmt_u64(path + n, (uint64_t)pid);
  path[n++] = '.';
  size_t l = prof_fmt_u64(num, (uint64_t)seq);
  memcpy(path + n, num, l);
  n += l;
  path[n++] = '.';
  strcpy(path + n, ext);
  return true;
}

static uint64_t tmp_suffix(void) {
  uint64_t r = 0;
  if (getrandom(&r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    r = (uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
  }
  return r;
}

/* move tmp to path unless path exists; errno EEXIST if it does */
static bool place(const char *tmp, const char *path) {
#ifdef RENAME_NOREPLACE
  if (renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) == 0) return true;
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) return false;
#endif
  if (link(tmp, path) != 0) return false;
  unlink(tmp);
  return true;
}

long prof_output_write(const char *base, const char *ext, pid_t pid, _Atomic long *seqp,
                       const prof_buf_t *data, bool gzip, mi_heap_t *heap) {
  char tmp[PATH_MAX + 32], path[PATH_MAX];
  int fd = -1;
  for (int tries = 0; fd < 0 && tries < 16; tries++) {
    size_t n = strlen(base);
    if (n + 40 > sizeof tmp) {
      errno = ENAMETOOLONG;
      return -1;
    }
    memcpy(tmp, base, n);
    memcpy(tmp + n, ".tmp-", 5);
    n += 5;
    uint64_t r = tmp_suffix();
    for (int k = 0; k < 16; k++) tmp[n++] = "0123456789abcdef"[(r >> (4 * k)) & 15];
    tmp[n] = 0;
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno != EEXIST) return -1;
  }
  if (fd < 0) return -1;
  bool ok = gzip ? prof_gzip_write(fd, data->data, data->len, heap) : prof_write_all(fd, data->data, data->len);
  if (close(fd) != 0) ok = false;
  if (!ok) {
    int e = errno;
    unlink(tmp);
    errno = e ? e : EIO;
    return -1;
  }
  for (int tries = 0; tries < 100; tries++) {
    long seq = atomic_fetch_add(seqp, 1);
    if (!make_name(path, sizeof path, base, pid, seq, ext)) {
      errno = ENAMETOOLONG;
      break;
    }
    if (place(tmp, path)) return seq;
    if (errno != EEXIST) break;
    prof_warn("not overwriting existing ", path, "");
  }
  int e = errno;
  unlink(tmp);
  errno = e;
  return -1;
}

/* buf.c -- growable byte buffers in the profiler's private heap, number
 * formatting and raw writes.  Nothing here uses stdio or malloc: the
 * snapshot writer may run inside an allocation (see profiler.c). */
#include "internal.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

void prof_buf_init(prof_buf_t *b, mi_heap_t *heap) {
  memset(b, 0, sizeof *b);
  b->heap = heap;
}

void prof_buf_free(prof_buf_t *b) {
  mi_free(b->data);
  b->data = NULL;
  b->len = b->cap = 0;
}

bool prof_buf_reserve(prof_buf_t *b, size_t extra) {
  if (b->failed) return false;
  if (b->len + extra + 1 <= b->cap) return true; /* +1: room for a NUL */
  size_t cap = b->cap ? b->cap : 4096;
  while (cap < b->len + extra + 1) {
    if (cap > SIZE_MAX / 2) {
      b->failed = true;
      return false;
    }
    cap *= 2;
  }
  char *p = mi_heap_realloc(b->heap, b->data, cap);
  if (p == NULL) {
    b->failed = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void prof_buf_put(prof_buf_t *b, const void *p, size_t n) {
  if (!prof_buf_reserve(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

void prof_buf_puts(prof_buf_t *b, const char *s) { prof_buf_put(b, s, strlen(s)); }

void prof_buf_putc(prof_buf_t *b, char c) { prof_buf_put(b, &c, 1); }

size_t prof_fmt_u64(char *out, uint64_t v) {
  char tmp[24];
  size_t n = 0;
  do {
    tmp[n++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  for (size_t i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = 0;
  return n;
}

void prof_buf_put_u64(prof_buf_t *b, uint64_t v) {
  char tmp[24];
  prof_buf_put(b, tmp, prof_fmt_u64(tmp, v));
}

void prof_buf_put_hex(prof_buf_t *b, uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  char tmp[20];
  size_t n = 0;
  do {
    tmp[n++] = digits[v & 15];
    v >>= 4;
  } while (v != 0);
  char out[20];
  out[0] = '0';
  out[1] = 'x';
  for (size_t i = 0; i < n; i++) out[2 + i] = tmp[n - 1 - i];
  prof_buf_put(b, out, n + 2);
}

bool prof_write_all(int fd, const void *buf, size_t n) {
  const char *p = buf;
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= (size_t)w;
  }
  return true;
}

void prof_warn(const char *a, const char *b, const char *c) {
  int saved = errno;
  char line[1024];
  size_t n = 0;
  const char *parts[] = {"mialloc-prof: ", a, b, c, "\n"};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
    if (parts[i] == NULL) continue;
    size_t l = strlen(parts[i]);
    if (l > sizeof line - 1 - n) l = sizeof line - 1 - n;
    memcpy(line + n, parts[i], l);
    n += l;
  }
  (void)!write(2, line, n);
  errno = saved;
}

bool prof_parse_size(const char *s, uint64_t *out) {
  if (s == NULL || *s == 0) return false;
  uint64_t v = 0;
  const char *p = s;
  if (*p < '0' || *p > '9') return false;
  while (*p >= '0' && *p <= '9') {
    uint64_t d = (uint64_t)(*p - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
    p++;
  }
  unsigned shift = 0;
  switch (*p) {
  case 0: break;
  case 'k': case 'K': shift = 10; break;
  case 'm': case 'M': shift = 20; break;
  case 'g': case 'G': shift = 30; break;
  default: return false;
  }
  if (shift != 0) {
    p++;
    /* K, KB, KiB (any case): all binary units */
    if ((p[0] == 'i' || p[0] == 'I') && (p[1] == 'b' || p[1] == 'B')) p += 2;
    else if (p[0] == 'b' || p[0] == 'B') p += 1;
    if (*p != 0) return false;
    if (v > (UINT64_MAX >> shift)) return false;
    v <<= shift;
  }
  *out = v;
  return true;
}

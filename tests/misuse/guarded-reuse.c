/* guarded-reuse.c COUNT WINDOW -- run at guarded sampling rate 1: COUNT
 * blocks of varied sizes go through a FIFO window of WINDOW live ones, so
 * slots are freed, kept closed, opened again (several at once where the
 * kernel has guard markers) and handed out again; then 1200 blocks are held
 * at once, more than one segment of slots.  Every block must end against an
 * unreadable page, keep what was written into it and, from calloc, read as
 * zero; a freed block must be unreadable at once; and no slot may come back
 * within MIN_QUARANTINE guarded allocations of its free (guarded.c keeps
 * 256).  Readability is probed with write(2) into a pipe (EFAULT, no
 * signal).  Prints "misuse: reuse checked N, bad M". */
#include "misuse.h"

#define MIN_QUARANTINE 256
#define HELD 1200

static int pipefd[2];
static uintptr_t page_size;

static bool readable(const void *addr) {
  if (write(pipefd[1], addr, 1) != 1) return false;
  char c;
  return read(pipefd[0], &c, 1) == 1;
}

static size_t size_of(int i) { return 16 + (size_t)(i * 37) % 4000; }

static bool all_bytes(const unsigned char *p, size_t n, unsigned char v) {
  for (size_t k = 0; k < n; k++)
    if (p[k] != v) return false;
  return true;
}

/* A fresh block: the page after its usable bytes is a guard page (the
 * bytes end there, or a little before in builds with padding records,
 * whose usable size is the size asked for); zero if from calloc;
 * writable. */
static int check_new(unsigned char *p, size_t size, bool zeroed, int i) {
  if (p == NULL) return 1;
  uintptr_t end = (uintptr_t)p + mi_usable_size(p);
  uintptr_t next = (end + page_size - 1) & ~(page_size - 1);
  int bad = 0;
  if ((uintptr_t)p < next - page_size || readable((void *)next)) bad++;
  if (zeroed && !all_bytes(p, size, 0)) bad++;
  memset(p, (unsigned char)i, size);
  return bad;
}

int main(int argc, char **argv) {
  int count = argc > 1 ? atoi(argv[1]) : 5000;
  int window = argc > 2 ? atoi(argv[2]) : 300;
  if (count <= 0 || window <= 0 || pipe(pipefd) != 0) return 2;
  page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
  unsigned char **live = calloc((size_t)count, sizeof *live);
  uintptr_t recent[MIN_QUARANTINE] = {0};   /* pages of the latest frees */
  if (live == NULL) return 2;
  int bad = 0, checked = 0;
  for (int i = 0; i < count; i++) {
    bool zeroed = i % 3 == 0;
    size_t size = size_of(i);
    live[i] = zeroed ? mi_calloc(1, size) : mi_malloc(size);
    uintptr_t page = (uintptr_t)live[i] & ~(page_size - 1);
    for (int k = 0; k < MIN_QUARANTINE; k++)
      if (recent[k] == page) bad++;
    bad += check_new(live[i], size, zeroed, i);
    checked++;
    if (i >= window) {
      int j = i - window;
      if (live[j] != NULL && !all_bytes(live[j], size_of(j), (unsigned char)j)) bad++;
      mi_free(live[j]);
      if (live[j] != NULL && readable(live[j])) bad++;
      recent[j % MIN_QUARANTINE] = (uintptr_t)live[j] & ~(page_size - 1);
      live[j] = NULL;
    }
  }
  for (int j = count - window; j < count; j++) mi_free(live[j]);
  free(live);
  unsigned char *held[HELD];
  for (int i = 0; i < HELD; i++) {
    held[i] = mi_malloc(64);
    bad += check_new(held[i], 64, false, i);
    checked++;
  }
  for (int i = 0; i < HELD; i++) {
    if (held[i] != NULL && !all_bytes(held[i], 64, (unsigned char)i)) bad++;
    mi_free(held[i]);
  }
  misuse_say("reuse checked %d, bad %d", checked, bad);
  return bad ? 3 : 0;
}

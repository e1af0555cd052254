/* maps.c -- the process's mappings (/proc/self/maps) and the GNU build ids
 * of the mapped files, for the profiles' mapping tables.
 *
 * Build ids are read from the files with pread (ELF header, program
 * headers, PT_NOTE segments): every executable file mapping needs one,
 * also files the loader does not know (mapped by the program itself).
 * This code may run inside an allocation and takes no lock.  (The function
 * names of symbols.c come from the loaded objects, under dl_iterate_phdr.)
 */
#include "internal.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <unistd.h>

static bool read_file(const char *path, prof_buf_t *out) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  for (;;) {
    if (!prof_buf_reserve(out, 16384)) break;
    ssize_t n = read(fd, out->data + out->len, out->cap - out->len - 1);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out->len += (size_t)n;
  }
  close(fd);
  if (out->data != NULL) out->data[out->len] = 0;
  return !out->failed && out->data != NULL;
}

static bool pread_all(int fd, void *buf, size_t n, off_t off) {
  char *p = buf;
  while (n > 0) {
    ssize_t r = pread(fd, p, n, off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
    off += r;
  }
  return true;
}

static void hex(char *out, const unsigned char *p, size_t n) {
  static const char d[] = "0123456789abcdef";
  for (size_t i = 0; i < n; i++) {
    out[2 * i] = d[p[i] >> 4];
    out[2 * i + 1] = d[p[i] & 15];
  }
  out[2 * n] = 0;
}

/* find NT_GNU_BUILD_ID among the notes in buf */
static bool scan_notes(const unsigned char *buf, size_t n, char *out, size_t outn) {
  size_t off = 0;
  while (off + sizeof(Elf64_Nhdr) <= n) {
    Elf64_Nhdr nh;
    memcpy(&nh, buf + off, sizeof nh);
    off += sizeof nh;
    size_t name_len = (nh.n_namesz + 3u) & ~3u, desc_len = (nh.n_descsz + 3u) & ~3u;
    if (name_len > n - off || desc_len > n - off - name_len) return false;
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(buf + off, "GNU", 4) == 0 &&
        nh.n_descsz > 0 && 2 * (size_t)nh.n_descsz + 1 <= outn) {
      hex(out, buf + off + name_len, nh.n_descsz);
      return true;
    }
    off += name_len + desc_len;
  }
  return false;
}

bool prof_elf_build_id(const char *path, char *out, size_t outn) {
  out[0] = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  bool ok = false;
  Elf64_Ehdr eh;
  if (pread_all(fd, &eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
      eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) &&
      eh.e_phnum > 0 && eh.e_phnum < 256) {
    for (unsigned i = 0; i < eh.e_phnum && !ok; i++) {
      Elf64_Phdr ph;
      if (!pread_all(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + i * sizeof ph))) break;
      if (ph.p_type != PT_NOTE || ph.p_filesz == 0 || ph.p_filesz > 4096) continue;
      unsigned char notes[4096];
      if (pread_all(fd, notes, ph.p_filesz, (off_t)ph.p_offset))
        ok = scan_notes(notes, ph.p_filesz, out, outn);
    }
  }
  close(fd);
  return ok;
}

static uint64_t parse_hex(const char **pp) {
  const char *p = *pp;
  uint64_t v = 0;
  for (;; p++) {
    char c = *p;
    if (c >= '0' && c <= '9') v = v * 16 + (uint64_t)(c - '0');
    else if (c >= 'a' && c <= 'f') v = v * 16 + (uint64_t)(c - 'a' + 10);
    else break;
  }
  *pp = p;
  return v;
}

/* One line of /proc/self/maps: start-end perms offset dev inode path */
typedef struct maps_line_s {
  uint64_t start, end, offset;
  bool exec;
  const char *path;   /* not terminated: plen bytes */
  size_t plen;
} maps_line_t;

static void parse_maps_line(const char *p, const char *eol, maps_line_t *l) {
  const char *q = p;
  l->start = parse_hex(&q);
  if (*q == '-') q++;
  l->end = parse_hex(&q);
  while (*q == ' ') q++;
  char perms[5] = {0};
  for (int k = 0; k < 4 && q < eol; k++) perms[k] = *q++;
  l->exec = perms[2] == 'x';
  while (*q == ' ') q++;
  l->offset = parse_hex(&q);
  for (int field = 0; field < 2; field++) { /* dev, inode */
    while (*q == ' ') q++;
    while (q < eol && *q != ' ') q++;
  }
  while (*q == ' ') q++;
  l->path = q;
  l->plen = (size_t)(eol - q);
}

/* The table being filled.  Paths and build ids are copied into m->strings
 * and known by offset until the end: the buffer may move as it grows. */
typedef struct maps_build_s {
  prof_maps_t *m;
  size_t *path_off, *bid_off;   /* by mapping; 0: "" */
  const char *exe;              /* the main program's path; "": unknown */
  long main_index;              /* its mapping; -1: not seen */
} maps_build_t;

/* The build id of the file at pathz, mapping i: the one read for an earlier
 * mapping of the same file, else read from the file now. */
static size_t mapping_build_id(maps_build_t *b, size_t i, const char *pathz) {
  prof_maps_t *m = b->m;
  for (size_t j = 0; j < i; j++)
    if (strcmp(m->strings.data + b->path_off[j], pathz) == 0) return b->bid_off[j];
  char bid[160];
  if (!prof_elf_build_id(pathz, bid, sizeof bid)) return 0;
  size_t off = m->strings.len;
  prof_buf_puts(&m->strings, bid);
  prof_buf_putc(&m->strings, 0);
  return off;
}

/* Executable mappings of files (and the vDSO) are the ones a stack's
 * addresses can fall in: the others are skipped. */
static void add_mapping(maps_build_t *b, const maps_line_t *l) {
  bool file = l->plen > 0 && l->path[0] == '/';
  if (!l->exec || !(file || (l->plen == 6 && memcmp(l->path, "[vdso]", 6) == 0))) return;
  prof_maps_t *m = b->m;
  size_t i = m->count++;
  m->map[i].start = l->start;
  m->map[i].limit = l->end;
  m->map[i].offset = l->offset;
  b->path_off[i] = m->strings.len;
  prof_buf_put(&m->strings, l->path, l->plen);
  prof_buf_putc(&m->strings, 0);
  b->bid_off[i] = 0;
  if (!file) return;
  char pathz[PATH_MAX];
  size_t n = l->plen < sizeof pathz - 1 ? l->plen : sizeof pathz - 1;
  memcpy(pathz, l->path, n);
  pathz[n] = 0;
  b->bid_off[i] = mapping_build_id(b, i, pathz);
  if (b->main_index < 0 && b->exe[0] != 0 && strcmp(pathz, b->exe) == 0) b->main_index = (long)i;
}

/* mapping[0] must be the main program: rotate it to the front, keeping
 * the rest in address order */
static void move_main_first(prof_maps_t *m, long main_index) {
  if (main_index <= 0) return;
  prof_mapping_t main_map = m->map[main_index];
  memmove(&m->map[1], &m->map[0], (size_t)main_index * sizeof m->map[0]);
  m->map[0] = main_map;
}

bool prof_maps_read(prof_maps_t *m, mi_heap_t *heap) {
  memset(m, 0, sizeof *m);
  m->heap = heap;
  prof_buf_init(&m->text, heap);
  prof_buf_init(&m->strings, heap);
  if (!read_file("/proc/self/maps", &m->text)) return false;

  char exe[PATH_MAX];
  ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[el > 0 ? el : 0] = 0;

  size_t lines = 0;
  for (size_t i = 0; i < m->text.len; i++) lines += m->text.data[i] == '\n';
  m->map = mi_heap_calloc(heap, lines + 1, sizeof *m->map);
  if (m->map == NULL) return false;
  maps_build_t b = {.m = m, .exe = exe, .main_index = -1};
  b.path_off = mi_heap_calloc(heap, lines + 1, sizeof *b.path_off);
  b.bid_off = mi_heap_calloc(heap, lines + 1, sizeof *b.bid_off);
  bool ok = b.path_off != NULL && b.bid_off != NULL;
  if (ok) prof_buf_putc(&m->strings, 0); /* offset 0: "" */
  for (const char *p = m->text.data; ok && *p;) {
    const char *eol = strchr(p, '\n');
    if (eol == NULL) eol = p + strlen(p);
    maps_line_t line;
    parse_maps_line(p, eol, &line);
    add_mapping(&b, &line);
    p = *eol ? eol + 1 : eol;
  }
  ok = ok && !m->strings.failed;
  for (size_t i = 0; i < m->count && ok; i++) {
    m->map[i].path = m->strings.data + b.path_off[i];
    m->map[i].build_id = m->strings.data + b.bid_off[i];
  }
  mi_free(b.path_off);
  mi_free(b.bid_off);
  if (ok) move_main_first(m, b.main_index);
  return ok;
}

void prof_maps_free(prof_maps_t *m) {
  prof_buf_free(&m->text);
  prof_buf_free(&m->strings);
  mi_free(m->map);
  m->map = NULL;
  m->count = 0;
}

long prof_maps_find(const prof_maps_t *m, uint64_t addr) {
  for (size_t i = 0; i < m->count; i++)
    if (addr >= m->map[i].start && addr < m->map[i].limit) return (long)i;
  return -1;
}

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

  /* paths are copied into strings (offsets first: the buffer may move) */
  size_t *path_off = mi_heap_calloc(heap, lines + 1, sizeof *path_off);
  size_t *bid_off = mi_heap_calloc(heap, lines + 1, sizeof *bid_off);
  if (path_off == NULL || bid_off == NULL) {
    mi_free(path_off);
    mi_free(bid_off);
    return false;
  }
  prof_buf_putc(&m->strings, 0); /* offset 0: "" */
  long main_index = -1;
  const char *p = m->text.data;
  while (*p) {
    const char *eol = strchr(p, '\n');
    if (eol == NULL) eol = p + strlen(p);
    /* start-end perms offset dev inode path */
    const char *q = p;
    uint64_t start = parse_hex(&q);
    if (*q == '-') q++;
    uint64_t end = parse_hex(&q);
    while (*q == ' ') q++;
    char perms[5] = {0};
    for (int k = 0; k < 4 && q < eol; k++) perms[k] = *q++;
    while (*q == ' ') q++;
    uint64_t off = parse_hex(&q);
    for (int field = 0; field < 2; field++) { /* dev, inode */
      while (*q == ' ') q++;
      while (q < eol && *q != ' ') q++;
    }
    while (*q == ' ') q++;
    const char *path = q;
    size_t plen = (size_t)(eol - q);
    bool exec = perms[2] == 'x';
    if (exec && plen > 0 && (path[0] == '/' || (plen == 6 && memcmp(path, "[vdso]", 6) == 0))) {
      prof_mapping_t *mp = &m->map[m->count];
      mp->start = start;
      mp->limit = end;
      mp->offset = off;
      path_off[m->count] = m->strings.len;
      prof_buf_put(&m->strings, path, plen);
      prof_buf_putc(&m->strings, 0);
      bid_off[m->count] = 0;
      if (path[0] == '/') {
        char pathz[PATH_MAX], bid[160];
        size_t n = plen < sizeof pathz - 1 ? plen : sizeof pathz - 1;
        memcpy(pathz, path, n);
        pathz[n] = 0;
        /* the same file mapped twice: reuse the id read before */
        for (size_t j = 0; j < m->count; j++)
          if (strcmp(m->strings.data + path_off[j], pathz) == 0) {
            bid_off[m->count] = bid_off[j];
            goto have_id;
          }
        if (prof_elf_build_id(pathz, bid, sizeof bid)) {
          bid_off[m->count] = m->strings.len;
          prof_buf_puts(&m->strings, bid);
          prof_buf_putc(&m->strings, 0);
        }
      have_id:
        if (main_index < 0 && exe[0] != 0 && strcmp(pathz, exe) == 0) main_index = (long)m->count;
      }
      m->count++;
    }
    p = *eol ? eol + 1 : eol;
  }
  bool ok = !m->strings.failed;
  for (size_t i = 0; i < m->count && ok; i++) {
    m->map[i].path = m->strings.data + path_off[i];
    m->map[i].build_id = m->strings.data + bid_off[i];
  }
  mi_free(path_off);
  mi_free(bid_off);
  /* mapping[0] must be the main program: rotate it to the front, keeping
   * the rest in address order */
  if (ok && main_index > 0) {
    prof_mapping_t main_map = m->map[main_index];
    memmove(&m->map[1], &m->map[0], (size_t)main_index * sizeof m->map[0]);
    m->map[0] = main_map;
  }
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

/* symbols.c -- function names for a snapshot's addresses, from the dynamic
 * symbol tables (.dynsym/.dynstr) of the loaded objects.
 *
 * Debian strips its binaries, so a reader symbolising from the files finds
 * no symbol table and shows "[python3.11]" for a whole program.  The
 * dynamic symbol table survives stripping (the loader needs it), and it is
 * in memory: the object's PT_DYNAMIC segment gives DT_SYMTAB, DT_STRTAB,
 * DT_STRSZ, DT_SYMENT and DT_GNU_HASH or DT_HASH (which give the number of
 * symbols).  No file is read.
 *
 * An address is named only when it lies inside a defined function symbol,
 * [st_value, st_value + st_size).  An address outside every such range (a
 * static function, a .cold part, a local alias of memcpy's ifunc
 * implementations) gets no name: naming it after the nearest symbol below
 * it, as symbolisers without sizes do, would attribute a static function's
 * allocations to an unrelated exported one.  When ranges nest or coincide
 * (aliases) the smallest range wins, then the name with fewer leading
 * underscores ("malloc" over "__libc_malloc"), then a global over a weak
 * binding, then the smaller name, so the choice does not depend on the
 * table's order.
 *
 * Locking.  The snapshot writer may run inside malloc (an allocation
 * trigger fires in on_alloc).  The objects are enumerated with
 * dl_iterate_phdr, which in glibc takes GL(dl_load_write_lock) -- not
 * GL(dl_load_lock), the loader lock that dladdr takes.  The loader lock is
 * held across all of dlopen and dlclose, including the constructors and
 * destructors they run and their malloc calls: a thread holding it may
 * wait for anything (for example for our writer lock, by calling
 * mi_profiler_snapshot() from a constructor), so dladdr inside malloc could
 * deadlock.  dl_load_write_lock is held only around the updates of the
 * list of loaded objects (appending in dlopen; unlinking, munmap and free
 * in dlclose) and by other dl_iterate_phdr callers; the loader runs no user
 * code under it and does not wait for anything else while holding it
 * (free under it reaches our on_free, which takes no lock), and it is
 * recursive, so a malloc by a dl_iterate_phdr callback of our own thread
 * cannot block on it.  While we hold it no object can be unmapped (dlclose
 * unlinks and unmaps under it), so reading the tables in place is safe;
 * names are copied out before the callback returns.  The tables are read
 * once per snapshot, for all of the snapshot's addresses together.
 */
#include "internal.h"

#include <elf.h>
#include <link.h>
#include <string.h>

typedef struct sym_ctx_s {
  const uint64_t *addrs;
  size_t n;
  size_t *sorted;       /* indices into addrs, ascending address */
  size_t *name_off;     /* per address: offset in names, 0 = none */
  uint64_t *best_size;  /* per address: size of the symbol named */
  unsigned *best_rank;  /* per address: rank of that symbol's name */
  prof_buf_t *names;
} sym_ctx_t;

/* --- heap sort of address indices (no qsort: glibc's may call malloc) --- */
static void sift(size_t *v, const uint64_t *key, size_t root, size_t n) {
  for (;;) {
    size_t child = 2 * root + 1;
    if (child >= n) return;
    if (child + 1 < n && key[v[child + 1]] > key[v[child]]) child++;
    if (key[v[root]] >= key[v[child]]) return;
    size_t t = v[root];
    v[root] = v[child];
    v[child] = t;
    root = child;
  }
}

static void sort_indices(size_t *v, const uint64_t *key, size_t n) {
  for (size_t i = n / 2; i-- > 0;) sift(v, key, i, n);
  for (size_t end = n; end-- > 1;) {
    size_t t = v[0];
    v[0] = v[end];
    v[end] = t;
    sift(v, key, 0, end);
  }
}

/* first position in sorted whose address is >= a */
static size_t lower_bound(const sym_ctx_t *c, uint64_t a) {
  size_t lo = 0, hi = c->n;
  while (lo < hi) {
    size_t mid = lo + (hi - lo) / 2;
    if (c->addrs[c->sorted[mid]] < a) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

/* --- reading an object's tables in place --------------------------------- */
/* Does [p, p + len) lie inside one of the object's PT_LOAD segments? */
static bool in_object(const struct dl_phdr_info *info, uint64_t p, uint64_t len) {
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_LOAD) continue;
    uint64_t start = info->dlpi_addr + ph->p_vaddr;
    if (p >= start && p - start <= ph->p_memsz && len <= ph->p_memsz - (p - start)) return true;
  }
  return false;
}

/* A d_ptr of the dynamic section as an address.  glibc relocates the
 * entries of a writable dynamic section in place (d_ptr becomes absolute)
 * but not those of a read-only one (the vDSO; MIPS and RISC-V), which stay
 * relative to the load bias.  The two readings cannot both land inside the
 * object unless the bias is 0, where they agree.  0: neither does. */
static uint64_t dyn_ptr(const struct dl_phdr_info *info, uint64_t v) {
  if (in_object(info, v, 1)) return v;
  if (in_object(info, v + info->dlpi_addr, 1)) return v + info->dlpi_addr;
  return 0;
}

/* number of symbols from DT_GNU_HASH: one past the last symbol in any
 * hash chain (symbols below symoffset are not hashed); 0 if unreadable */
static size_t gnu_hash_count(const struct dl_phdr_info *info, uint64_t p) {
  if (!in_object(info, p, 16)) return 0;
  const uint32_t *h = (const uint32_t *)(uintptr_t)p;
  uint32_t nbuckets = h[0], symoffset = h[1], bloom_size = h[2];
  uint64_t buckets_at = p + 16 + (uint64_t)bloom_size * sizeof(ElfW(Addr));
  if (!in_object(info, buckets_at, (uint64_t)nbuckets * 4)) return 0;
  const uint32_t *buckets = (const uint32_t *)(uintptr_t)buckets_at;
  uint32_t last = 0;
  for (uint32_t b = 0; b < nbuckets; b++)
    if (buckets[b] > last) last = buckets[b];
  if (last < symoffset) return symoffset;
  uint64_t chain_at = buckets_at + (uint64_t)nbuckets * 4;
  for (uint64_t i = last;; i++) {
    uint64_t at = chain_at + (i - symoffset) * 4;
    if (!in_object(info, at, 4)) return 0;
    if (*(const uint32_t *)(uintptr_t)at & 1) return (size_t)i + 1;
  }
}

static unsigned leading_underscores(const char *s) {
  unsigned k = 0;
  while (s[k] == '_') k++;
  return k;
}

/* rank of a name: lower is better (see the comment at the top) */
static unsigned name_rank(const char *name, unsigned char bind) {
  unsigned u = leading_underscores(name);
  return (u > 15 ? 15 : u) * 2 + (bind == STB_GLOBAL ? 0 : 1);
}

/* The object's dynamic symbol table, checked to lie inside the object. */
typedef struct dynsyms_s {
  uint64_t symtab, strtab;   /* run-time addresses */
  uint64_t strsz, syment;
  size_t nsyms;
} dynsyms_t;

/* The object's executable extent [*lo, *hi) and its PT_DYNAMIC header
 * (NULL: none). */
static const ElfW(Phdr) *exec_extent(const struct dl_phdr_info *info, uint64_t *lo, uint64_t *hi) {
  const ElfW(Phdr) *dyn_ph = NULL;
  *lo = UINT64_MAX;
  *hi = 0;
  for (unsigned i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_DYNAMIC) dyn_ph = ph;
    if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
      uint64_t s = info->dlpi_addr + ph->p_vaddr;
      if (s < *lo) *lo = s;
      if (s + ph->p_memsz > *hi) *hi = s + ph->p_memsz;
    }
  }
  return dyn_ph;
}

/* Finds the symbol and string tables from the dynamic section; their
 * count comes from a hash table (GNU's, else SysV's nchain).  false: no
 * usable table. */
static bool find_dynsyms(const struct dl_phdr_info *info, const ElfW(Phdr) *dyn_ph, dynsyms_t *t) {
  uint64_t dyn_at = info->dlpi_addr + dyn_ph->p_vaddr;
  if (!in_object(info, dyn_at, dyn_ph->p_memsz)) return false;
  const ElfW(Dyn) *dyn = (const ElfW(Dyn) *)(uintptr_t)dyn_at;
  size_t ndyn = dyn_ph->p_memsz / sizeof *dyn;
  uint64_t gnu_hash = 0, sysv_hash = 0;
  *t = (dynsyms_t){.syment = sizeof(ElfW(Sym))};
  for (size_t i = 0; i < ndyn && dyn[i].d_tag != DT_NULL; i++) {
    switch (dyn[i].d_tag) {
    case DT_SYMTAB: t->symtab = dyn_ptr(info, dyn[i].d_un.d_ptr); break;
    case DT_STRTAB: t->strtab = dyn_ptr(info, dyn[i].d_un.d_ptr); break;
    case DT_GNU_HASH: gnu_hash = dyn_ptr(info, dyn[i].d_un.d_ptr); break;
    case DT_HASH: sysv_hash = dyn_ptr(info, dyn[i].d_un.d_ptr); break;
    case DT_STRSZ: t->strsz = dyn[i].d_un.d_val; break;
    case DT_SYMENT: t->syment = dyn[i].d_un.d_val; break;
    default: break;
    }
  }
  if (t->symtab == 0 || t->strtab == 0 || t->strsz == 0 || t->syment < sizeof(ElfW(Sym))) return false;
  if (!in_object(info, t->strtab, t->strsz)) return false;
  if (gnu_hash != 0) t->nsyms = gnu_hash_count(info, gnu_hash);
  if (t->nsyms == 0 && sysv_hash != 0 && in_object(info, sysv_hash, 8))
    t->nsyms = ((const uint32_t *)(uintptr_t)sysv_hash)[1]; /* nchain */
  return t->nsyms != 0 && t->nsyms <= SIZE_MAX / t->syment &&
         in_object(info, t->symtab, (uint64_t)t->nsyms * t->syment);
}

/* Gives the function [start, start + size), named name (len bytes), to the
 * addresses from sorted position k on that lie inside it, where it beats
 * the name they have: the smallest symbol wins, then the better rank, then
 * the first name in byte order.  false: out of memory. */
static bool name_addresses(sym_ctx_t *c, size_t k, uint64_t start, uint64_t size, const char *name, size_t len,
                           unsigned rank) {
  size_t off = 0; /* where this name was copied, once needed */
  for (; k < c->n && c->addrs[c->sorted[k]] < start + size; k++) {
    size_t a = c->sorted[k];
    if (c->name_off[a] != 0) {
      if (size > c->best_size[a]) continue;
      if (size == c->best_size[a]) {
        if (rank > c->best_rank[a]) continue;
        if (rank == c->best_rank[a] && strcmp(name, c->names->data + c->name_off[a]) >= 0) continue;
      }
    }
    if (off == 0) {
      off = c->names->len;
      prof_buf_put(c->names, name, len);
      prof_buf_putc(c->names, 0);
      if (c->names->failed) return false;
    }
    c->name_off[a] = off;
    c->best_size[a] = size;
    c->best_rank[a] = rank;
  }
  return true;
}

static int object_cb(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  sym_ctx_t *c = arg;
  uint64_t lo, hi;
  const ElfW(Phdr) *dyn_ph = exec_extent(info, &lo, &hi);
  if (dyn_ph == NULL || lo >= hi) return 0;
  size_t first = lower_bound(c, lo);
  if (first == c->n || c->addrs[c->sorted[first]] >= hi) return 0; /* no address of ours here */
  dynsyms_t t;
  if (!find_dynsyms(info, dyn_ph, &t)) return 0;

  const char *strs = (const char *)(uintptr_t)t.strtab;
  for (size_t i = 1; i < t.nsyms; i++) {
    const ElfW(Sym) *sym = (const ElfW(Sym) *)(uintptr_t)(t.symtab + i * t.syment);
    unsigned char type = ELF64_ST_TYPE(sym->st_info), bind = ELF64_ST_BIND(sym->st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (sym->st_shndx == SHN_UNDEF || sym->st_shndx == SHN_ABS || sym->st_size == 0) continue;
    if (sym->st_name == 0 || sym->st_name >= t.strsz) continue;
    uint64_t start = info->dlpi_addr + sym->st_value, end = start + sym->st_size;
    if (end <= start || end <= lo || start >= hi) continue;
    size_t k = lower_bound(c, start);
    if (k == c->n || c->addrs[c->sorted[k]] >= end) continue;
    const char *name = strs + sym->st_name;
    size_t len = strnlen(name, t.strsz - sym->st_name);
    if (len == 0 || len == t.strsz - sym->st_name) continue; /* empty or unterminated */
    if (!name_addresses(c, k, start, sym->st_size, name, len, name_rank(name, bind))) return 1; /* out of memory: stop */
  }
  return 0;
}

bool prof_symbolize(const uint64_t *addrs, size_t n, prof_buf_t *names, size_t *name_off) {
  mi_heap_t *heap = names->heap;
  memset(name_off, 0, n * sizeof *name_off);
  if (n == 0) return true;
  if (names->len == 0) prof_buf_putc(names, 0); /* offset 0 means "no name" */
  sym_ctx_t c = {
      .addrs = addrs,
      .n = n,
      .sorted = mi_heap_mallocn(heap, n, sizeof(size_t)),
      .name_off = name_off,
      .best_size = mi_heap_mallocn(heap, n, sizeof(uint64_t)),
      .best_rank = mi_heap_mallocn(heap, n, sizeof(unsigned)),
      .names = names,
  };
  bool ok = c.sorted != NULL && c.best_size != NULL && c.best_rank != NULL && !names->failed;
  if (ok) {
    for (size_t i = 0; i < n; i++) c.sorted[i] = i;
    sort_indices(c.sorted, addrs, n);
    dl_iterate_phdr(object_cb, &c);
    ok = !names->failed;
  }
  if (!ok) memset(name_off, 0, n * sizeof *name_off);
  mi_free(c.sorted);
  mi_free(c.best_size);
  mi_free(c.best_rank);
  return ok;
}

/* unwind.c -- call stacks from the DWARF CFI, with a process-wide cache
 * (x86-64).
 *
 * Why our own: libgcc's backtrace interprets every frame's CFI program anew
 * (about 1,800 instructions a frame), and libunwind's cached walk builds a
 * 256 KiB cache per thread (about 80,000 instructions and 64 page faults), so
 * a program whose threads live briefly pays one or the other for most of its
 * samples.  Here the frame rules are cached once for the whole process,
 * keyed by code address: a new thread's first capture walks warm.
 *
 * What a frame needs on x86-64, read from the CFI row of its code address:
 * where the canonical frame address (CFA) is (%rsp or %rbp plus an offset),
 * the return address at CFA-8, and where %rbp was saved, if it was (the only
 * other register a CFA may be based on).  A row this walk cannot follow
 * (CFA or %rbp by expression or in another register, a signal frame, a
 * return address not at CFA-8) makes the capture fail; the caller then
 * falls back to the libraries' unwinders, which handle everything.  Code
 * without CFI ends the stack, as it does for libgcc's unwinder.
 *
 * Safety inside malloc: no allocation (the cache is mapped with mmap); the
 * only lock is the loader's, taken by dl_iterate_phdr as libgcc and
 * libunwind also take it.  The cache is write-once per slot, so a reader
 * never sees a half-written entry.  A cached rule could go stale only if a
 * library were unloaded and another mapped at its address: every capture
 * reads the loader's unload count first, and a change puts a fresh cache in
 * place (old ones stay mapped: a concurrent capture may still read them).
 */
#include "internal.h"

#if MIALLOC_PROF_CFI_UNWIND

#include <link.h>
#include <string.h>
#include <sys/mman.h>

/* --- frame rules ------------------------------------------------------------ */
enum { RULE_RSP = 1, RULE_RBP = 2, RULE_END = 3, RULE_NONE = 4 };
enum { DW_RBP = 6, DW_RSP = 7, DW_RA = 16 };

/* A rule packed into one word (never 0): kind in bits 0-7, the offset of
 * the saved %rbp from the CFA plus 32768 in bits 8-23 (0 = not saved), the
 * CFA's offset from its register in bits 32-63. */
typedef uint64_t rule_t;

static rule_t rule_pack(unsigned kind, int64_t cfa_off, int64_t rbp_off) {
  if (kind == RULE_RSP || kind == RULE_RBP) {
    if (cfa_off <= 0 || cfa_off >= (1LL << 31) || rbp_off <= -32768 || rbp_off >= 32768)
      return RULE_NONE;
  } else {
    cfa_off = rbp_off = 0;
  }
  uint64_t rb = rbp_off ? (uint64_t)(rbp_off + 32768) : 0;
  return kind | rb << 8 | (uint64_t)cfa_off << 32;
}
static unsigned rule_kind(rule_t r) { return (unsigned)(r & 0xff); }
static int64_t rule_rbp_off(rule_t r) {
  uint64_t rb = (r >> 8) & 0xffff;
  return rb ? (int64_t)rb - 32768 : 0;
}
static uintptr_t rule_cfa_off(rule_t r) { return (uintptr_t)(r >> 32); }

/* --- reading the CFI ----------------------------------------------------------- */
typedef struct cursor_s {
  const uint8_t *p, *end;
  bool bad;
} cursor_t;

static uint64_t get_uleb(cursor_t *c) {
  uint64_t v = 0;
  for (unsigned shift = 0; c->p < c->end; shift += 7) {
    uint8_t b = *c->p++;
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return v;
  }
  c->bad = true;
  return 0;
}

static int64_t get_sleb(cursor_t *c) {
  uint64_t v = 0;
  unsigned shift = 0;
  while (c->p < c->end) {
    uint8_t b = *c->p++;
    if (shift < 64) v |= (uint64_t)(b & 0x7f) << shift;
    shift += 7;
    if (!(b & 0x80)) {
      if (shift < 64 && (b & 0x40)) v |= ~(uint64_t)0 << shift;
      return (int64_t)v;
    }
  }
  c->bad = true;
  return 0;
}

static uint64_t get_fixed(cursor_t *c, unsigned n) {
  if ((size_t)(c->end - c->p) < n) {
    c->bad = true;
    return 0;
  }
  uint64_t v = 0;
  memcpy(&v, c->p, n); /* little endian */
  c->p += n;
  return v;
}

enum {
  PE_ABSPTR = 0x00, PE_ULEB = 0x01, PE_UDATA2 = 0x02, PE_UDATA4 = 0x03, PE_UDATA8 = 0x04,
  PE_SLEB = 0x09, PE_SDATA2 = 0x0a, PE_SDATA4 = 0x0b, PE_SDATA8 = 0x0c,
  PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_OMIT = 0xff
};

/* A pointer in the .eh_frame encoding enc; datarel is the base of
 * DW_EH_PE_datarel (the .eh_frame_hdr).  Indirect and other bases are
 * refused: GCC and clang do not use them for code addresses. */
static uintptr_t get_encoded(cursor_t *c, uint8_t enc, uintptr_t datarel) {
  uintptr_t field = (uintptr_t)c->p, v;
  switch (enc & 0x0f) {
  case PE_ABSPTR: case PE_UDATA8: case PE_SDATA8: v = (uintptr_t)get_fixed(c, 8); break;
  case PE_ULEB: v = (uintptr_t)get_uleb(c); break;
  case PE_UDATA2: v = (uintptr_t)get_fixed(c, 2); break;
  case PE_UDATA4: v = (uintptr_t)get_fixed(c, 4); break;
  case PE_SLEB: v = (uintptr_t)get_sleb(c); break;
  case PE_SDATA2: v = (uintptr_t)(int16_t)get_fixed(c, 2); break;
  case PE_SDATA4: v = (uintptr_t)(int32_t)get_fixed(c, 4); break;
  default: c->bad = true; return 0;
  }
  switch (enc & 0x70) {
  case 0: break;
  case PE_PCREL: v += field; break;
  case PE_DATAREL: v += datarel; break;
  default: c->bad = true; return 0;
  }
  if (enc & 0x80) c->bad = true; /* indirect */
  return v;
}

/* The length-prefixed entry at p (a CIE or an FDE): its body, after the
 * length word.  64-bit entries are refused. */
static bool entry_body(const uint8_t *p, cursor_t *body) {
  uint32_t len;
  memcpy(&len, p, 4);
  if (len == 0 || len == 0xffffffffu) return false;
  body->p = p + 4;
  body->end = p + 4 + len;
  body->bad = false;
  return true;
}

typedef struct cie_s {
  uint64_t code_align;
  int64_t data_align;
  uint8_t fde_enc;
  bool has_z;
  cursor_t insns;
} cie_t;

static bool parse_cie(const uint8_t *p, cie_t *cie) {
  cursor_t c;
  if (!entry_body(p, &c)) return false;
  if (get_fixed(&c, 4) != 0) return false; /* CIE id */
  unsigned version = (unsigned)get_fixed(&c, 1);
  if (version != 1 && version != 3) return false;
  const char *aug = (const char *)c.p;
  size_t auglen = strnlen(aug, (size_t)(c.end - c.p));
  if (auglen == (size_t)(c.end - c.p)) return false;
  c.p += auglen + 1;
  cie->code_align = get_uleb(&c);
  cie->data_align = get_sleb(&c);
  uint64_t ra = version == 1 ? get_fixed(&c, 1) : get_uleb(&c);
  if (ra != DW_RA) return false;
  cie->fde_enc = PE_ABSPTR;
  cie->has_z = aug[0] == 'z';
  if (cie->has_z) {
    uint64_t n = get_uleb(&c);
    const uint8_t *data_end = c.p + n;
    for (size_t i = 1; i < auglen && !c.bad; i++) {
      switch (aug[i]) {
      case 'R': cie->fde_enc = (uint8_t)get_fixed(&c, 1); break;
      case 'L': (void)get_fixed(&c, 1); break;
      case 'P': {
        uint8_t enc = (uint8_t)get_fixed(&c, 1);
        (void)get_encoded(&c, enc & 0x7f, 0); /* the personality's address, unused */
        break;
      }
      default: return false; /* 'S' (signal frame) and anything unknown */
      }
    }
    if (c.bad || data_end > c.end) return false;
    c.p = data_end;
  } else if (auglen != 0) {
    return false;
  }
  cie->insns = c;
  return !c.bad;
}

/* --- executing a CFA program up to an address ------------------------------------ */
enum { REG_SAME = 0, REG_OFFSET = 1, REG_UNDEF = 2, REG_OTHER = 3 };
typedef struct row_s {
  uint8_t cfa_reg;
  bool cfa_expr;
  int64_t cfa_off;
  uint8_t rbp_how, ra_how;
  int64_t rbp_off, ra_off;
} row_t;

#define CFA_STATE_DEPTH 8

typedef struct cfa_run_s {
  row_t row, init; /* init: after the CIE's instructions, for DW_CFA_restore */
  row_t saved[CFA_STATE_DEPTH];
  unsigned depth;
  uintptr_t loc, target;
  const cie_t *cie;
} cfa_run_t;

static void set_reg(row_t *row, uint64_t reg, unsigned how, int64_t off) {
  if (reg == DW_RBP) {
    row->rbp_how = (uint8_t)how;
    row->rbp_off = off;
  } else if (reg == DW_RA) {
    row->ra_how = (uint8_t)how;
    row->ra_off = off;
  } else if (reg == DW_RSP && how != REG_SAME) {
    row->cfa_expr = true; /* %rsp restored some other way: not followed */
  }
}

static void restore_reg(cfa_run_t *r, uint64_t reg) {
  if (reg == DW_RBP) {
    r->row.rbp_how = r->init.rbp_how;
    r->row.rbp_off = r->init.rbp_off;
  } else if (reg == DW_RA) {
    r->row.ra_how = r->init.ra_how;
    r->row.ra_off = r->init.ra_off;
  }
}

/* Advance the location; false once it has passed the target (the row in
 * force at the target is then complete). */
static bool advance(cfa_run_t *r, uint64_t delta) {
  r->loc += delta * r->cie->code_align;
  return r->loc <= r->target;
}

/* The call frame instructions (DWARF 4, section 7.23; the last two are GNU
 * extensions).  The first three carry an operand in their low six bits. */
enum {
  CFA_advance_loc = 0x40, CFA_offset = 0x80, CFA_restore = 0xc0,
  CFA_nop = 0x00, CFA_set_loc = 0x01, CFA_advance_loc1 = 0x02, CFA_advance_loc2 = 0x03,
  CFA_advance_loc4 = 0x04, CFA_offset_extended = 0x05, CFA_restore_extended = 0x06,
  CFA_undefined = 0x07, CFA_same_value = 0x08, CFA_register = 0x09,
  CFA_remember_state = 0x0a, CFA_restore_state = 0x0b, CFA_def_cfa = 0x0c,
  CFA_def_cfa_register = 0x0d, CFA_def_cfa_offset = 0x0e, CFA_def_cfa_expression = 0x0f,
  CFA_expression = 0x10, CFA_offset_extended_sf = 0x11, CFA_def_cfa_sf = 0x12,
  CFA_def_cfa_offset_sf = 0x13, CFA_val_offset = 0x14, CFA_val_offset_sf = 0x15,
  CFA_val_expression = 0x16, CFA_GNU_args_size = 0x2e, CFA_GNU_negative_offset_extended = 0x2f,
};

/* Skip a DWARF expression block (its length, then its bytes): this walk
 * never evaluates one, it only notes that a rule needs one. */
static bool skip_block(cursor_t *c) {
  uint64_t n = get_uleb(c);
  if (n > (uint64_t)(c->end - c->p)) return c->bad = true, false;
  c->p += n;
  return true;
}

/* An instruction that moves the location; false once past the target. */
static bool location_op(cfa_run_t *r, cursor_t *c, uint8_t op) {
  switch (op) {
  case CFA_set_loc: {
    uintptr_t loc = get_encoded(c, r->cie->fde_enc, 0);
    if (c->bad) return false;
    r->loc = loc;
    return loc <= r->target;
  }
  case CFA_advance_loc1: return advance(r, get_fixed(c, 1));
  case CFA_advance_loc2: return advance(r, get_fixed(c, 2));
  default: return advance(r, get_fixed(c, 4));
  }
}

/* An instruction that defines the CFA, or saves or restores the row. */
static void cfa_rule_op(cfa_run_t *r, cursor_t *c, uint8_t op) {
  int64_t da = r->cie->data_align;
  row_t *row = &r->row;
  switch (op) {
  case CFA_def_cfa: row->cfa_reg = (uint8_t)get_uleb(c); row->cfa_off = (int64_t)get_uleb(c);
    row->cfa_expr = false; break;
  case CFA_def_cfa_sf: row->cfa_reg = (uint8_t)get_uleb(c); row->cfa_off = get_sleb(c) * da;
    row->cfa_expr = false; break;
  case CFA_def_cfa_register: row->cfa_reg = (uint8_t)get_uleb(c); row->cfa_expr = false; break;
  case CFA_def_cfa_offset: row->cfa_off = (int64_t)get_uleb(c); break;
  case CFA_def_cfa_offset_sf: row->cfa_off = get_sleb(c) * da; break;
  case CFA_def_cfa_expression: if (skip_block(c)) row->cfa_expr = true; break;
  case CFA_remember_state:
    if (r->depth == CFA_STATE_DEPTH) c->bad = true;
    else r->saved[r->depth++] = *row;
    break;
  default: /* CFA_restore_state */
    /* the CFA rule comes back with the registers, as in libgcc's unwinder */
    if (r->depth == 0) c->bad = true;
    else *row = r->saved[--r->depth];
    break;
  }
}

/* An instruction that sets one register's rule; false if it is not one. */
static bool reg_rule_op(cfa_run_t *r, cursor_t *c, uint8_t op) {
  int64_t da = r->cie->data_align;
  row_t *row = &r->row;
  uint64_t reg = get_uleb(c);
  switch (op) {
  case CFA_offset_extended: set_reg(row, reg, REG_OFFSET, (int64_t)get_uleb(c) * da); break;
  case CFA_offset_extended_sf: set_reg(row, reg, REG_OFFSET, get_sleb(c) * da); break;
  case CFA_GNU_negative_offset_extended: set_reg(row, reg, REG_OFFSET, -(int64_t)get_uleb(c) * da); break;
  case CFA_restore_extended: restore_reg(r, reg); break;
  case CFA_undefined: set_reg(row, reg, REG_UNDEF, 0); break;
  case CFA_same_value: set_reg(row, reg, REG_SAME, 0); break;
  /* rules this walk does not follow: the register is somewhere else */
  case CFA_register: case CFA_val_offset: (void)get_uleb(c); set_reg(row, reg, REG_OTHER, 0); break;
  case CFA_val_offset_sf: (void)get_sleb(c); set_reg(row, reg, REG_OTHER, 0); break;
  case CFA_expression: case CFA_val_expression: if (skip_block(c)) set_reg(row, reg, REG_OTHER, 0); break;
  default: return false;
  }
  return true;
}

/* One instruction; false to stop (past the target, or an error in c). */
static bool cfa_step(cfa_run_t *r, cursor_t *c) {
  uint8_t op = (uint8_t)get_fixed(c, 1);
  int64_t da = r->cie->data_align;
  switch (op & 0xc0) {
  case CFA_advance_loc: return advance(r, op & 0x3f);
  case CFA_offset: set_reg(&r->row, op & 0x3f, REG_OFFSET, (int64_t)get_uleb(c) * da); return !c->bad;
  case CFA_restore: restore_reg(r, op & 0x3f); return true;
  default: break;
  }
  switch (op) {
  case CFA_nop: return true;
  case CFA_set_loc: case CFA_advance_loc1: case CFA_advance_loc2: case CFA_advance_loc4:
    return location_op(r, c, op);
  case CFA_def_cfa: case CFA_def_cfa_sf: case CFA_def_cfa_register: case CFA_def_cfa_offset:
  case CFA_def_cfa_offset_sf: case CFA_def_cfa_expression: case CFA_remember_state: case CFA_restore_state:
    cfa_rule_op(r, c, op);
    break;
  case CFA_GNU_args_size: (void)get_uleb(c); break;
  default:
    if (!reg_rule_op(r, c, op)) c->bad = true;
    break;
  }
  return !c->bad;
}

static bool cfa_run(cfa_run_t *r, cursor_t c) {
  while (c.p < c.end)
    if (!cfa_step(r, &c)) return !c.bad;
  return !c.bad;
}

static rule_t row_rule(const row_t *row) {
  if (row->ra_how == REG_UNDEF) return RULE_END; /* the outermost frame */
  if (row->cfa_expr || row->ra_how != REG_OFFSET || row->ra_off != -8) return RULE_NONE;
  if (row->rbp_how == REG_OTHER || row->rbp_how == REG_UNDEF) return RULE_NONE;
  unsigned kind = row->cfa_reg == DW_RSP ? RULE_RSP : row->cfa_reg == DW_RBP ? RULE_RBP : 0;
  if (kind == 0) return RULE_NONE;
  return rule_pack(kind, row->cfa_off, row->rbp_how == REG_OFFSET ? row->rbp_off : 0);
}

/* --- finding the FDE of an address ----------------------------------------------- */
typedef struct find_s {
  uintptr_t addr;
  const uint8_t *hdr; /* the object's .eh_frame_hdr */
  bool in_object;
} find_t;

static int find_hdr(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_t *f = arg;
  const ElfW(Phdr) *eh = NULL;
  bool in = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    uintptr_t s = info->dlpi_addr + ph->p_vaddr;
    if (ph->p_type == PT_LOAD && f->addr >= s && f->addr < s + ph->p_memsz) in = true;
    else if (ph->p_type == PT_GNU_EH_FRAME) eh = ph;
  }
  if (!in) return 0;
  f->in_object = true;
  if (eh != NULL) f->hdr = (const uint8_t *)(info->dlpi_addr + eh->p_vaddr);
  return 1;
}

/* The FDE covering addr through the object's sorted table, or NULL. */
static const uint8_t *find_fde(const uint8_t *hdr, uintptr_t addr) {
  /* version 1, and the table as every linker writes it: datarel sdata4 */
  if (hdr[0] != 1 || hdr[3] != (PE_DATAREL | PE_SDATA4)) return NULL;
  cursor_t c = {hdr + 4, hdr + 4 + 16, false};
  (void)get_encoded(&c, hdr[1], (uintptr_t)hdr); /* .eh_frame itself, unused */
  uint64_t count = get_encoded(&c, hdr[2], (uintptr_t)hdr);
  if (c.bad || hdr[2] == PE_OMIT || count == 0) return NULL;
  const int32_t *table = (const int32_t *)c.p;
  uintptr_t base = (uintptr_t)hdr;
  size_t lo = 0, hi = (size_t)count; /* the last entry starting at or below addr */
  while (hi - lo > 1) {
    size_t mid = lo + (hi - lo) / 2;
    if (base + (intptr_t)table[2 * mid] <= addr) lo = mid;
    else hi = mid;
  }
  if (base + (intptr_t)table[2 * lo] > addr) return NULL;
  return (const uint8_t *)(base + (intptr_t)table[2 * lo + 1]);
}

/* The rule for the code address addr (inside a call or the capture). */
static rule_t compute_rule(uintptr_t addr) {
  find_t f = {.addr = addr};
  dl_iterate_phdr(find_hdr, &f);
  if (!f.in_object) return RULE_END; /* code outside any object (JIT): the end */
  if (f.hdr == NULL) return RULE_NONE;
  const uint8_t *fde = find_fde(f.hdr, addr);
  if (fde == NULL) return RULE_END; /* no CFI: libgcc also ends here */
  cursor_t c;
  if (!entry_body(fde, &c)) return RULE_NONE;
  uint32_t cie_off = (uint32_t)get_fixed(&c, 4);
  cie_t cie;
  if (cie_off == 0 || !parse_cie(fde + 4 - cie_off, &cie)) return RULE_NONE;
  uintptr_t begin = get_encoded(&c, cie.fde_enc, 0);
  uintptr_t range = get_encoded(&c, cie.fde_enc & 0x0f, 0);
  if (c.bad) return RULE_NONE;
  if (addr < begin || addr - begin >= range) return RULE_END;
  if (cie.has_z) {
    uint64_t n = get_uleb(&c);
    if (c.bad || n > (uint64_t)(c.end - c.p)) return RULE_NONE;
    c.p += n;
  }
  cfa_run_t r = {.cie = &cie, .loc = begin, .target = ~(uintptr_t)0}; /* all the CIE's apply */
  r.row.cfa_reg = DW_RSP;
  r.row.ra_how = REG_UNDEF;
  if (!cfa_run(&r, cie.insns) || r.depth != 0) return RULE_NONE;
  r.init = r.row;
  r.loc = begin;
  r.target = addr;
  if (!cfa_run(&r, c)) return RULE_NONE;
  return row_rule(&r.row);
}

/* --- the process-wide cache ---------------------------------------------------------- */
#define UCACHE_BITS 14
#define UCACHE_PROBES 8
#define UCACHE_MAX_TABLES 64 /* after that many unloads, rules are not cached */

typedef struct uslot_s {
  _Atomic uintptr_t key;  /* claimed once, never changed */
  _Atomic uint64_t rule;  /* 0 until the claimer has stored it */
} uslot_t;

typedef struct ucache_s {
  uint64_t subs; /* the loader's unload count the rules hold for */
  uslot_t slot[1u << UCACHE_BITS];
} ucache_t;

static _Atomic(ucache_t *) ucache;
static _Atomic unsigned ucache_tables;

static int loader_subs(struct dl_phdr_info *info, size_t size, void *arg) {
  if (size < offsetof(struct dl_phdr_info, dlpi_subs) + sizeof info->dlpi_subs) return -1;
  *(uint64_t *)arg = info->dlpi_subs;
  return 1; /* the counts are global: the first object is enough */
}

/* The cache for the current set of objects, or NULL (no caching). */
static ucache_t *ucache_current(void) {
  uint64_t subs = 0;
  if (dl_iterate_phdr(loader_subs, &subs) != 1) return NULL;
  ucache_t *t = atomic_load_explicit(&ucache, memory_order_acquire);
  if (t != NULL && t->subs == subs) return t;
  if (atomic_fetch_add(&ucache_tables, 1) >= UCACHE_MAX_TABLES) return NULL;
  ucache_t *n = mmap(NULL, sizeof *n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (n == MAP_FAILED) return NULL;
  n->subs = subs;
  /* release: the subs field before the pointer; a table replaced here stays
   * mapped for the captures that may still read it */
  if (atomic_compare_exchange_strong_explicit(&ucache, &t, n, memory_order_acq_rel, memory_order_acquire))
    return n;
  munmap(n, sizeof *n);
  return t != NULL && t->subs == subs ? t : NULL;
}

static uint64_t ucache_hash(uintptr_t key) {
  return ((uint64_t)key * 0x9e3779b97f4a7c15ull) >> (64 - UCACHE_BITS);
}

static rule_t rule_for(ucache_t *t, uintptr_t key) {
  if (t == NULL) return compute_rule(key);
  uint64_t h = ucache_hash(key);
  for (unsigned i = 0; i < UCACHE_PROBES; i++) {
    uslot_t *s = &t->slot[(h + i) & ((1u << UCACHE_BITS) - 1)];
    uintptr_t k = atomic_load_explicit(&s->key, memory_order_acquire);
    if (k == key) {
      rule_t r = atomic_load_explicit(&s->rule, memory_order_acquire);
      return r != 0 ? r : compute_rule(key); /* being filled by another thread */
    }
    if (k == 0) {
      rule_t r = compute_rule(key);
      uintptr_t zero = 0;
      if (atomic_compare_exchange_strong_explicit(&s->key, &zero, key, memory_order_acq_rel,
                                                  memory_order_relaxed))
        atomic_store_explicit(&s->rule, r, memory_order_release);
      return r;
    }
  }
  return compute_rule(key); /* the neighbourhood is full */
}

/* --- the walk --------------------------------------------------------------------------- */
#define UNWIND_FRAME_MAX ((uintptr_t)1 << 28)

int prof_unwind_cfi(void **raw, int max, uintptr_t pc, uintptr_t sp, uintptr_t bp) {
  ucache_t *t = ucache_current();
  int n = 0;
  raw[n++] = (void *)pc;
  /* each key is an address inside the call (or the capture), so the row
   * found is the one in force there even where a call ends its function */
  for (uintptr_t key = pc - 1; n < max;) {
    rule_t r = rule_for(t, key);
    unsigned kind = rule_kind(r);
    if (kind == RULE_END) break;
    if (kind == RULE_NONE) return -1;
    uintptr_t cfa = (kind == RULE_RSP ? sp : bp) + rule_cfa_off(r);
    /* frames lie above their callees, within reach of a stack: anything else
     * is a rule or a %rbp gone wrong, left to the libraries' unwinders */
    if (cfa <= sp || cfa - sp > UNWIND_FRAME_MAX || (cfa & 7) != 0) return -1;
    int64_t rbp_off = rule_rbp_off(r);
    if (rbp_off != 0) bp = *(const uintptr_t *)(cfa + (uintptr_t)rbp_off);
    uintptr_t ra = *(const uintptr_t *)(cfa - 8);
    sp = cfa;
    if (ra == 0) break;
    raw[n++] = (void *)ra;
    key = ra - 1;
  }
  return n;
}

#endif /* MIALLOC_PROF_CFI_UNWIND */

/* pprof-proto.c -- the pprof protobuf profile (perftools.profiles.Profile),
 * encoded by hand, and its gzip compression.
 *
 * Every top-level field of Profile is repeated or scalar, so the message is
 * written field by field; a nested message (Sample, Mapping, Location,
 * ValueType, Label) is first encoded into a scratch buffer, then appended
 * with its length.  Values are unsampled estimates (see profiler.c).
 * Locations are one per distinct address (a return address minus 1, so
 * that it lies inside the call instruction).  A location inside a function
 * of a loaded object's dynamic symbol table gets a Line naming it (one
 * Function per distinct name, no file, line 0; symbols.c); the others are
 * address only.  No mapping is marked has_functions, so pprof still
 * symbolises every location from the binary when it has a symbol table or
 * debug information (its answers, with files and lines, replace ours), and
 * keeps our names where the binary is stripped or missing.
 */
#include "internal.h"

#include <math.h>
#include <string.h>
#include <zlib.h>

/* wire types */
enum { WT_VARINT = 0, WT_LEN = 2 };

static void pb_varint(prof_buf_t *b, uint64_t v) {
  unsigned char tmp[10];
  size_t n = 0;
  while (v >= 0x80) {
    tmp[n++] = (unsigned char)(v | 0x80);
    v >>= 7;
  }
  tmp[n++] = (unsigned char)v;
  prof_buf_put(b, tmp, n);
}

static void pb_tag(prof_buf_t *b, unsigned field, unsigned wt) { pb_varint(b, ((uint64_t)field << 3) | wt); }

/* proto3: zero scalars are omitted */
static void pb_uint(prof_buf_t *b, unsigned field, uint64_t v) {
  if (v == 0) return;
  pb_tag(b, field, WT_VARINT);
  pb_varint(b, v);
}

static void pb_bytes(prof_buf_t *b, unsigned field, const void *p, size_t n) {
  pb_tag(b, field, WT_LEN);
  pb_varint(b, n);
  prof_buf_put(b, p, n);
}

static void pb_message(prof_buf_t *b, unsigned field, const prof_buf_t *msg) { pb_bytes(b, field, msg->data, msg->len); }

/* --- string table: the strings in order, and an open-addressing index of
 * them (function names make thousands of strings) ------------------------ */
typedef struct strtab_s {
  const char **s;
  size_t n, cap;
  size_t *slot; /* index + 1 of the string in this slot, 0: empty */
  size_t slot_mask;
  mi_heap_t *heap;
  bool failed;
} strtab_t;

static uint64_t str_hash(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
  return h;
}

static int64_t str_index(strtab_t *t, const char *s) {
  if (t->failed) return 0;
  if (2 * (t->n + 1) > t->slot_mask + 1 || t->slot == NULL) { /* keep the load <= 1/2 */
    size_t nslots = t->slot ? 2 * (t->slot_mask + 1) : 64;
    size_t *slot = mi_heap_calloc(t->heap, nslots, sizeof *slot);
    if (slot == NULL) {
      t->failed = true;
      return 0;
    }
    for (size_t i = 0; i < t->n; i++) {
      size_t j = (size_t)str_hash(t->s[i]) & (nslots - 1);
      while (slot[j] != 0) j = (j + 1) & (nslots - 1);
      slot[j] = i + 1;
    }
    mi_free(t->slot);
    t->slot = slot;
    t->slot_mask = nslots - 1;
  }
  size_t j = (size_t)str_hash(s) & t->slot_mask;
  for (; t->slot[j] != 0; j = (j + 1) & t->slot_mask)
    if (strcmp(t->s[t->slot[j] - 1], s) == 0) return (int64_t)(t->slot[j] - 1);
  if (t->n == t->cap) {
    size_t cap = t->cap ? 2 * t->cap : 32;
    const char **p = mi_heap_realloc(t->heap, t->s, cap * sizeof *p);
    if (p == NULL) {
      t->failed = true;
      return 0;
    }
    t->s = p;
    t->cap = cap;
  }
  t->s[t->n] = s;
  t->slot[j] = t->n + 1;
  return (int64_t)t->n++;
}

/* --- address -> location id, open addressing ---------------------------- */
typedef struct addr_map_s {
  uint64_t *keys; /* 0: empty (address 0 is never a location) */
  uint64_t *ids;
  size_t mask, n;
} addr_map_t;

static uint64_t addr_slot(const addr_map_t *m, uint64_t a) { return (a * 0x9e3779b97f4a7c15ull >> 17) & m->mask; }

/* returns the id of addr, adding it if new (*added set) */
static uint64_t addr_id(addr_map_t *m, uint64_t a, bool *added) {
  size_t i = addr_slot(m, a);
  while (m->keys[i] != 0) {
    if (m->keys[i] == a) {
      *added = false;
      return m->ids[i];
    }
    i = (i + 1) & m->mask;
  }
  m->keys[i] = a;
  m->ids[i] = ++m->n;
  *added = true;
  return m->ids[i];
}

static uint64_t fixed_to_count(uint64_t fp) { return (fp + (1u << (PROF_COUNT_SHIFT - 1))) >> PROF_COUNT_SHIFT; }

/* Frames the readers should hide if the stack capture could not skip the
 * allocator itself (libmialloc linked statically).  pprof matches it against
 * whole function names and cuts every stack at the outermost match, so it
 * names only allocation entry points: a broad "__libc_.*" would match
 * __libc_start_main, the root of every stack, and leave only _start. */
static const char drop_frames_re[] =
    "(malloc|calloc|realloc|reallocarray|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|"
    "operator new.*|operator delete.*|mi_.*|mia_.*|prof_.*|"
    "__libc_(malloc|calloc|realloc|free|memalign|valloc|pvalloc))";

/* --- the Profile message, part by part ---------------------------------- */

/* What the parts of one encoding share.  Location ids are handed out while
 * the samples are written, so the locations can only follow them. */
typedef struct proto_enc_s {
  prof_buf_t *out;
  mi_heap_t *heap;
  strtab_t st;
  prof_buf_t msg;   /* scratch: the nested message being built */
  addr_map_t locs;  /* location id by address */
  uint64_t *order;  /* address by location id - 1 */
  prof_buf_t names; /* function names; the string table points into it */
  bool ok;          /* false once an allocation failed */
} proto_enc_t;

/* A packed repeated field: the values' varints behind one length. */
static void pb_packed(proto_enc_t *e, prof_buf_t *b, unsigned field, const uint64_t *v, size_t n) {
  prof_buf_t packed;
  prof_buf_init(&packed, e->heap);
  for (size_t k = 0; k < n; k++) pb_varint(&packed, v[k]);
  pb_message(b, field, &packed);
  e->ok = e->ok && !packed.failed;
  prof_buf_free(&packed);
}

/* sample types, in the order pprof expects for heap profiles */
static void put_sample_types(proto_enc_t *e) {
  static const char *const types[4][2] = {
      {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
  for (int i = 0; i < 4; i++) {
    e->msg.len = 0;
    pb_uint(&e->msg, 1, (uint64_t)str_index(&e->st, types[i][0]));
    pb_uint(&e->msg, 2, (uint64_t)str_index(&e->st, types[i][1]));
    pb_message(e->out, 1, &e->msg);
  }
}

/* The location map, sized for every frame of every sample being distinct
 * (at most half full). */
static void locations_init(proto_enc_t *e, const prof_snapshot_t *s) {
  size_t total_frames = 0;
  for (size_t i = 0; i < s->nsamples; i++) total_frames += s->samples[i].depth;
  size_t cap = 64;
  while (cap < 2 * total_frames + 2) cap <<= 1;
  e->locs.mask = cap - 1;
  e->locs.keys = mi_heap_calloc(e->heap, cap, sizeof *e->locs.keys);
  e->locs.ids = mi_heap_calloc(e->heap, cap, sizeof *e->locs.ids);
  e->order = mi_heap_calloc(e->heap, total_frames + 1, sizeof *e->order);
  e->ok = e->ok && e->locs.keys != NULL && e->locs.ids != NULL && e->order != NULL;
}

/* One Sample: its stack as location ids, its four values, and a thread_id
 * label where the thread is known.  loc_ids: room for PROF_MAX_FRAMES. */
static void put_sample(proto_enc_t *e, const prof_sample_t *sm, uint64_t *loc_ids, int64_t thread_key) {
  uint64_t v[4] = {fixed_to_count(sm->alloc_count), sm->alloc_bytes, fixed_to_count(sm->inuse_count),
                   sm->inuse_bytes};
  if ((v[0] | v[1] | v[2] | v[3]) == 0) return;
  unsigned depth = sm->depth < PROF_MAX_FRAMES ? sm->depth : PROF_MAX_FRAMES;
  for (unsigned k = 0; k < depth; k++) {
    /* a return address minus 1 lies inside the call; 0 is the empty key */
    uint64_t a = sm->frames[k] > 0 ? sm->frames[k] - 1 : 0;
    if (a == 0) a = 1;
    bool added;
    loc_ids[k] = addr_id(&e->locs, a, &added);
    if (added) e->order[loc_ids[k] - 1] = a;
  }
  e->msg.len = 0;
  pb_packed(e, &e->msg, 1, loc_ids, depth);  /* location_id */
  pb_packed(e, &e->msg, 2, v, 4);            /* value (int64) */
  if (sm->tid != 0) {
    prof_buf_t label;
    prof_buf_init(&label, e->heap);
    pb_uint(&label, 1, (uint64_t)thread_key);
    pb_uint(&label, 3, (uint64_t)sm->tid);
    pb_message(&e->msg, 3, &label);
    e->ok = e->ok && !label.failed;
    prof_buf_free(&label);
  }
  pb_message(e->out, 2, &e->msg);
}

static void put_samples(proto_enc_t *e, const prof_snapshot_t *s) {
  uint64_t *loc_ids = mi_heap_calloc(e->heap, PROF_MAX_FRAMES, sizeof *loc_ids);
  e->ok = e->ok && loc_ids != NULL;
  int64_t thread_key = str_index(&e->st, "thread_id");
  for (size_t i = 0; e->ok && i < s->nsamples; i++) put_sample(e, &s->samples[i], loc_ids, thread_key);
  mi_free(loc_ids);
}

/* mappings: ids are index + 1 */
static void put_mappings(proto_enc_t *e, const prof_maps_t *maps) {
  for (size_t i = 0; e->ok && maps != NULL && i < maps->count; i++) {
    const prof_mapping_t *mp = &maps->map[i];
    e->msg.len = 0;
    pb_uint(&e->msg, 1, i + 1);
    pb_uint(&e->msg, 2, mp->start);
    pb_uint(&e->msg, 3, mp->limit);
    pb_uint(&e->msg, 4, mp->offset);
    pb_uint(&e->msg, 5, (uint64_t)str_index(&e->st, mp->path));
    if (mp->build_id[0] != 0) pb_uint(&e->msg, 6, (uint64_t)str_index(&e->st, mp->build_id));
    pb_message(e->out, 3, &e->msg);
  }
}

/* Function names for the locations, from the dynamic symbol tables, where
 * an address lies inside a symbol: name_off[id - 1] is the offset of the
 * location's name in names (0: none).  NULL (out of memory): the locations
 * stay bare. */
static size_t *symbolize_locations(proto_enc_t *e) {
  size_t *name_off = e->ok ? mi_heap_calloc(e->heap, e->locs.n + 1, sizeof *name_off) : NULL;
  if (name_off != NULL && !prof_symbolize(e->order, e->locs.n, &e->names, name_off)) {
    mi_free(name_off);
    name_off = NULL;
  }
  return name_off;
}

/* Functions: one per distinct name, keyed by its string index (never 0:
 * that is "") in a map sized for every location having its own name;
 * fn_str holds the string index by function id - 1. */
typedef struct proto_funcs_s {
  addr_map_t ids;
  uint64_t *fn_str;
} proto_funcs_t;

static void funcs_init(proto_enc_t *e, proto_funcs_t *fn) {
  size_t cap = 64;
  while (cap < 2 * e->locs.n + 2) cap <<= 1;
  fn->ids.mask = cap - 1;
  fn->ids.keys = mi_heap_calloc(e->heap, cap, sizeof *fn->ids.keys);
  fn->ids.ids = mi_heap_calloc(e->heap, cap, sizeof *fn->ids.ids);
  fn->fn_str = mi_heap_calloc(e->heap, e->locs.n + 1, sizeof *fn->fn_str);
  e->ok = e->ok && fn->ids.keys != NULL && fn->ids.ids != NULL && fn->fn_str != NULL;
}

/* One Location: its mapping, its address and, where it has a name, a Line
 * naming its function (line number unknown: 0). */
static void put_location(proto_enc_t *e, uint64_t id, const prof_maps_t *maps, const char *name, proto_funcs_t *fn) {
  uint64_t a = e->order[id - 1];
  e->msg.len = 0;
  pb_uint(&e->msg, 1, id);
  long mi = maps != NULL ? prof_maps_find(maps, a) : -1;
  if (mi >= 0) pb_uint(&e->msg, 2, (uint64_t)mi + 1);
  pb_uint(&e->msg, 3, a);
  int64_t si = name != NULL ? str_index(&e->st, name) : 0;
  if (si > 0) {
    bool added;
    uint64_t fid = addr_id(&fn->ids, (uint64_t)si, &added);
    if (added) fn->fn_str[fid - 1] = (uint64_t)si;
    prof_buf_t line;
    prof_buf_init(&line, e->heap);
    pb_uint(&line, 1, fid);
    pb_message(&e->msg, 4, &line);
    e->ok = e->ok && !line.failed;
    prof_buf_free(&line);
  }
  pb_message(e->out, 4, &e->msg);
}

static void put_locations_and_functions(proto_enc_t *e, const prof_maps_t *maps) {
  size_t *name_off = symbolize_locations(e);
  proto_funcs_t fn = {{0}, NULL};
  if (name_off != NULL) funcs_init(e, &fn);
  for (uint64_t id = 1; e->ok && id <= e->locs.n; id++) {
    const char *name = name_off != NULL && name_off[id - 1] != 0 ? e->names.data + name_off[id - 1] : NULL;
    put_location(e, id, maps, name, &fn);
  }
  /* name and system name alike: dynamic symbols are not demangled */
  for (uint64_t fid = 1; e->ok && fid <= fn.ids.n; fid++) {
    e->msg.len = 0;
    pb_uint(&e->msg, 1, fid);
    pb_uint(&e->msg, 2, fn.fn_str[fid - 1]);
    pb_uint(&e->msg, 3, fn.fn_str[fid - 1]);
    pb_message(e->out, 5, &e->msg);
  }
  mi_free(name_off);
  mi_free(fn.ids.keys);
  mi_free(fn.ids.ids);
  mi_free(fn.fn_str);
}

/* The string table last: every part before added its strings; then the
 * scalars, whose strings must be in the table too. */
static void put_strings_and_scalars(proto_enc_t *e, const prof_snapshot_t *s) {
  int64_t drop = str_index(&e->st, drop_frames_re);
  int64_t period_type = str_index(&e->st, "space"), period_unit = str_index(&e->st, "bytes");
  int64_t comment = str_index(&e->st, "mialloc-prof " PACKAGE_VERSION);
  for (size_t i = 0; i < e->st.n; i++) pb_bytes(e->out, 6, e->st.s[i], strlen(e->st.s[i]));
  pb_uint(e->out, 7, (uint64_t)drop);
  pb_uint(e->out, 9, s->time_nanos);
  pb_uint(e->out, 10, s->duration_nanos);
  e->msg.len = 0;
  pb_uint(&e->msg, 1, (uint64_t)period_type);
  pb_uint(&e->msg, 2, (uint64_t)period_unit);
  pb_message(e->out, 11, &e->msg);
  pb_uint(e->out, 12, s->rate);
  pb_uint(e->out, 13, (uint64_t)comment);
}

bool prof_encode_proto(prof_buf_t *out, const prof_snapshot_t *s) {
  proto_enc_t e = {.out = out, .heap = out->heap, .st = {.heap = out->heap}, .ok = true};
  prof_buf_init(&e.msg, e.heap);
  prof_buf_init(&e.names, e.heap);
  str_index(&e.st, "");   /* string 0 is "" */
  put_sample_types(&e);
  locations_init(&e, s);
  put_samples(&e, s);
  put_mappings(&e, s->maps);
  put_locations_and_functions(&e, s->maps);
  put_strings_and_scalars(&e, s);
  bool ok = e.ok && !e.st.failed && !e.msg.failed && !out->failed;
  mi_free(e.locs.keys);
  mi_free(e.locs.ids);
  mi_free(e.order);
  mi_free(e.st.s);
  mi_free(e.st.slot);
  prof_buf_free(&e.names);
  prof_buf_free(&e.msg);
  return ok;
}

/* --- gzip ----------------------------------------------------------------- */
static voidpf z_alloc(voidpf opaque, uInt items, uInt size) {
  return mi_heap_mallocn((mi_heap_t *)opaque, items, size);
}

static void z_free(voidpf opaque, voidpf p) {
  (void)opaque;
  mi_free(p);
}

bool prof_gzip_write(int fd, const void *in, size_t n, mi_heap_t *heap) {
  z_stream z;
  memset(&z, 0, sizeof z);
  z.zalloc = z_alloc;
  z.zfree = z_free;
  z.opaque = heap;
  /* windowBits 15 + 16: a gzip stream.  Level 1: the snapshot is written
   * inside the program (at exit, or from an allocation), where level 6
   * took 2.6 times as long for a file 10 % smaller (a 150 KB profile);
   * Go's own profile writer also picks the fastest level. */
  if (deflateInit2(&z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
  enum { CHUNK = 65536 };
  unsigned char *chunk = mi_heap_malloc(heap, CHUNK);
  bool ok = chunk != NULL;
  const unsigned char *p = in;
  size_t left = n;
  int flush = Z_NO_FLUSH;
  while (ok) {
    if (z.avail_in == 0 && flush != Z_FINISH) {
      size_t take = left > (1u << 30) ? (1u << 30) : left;
      z.next_in = (Bytef *)p;
      z.avail_in = (uInt)take;
      p += take;
      left -= take;
      if (left == 0) flush = Z_FINISH;
    }
    z.next_out = chunk;
    z.avail_out = CHUNK;
    int rc = deflate(&z, flush);
    if (rc == Z_STREAM_ERROR) {
      ok = false;
      break;
    }
    ok = prof_write_all(fd, chunk, CHUNK - z.avail_out);
    if (rc == Z_STREAM_END) break;
  }
  deflateEnd(&z);
  mi_free(chunk);
  return ok;
}

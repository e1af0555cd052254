/* pprof-proto.c -- the pprof protobuf profile (perftools.profiles.Profile),
 * encoded by hand, and its gzip compression.
 *
 * Every top-level field of Profile is repeated or scalar, so the message is
 * written field by field; a nested message (Sample, Mapping, Location,
 * ValueType, Label) is first encoded into a scratch buffer, then appended
 * with its length.  Values are unsampled estimates (see profiler.c).
 * Locations are one per distinct address (a return address minus 1, so
 * that it lies inside the call instruction) and carry no function names:
 * pprof symbolises them from the binaries named by the mappings.
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

/* --- string table: linear search is enough for the few distinct strings
 * (types, units, file names, build ids) a heap profile has -------------- */
typedef struct strtab_s {
  const char **s;
  size_t n, cap;
  mi_heap_t *heap;
  bool failed;
} strtab_t;

static int64_t str_index(strtab_t *t, const char *s) {
  for (size_t i = 0; i < t->n; i++)
    if (strcmp(t->s[i], s) == 0) return (int64_t)i;
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
 * allocator itself (libmialloc linked statically). */
static const char drop_frames_re[] =
    "(malloc|calloc|realloc|reallocarray|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|"
    "operator new.*|operator delete.*|mi_.*|mia_.*|prof_.*|__libc_.*)";

bool prof_encode_proto(prof_buf_t *out, const prof_snapshot_t *s) {
  mi_heap_t *heap = out->heap;
  strtab_t st = {.heap = heap};
  prof_buf_t msg;
  prof_buf_init(&msg, heap);
  str_index(&st, "");

  /* sample types, in the order pprof expects for heap profiles */
  static const char *const types[4][2] = {
      {"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}};
  for (int i = 0; i < 4; i++) {
    msg.len = 0;
    pb_uint(&msg, 1, (uint64_t)str_index(&st, types[i][0]));
    pb_uint(&msg, 2, (uint64_t)str_index(&st, types[i][1]));
    pb_message(out, 1, &msg);
  }

  /* location ids for every distinct address, assigned while writing samples */
  size_t total_frames = 0;
  for (size_t i = 0; i < s->nsamples; i++) total_frames += s->samples[i].depth;
  size_t cap = 64;
  while (cap < 2 * total_frames + 2) cap <<= 1;
  addr_map_t am = {.mask = cap - 1};
  am.keys = mi_heap_calloc(heap, cap, sizeof *am.keys);
  am.ids = mi_heap_calloc(heap, cap, sizeof *am.ids);
  uint64_t *order = mi_heap_calloc(heap, total_frames + 1, sizeof *order); /* address by id-1 */
  uint64_t *loc_ids = mi_heap_calloc(heap, PROF_MAX_FRAMES, sizeof *loc_ids);
  bool ok = am.keys != NULL && am.ids != NULL && order != NULL && loc_ids != NULL;

  int64_t thread_key = str_index(&st, "thread_id");
  for (size_t i = 0; ok && i < s->nsamples; i++) {
    const prof_sample_t *sm = &s->samples[i];
    uint64_t v[4] = {fixed_to_count(sm->alloc_count), sm->alloc_bytes, fixed_to_count(sm->inuse_count),
                     sm->inuse_bytes};
    if ((v[0] | v[1] | v[2] | v[3]) == 0) continue;
    unsigned depth = sm->depth < PROF_MAX_FRAMES ? sm->depth : PROF_MAX_FRAMES;
    for (unsigned k = 0; k < depth; k++) {
      uint64_t a = sm->frames[k] > 0 ? sm->frames[k] - 1 : 0;
      if (a == 0) a = 1;
      bool added;
      loc_ids[k] = addr_id(&am, a, &added);
      if (added) order[loc_ids[k] - 1] = a;
    }
    msg.len = 0;
    pb_tag(&msg, 1, WT_LEN); /* location_id, packed */
    {
      prof_buf_t packed;
      prof_buf_init(&packed, heap);
      for (unsigned k = 0; k < depth; k++) pb_varint(&packed, loc_ids[k]);
      pb_varint(&msg, packed.len);
      prof_buf_put(&msg, packed.data, packed.len);
      ok = ok && !packed.failed;
      prof_buf_free(&packed);
    }
    pb_tag(&msg, 2, WT_LEN); /* value, packed int64 */
    {
      prof_buf_t packed;
      prof_buf_init(&packed, heap);
      for (int k = 0; k < 4; k++) pb_varint(&packed, v[k]);
      pb_varint(&msg, packed.len);
      prof_buf_put(&msg, packed.data, packed.len);
      ok = ok && !packed.failed;
      prof_buf_free(&packed);
    }
    if (sm->tid != 0) { /* label thread_id = tid */
      prof_buf_t label;
      prof_buf_init(&label, heap);
      pb_uint(&label, 1, (uint64_t)thread_key);
      pb_uint(&label, 3, (uint64_t)sm->tid);
      pb_message(&msg, 3, &label);
      ok = ok && !label.failed;
      prof_buf_free(&label);
    }
    pb_message(out, 2, &msg);
  }

  /* mappings: ids are index + 1 */
  const prof_maps_t *maps = s->maps;
  for (size_t i = 0; ok && maps != NULL && i < maps->count; i++) {
    const prof_mapping_t *mp = &maps->map[i];
    msg.len = 0;
    pb_uint(&msg, 1, i + 1);
    pb_uint(&msg, 2, mp->start);
    pb_uint(&msg, 3, mp->limit);
    pb_uint(&msg, 4, mp->offset);
    pb_uint(&msg, 5, (uint64_t)str_index(&st, mp->path));
    if (mp->build_id[0] != 0) pb_uint(&msg, 6, (uint64_t)str_index(&st, mp->build_id));
    pb_message(out, 3, &msg);
  }

  /* locations */
  for (uint64_t id = 1; ok && id <= am.n; id++) {
    uint64_t a = order[id - 1];
    msg.len = 0;
    pb_uint(&msg, 1, id);
    long mi = maps != NULL ? prof_maps_find(maps, a) : -1;
    if (mi >= 0) pb_uint(&msg, 2, (uint64_t)mi + 1);
    pb_uint(&msg, 3, a);
    pb_message(out, 4, &msg);
  }

  int64_t drop = str_index(&st, drop_frames_re);
  int64_t period_type = str_index(&st, "space"), period_unit = str_index(&st, "bytes");
  int64_t comment = str_index(&st, "mialloc-prof " PACKAGE_VERSION);

  /* string table */
  for (size_t i = 0; i < st.n; i++) pb_bytes(out, 6, st.s[i], strlen(st.s[i]));
  pb_uint(out, 7, (uint64_t)drop);
  pb_uint(out, 9, s->time_nanos);
  pb_uint(out, 10, s->duration_nanos);
  msg.len = 0;
  pb_uint(&msg, 1, (uint64_t)period_type);
  pb_uint(&msg, 2, (uint64_t)period_unit);
  pb_message(out, 11, &msg);
  pb_uint(out, 12, s->rate);
  pb_uint(out, 13, (uint64_t)comment);

  ok = ok && !st.failed && !msg.failed && !out->failed;
  mi_free(am.keys);
  mi_free(am.ids);
  mi_free(order);
  mi_free(loc_ids);
  mi_free(st.s);
  prof_buf_free(&msg);
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
  /* windowBits 15 + 16: a gzip stream */
  if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) return false;
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

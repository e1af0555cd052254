/* internal.h -- shared declarations of libmialloc-prof's parts.
 *
 * Rule for everything here: code that runs inside malloc (the callbacks and
 * the snapshot writer they may call) allocates only from the profiler's
 * private heap (excluded from sampling), uses raw system calls instead of
 * stdio, and takes no lock that malloc could take.
 */
#ifndef MIALLOC_PROF_INTERNAL_H
#define MIALLOC_PROF_INTERNAL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* gettid, renameat2, strerrordesc_np */
#endif
#include "config.h"
#include "mialloc.h"
#include "mialloc-prof.h"

#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#if MIALLOC_PROF_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#define PROF_MAX_FRAMES 64
#define PROF_COUNT_SHIFT 16 /* counts are fixed point with 16 fraction bits */

/* --- byte buffers in the private heap (buf.c) --------------------------- */
typedef struct prof_buf_s {
  mi_heap_t *heap;
  char *data;
  size_t len, cap;
  bool failed; /* an allocation failed: the content is incomplete */
} prof_buf_t;

void prof_buf_init(prof_buf_t *b, mi_heap_t *heap);
void prof_buf_free(prof_buf_t *b);
bool prof_buf_reserve(prof_buf_t *b, size_t extra);
void prof_buf_put(prof_buf_t *b, const void *p, size_t n);
void prof_buf_puts(prof_buf_t *b, const char *s);
void prof_buf_putc(prof_buf_t *b, char c);
void prof_buf_put_u64(prof_buf_t *b, uint64_t v);  /* decimal */
void prof_buf_put_hex(prof_buf_t *b, uint64_t v);  /* 0x... */
/* format v in decimal into out (>= 21 bytes); returns the length */
size_t prof_fmt_u64(char *out, uint64_t v);
/* write all of buf to fd, retrying on EINTR and short writes */
bool prof_write_all(int fd, const void *buf, size_t n);
/* a message on stderr prefixed with "mialloc-prof: " (no allocation) */
void prof_warn(const char *a, const char *b, const char *c);

/* --- locations: (thread, call stack) -> counters (location.c) ----------- */
typedef struct prof_loc_s prof_loc_t;
struct prof_loc_s {
  _Atomic(prof_loc_t *) next; /* chain of the bucket; entries are never removed */
  uint64_t hash;
  pid_t tid;
  uint32_t depth;
  _Atomic uint64_t alloc_count; /* estimated objects, fixed point */
  _Atomic uint64_t alloc_bytes; /* estimated bytes */
  _Atomic uint64_t inuse_count; /* fixed point; wraps through zero harmlessly */
  _Atomic uint64_t inuse_bytes;
  uintptr_t frames[]; /* return addresses, leaf first */
};

typedef struct prof_table_s {
  mi_heap_t *heap;
  size_t mask; /* buckets - 1 */
  _Atomic(prof_loc_t *) *buckets;
  _Atomic size_t count;
  pthread_mutex_t chunk_lock; /* entries are carved from chunks (location.c) */
  uint8_t *chunk_next;
  size_t chunk_left;
} prof_table_t;

bool prof_table_init(prof_table_t *t, mi_heap_t *heap, size_t buckets);
void prof_table_after_fork(prof_table_t *t);
prof_loc_t *prof_table_get(prof_table_t *t, pid_t tid, const uintptr_t *frames, unsigned depth);
typedef void prof_loc_visit_fun(prof_loc_t *loc, void *arg);
void prof_table_visit(prof_table_t *t, prof_loc_visit_fun *fun, void *arg);

/* --- stack capture (stack.c) --------------------------------------------- */
void prof_stack_init(void);
#define PROF_RAW_FRAMES (PROF_MAX_FRAMES + 16)   /* room for our own frames */
#if MIALLOC_PROF_LIBUNWIND
/* A thread's first unw_backtrace builds its cache (an mmap and about 80,000
 * instructions), worth it only for a thread that samples again and again:
 * its first few samples take backtrace, which returns the same frames. */
#define PROF_UNWIND_CACHE_AFTER 4
extern __thread unsigned prof_thread_captures __attribute__((tls_model("initial-exec")));
static inline __attribute__((always_inline)) int prof_stack_unwind_lib(void **raw, int max) {
  if (prof_thread_captures >= PROF_UNWIND_CACHE_AFTER) return unw_backtrace(raw, max);
  prof_thread_captures++;
  return backtrace(raw, max);
}
#else
static inline __attribute__((always_inline)) int prof_stack_unwind_lib(void **raw, int max) {
  return backtrace(raw, max);
}
#endif
#if MIALLOC_PROF_CFI_UNWIND
/* The frame rules of the DWARF CFI, cached for the whole process (unwind.c):
 * the walk from (pc, sp, bp) of the capturing function, raw[0] = pc.
 * Returns the number of addresses stored, or -1 where a frame needs more
 * than this walk reads (the libraries' unwinders then take over). */
int prof_unwind_cfi(void **raw, int max, uintptr_t pc, uintptr_t sp, uintptr_t bp);
/* The three registers at one instruction of the capturing function, whose
 * CFI row then describes them exactly. */
#define PROF_HERE(pc, sp, bp) \
  __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(pc), "=r"(sp), "=r"(bp))
static inline __attribute__((always_inline)) int prof_stack_unwind(void **raw, int max) {
  uintptr_t pc, sp, bp;
  PROF_HERE(pc, sp, bp);
  int n = prof_unwind_cfi(raw, max, pc, sp, bp);
  return n > 0 ? n : prof_stack_unwind_lib(raw, max);
}
#else
#define prof_stack_unwind prof_stack_unwind_lib
#endif
/* The return addresses of the caller's stack, leaf first, without the
 * profiler's and the allocator's own frames: raw holds n of them as
 * prof_stack_unwind gave them in the capturing function (inline, so that
 * the capture adds no frame of its own: every frame unwound costs).  The
 * capturing function's own frame is dropped.  Returns the number stored. */
unsigned prof_stack_trim(void *const *raw, int n, uintptr_t *frames, unsigned max);
/* For the function that captures: gcc would split its early-return head
 * from its body (".part"), one more frame for every capture to unwind. */
#if defined(__GNUC__) && !defined(__clang__)
#define prof_capturing __attribute__((optimize("no-partial-inlining")))
#else
#define prof_capturing
#endif

/* --- mappings (maps.c) ----------------------------------------------------- */
typedef struct prof_mapping_s {
  uint64_t start, limit, offset;
  const char *path;     /* points into the maps text; "" if anonymous */
  const char *build_id; /* hex, or "" */
} prof_mapping_t;

typedef struct prof_maps_s {
  prof_buf_t text;     /* /proc/self/maps as read (NUL terminated) */
  prof_buf_t strings;  /* paths and build ids */
  prof_mapping_t *map; /* executable file mappings, main program first */
  size_t count;
  mi_heap_t *heap;
} prof_maps_t;

bool prof_maps_read(prof_maps_t *m, mi_heap_t *heap);
void prof_maps_free(prof_maps_t *m);
/* index of the mapping that contains addr, or -1 */
long prof_maps_find(const prof_maps_t *m, uint64_t addr);
/* hex GNU build id of the ELF file at path into out (>= 2*64+1 bytes) */
bool prof_elf_build_id(const char *path, char *out, size_t outn);

/* --- function names from the dynamic symbol tables (symbols.c) ----------- */
/* For each of the n addresses, the name of the defined function symbol of
 * a loaded object's .dynsym whose [value, value + size) contains it:
 * name_off[i] is its offset in names (appended, NUL terminated), or 0 when
 * no symbol contains the address (names[0] is then a NUL).  Reads the
 * tables in memory under dl_iterate_phdr (see symbols.c for why that is
 * safe inside malloc); allocates from names->heap.  false: out of memory
 * (no names). */
bool prof_symbolize(const uint64_t *addrs, size_t n, prof_buf_t *names, size_t *name_off);

/* --- a snapshot: what the encoders write ---------------------------------- */
typedef struct prof_sample_s {
  pid_t tid;
  unsigned depth;
  const uintptr_t *frames; /* return addresses, leaf first */
  uint64_t alloc_count;    /* fixed point (PROF_COUNT_SHIFT) */
  uint64_t alloc_bytes;
  uint64_t inuse_count; /* fixed point */
  uint64_t inuse_bytes;
} prof_sample_t;

typedef struct prof_snapshot_s {
  size_t rate;
  uint64_t time_nanos, duration_nanos;
  const prof_sample_t *samples;
  size_t nsamples;
  const prof_maps_t *maps;
} prof_snapshot_t;

/* Encoders append the (uncompressed) profile to out. */
bool prof_encode_proto(prof_buf_t *out, const prof_snapshot_t *s);
bool prof_encode_text(prof_buf_t *out, const prof_snapshot_t *s);
/* gzip in into fd; zlib allocates from heap */
bool prof_gzip_write(int fd, const void *in, size_t n, mi_heap_t *heap);

/* --- output files (output.c) ----------------------------------------------- */
/* Split a user base name: strips ".heap"/".text" (then *text = true) or
 * ".pb.gz"/".pb" (proto).  out gets the stripped base. */
bool prof_output_base(const char *base, char *out, size_t outn, bool *text);
/* Write data (already in its final encoding when !gzip) to
 * <base>.<pid>.<seq>.<ext>, via a temporary file created exclusively and
 * renamed without replacing.  If the name exists the next seq is tried;
 * *seq is advanced past the number used.  Returns the seq used or -1. */
long prof_output_write(const char *base, const char *ext, pid_t pid, _Atomic long *seq,
                       const prof_buf_t *data, bool gzip, mi_heap_t *heap);

/* --- numbers ---------------------------------------------------------------- */
/* Parse a size with an optional K/KiB/M/MiB/G/GiB suffix (binary units). */
bool prof_parse_size(const char *s, uint64_t *out);

#endif

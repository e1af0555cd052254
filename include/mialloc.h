/* mialloc.h -- public interface of the mialloc memory allocator.
 *
 * The names and semantics follow the reference allocator's public API (mimalloc)
 * so that code written for it compiles against mialloc with only the include
 * changed.  Every symbol declared here is exported; nothing else is.
 */
#ifndef MIALLOC_H
#define MIALLOC_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>

/* The reference allocator's API level this header follows (mimalloc 2.2,
 * encoded as it encodes its versions: major*100 + minor*10 + patch), so
 * that code written for it and testing the macro takes the branches that
 * match what is declared here.  mi_version() returns the same number. */
#define MI_MALLOC_VERSION 220

/* mialloc's own version. */
#define MIALLOC_VERSION_MAJOR 0
#define MIALLOC_VERSION_MINOR 1
#define MIALLOC_VERSION_PATCH 0

#ifdef __cplusplus
extern "C" {
#endif

/* Attributes under the reference allocator's names, which code written for
 * it may use in its own declarations too. */
#ifdef __cplusplus
#define mi_attr_noexcept      noexcept
#else
#define mi_attr_noexcept
#endif
#define mi_cdecl
#define mi_decl_restrict

#if defined(__GNUC__)
#define mi_decl_export        __attribute__((visibility("default")))
#define mi_decl_nodiscard     __attribute__((warn_unused_result))
#define mi_attr_malloc        __attribute__((malloc))
#define mi_attr_alloc_size(s) __attribute__((alloc_size(s)))
#define mi_attr_alloc_size2(s1, s2) __attribute__((alloc_size(s1, s2)))
#define mi_attr_alloc_align(p) __attribute__((alloc_align(p)))
#else
#define mi_decl_export
#define mi_decl_nodiscard
#define mi_attr_malloc
#define mi_attr_alloc_size(s)
#define mi_attr_alloc_size2(s1, s2)
#define mi_attr_alloc_align(p)
#endif

typedef struct mi_heap_s mi_heap_t;   /* first-class heaps, below */

/* ---------------------------------------------------------------------------
 * Allocation family
 * ------------------------------------------------------------------------ */
mi_decl_export mi_decl_nodiscard void *mi_malloc(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_calloc(size_t count, size_t size) mi_attr_malloc mi_attr_alloc_size2(1, 2);
mi_decl_export mi_decl_nodiscard void *mi_realloc(void *p, size_t newsize) mi_attr_alloc_size(2);
mi_decl_export void *mi_expand(void *p, size_t newsize) mi_attr_alloc_size(2);
mi_decl_export void mi_free(void *p);
mi_decl_export void mi_free_size(void *p, size_t size);
mi_decl_export void mi_free_aligned(void *p, size_t alignment);
mi_decl_export void mi_free_size_aligned(void *p, size_t size, size_t alignment);
mi_decl_export mi_decl_nodiscard char *mi_strdup(const char *s) mi_attr_malloc;
mi_decl_export mi_decl_nodiscard char *mi_strndup(const char *s, size_t n) mi_attr_malloc;
/* not mi_attr_malloc: with a buffer it returns that buffer */
mi_decl_export mi_decl_nodiscard char *mi_realpath(const char *fname, char *resolved_name);

/* The *_small functions take sizes up to MI_SMALL_SIZE_MAX (larger ones
 * work too, through the general path). */
#define MI_SMALL_WSIZE_MAX  (128)
#define MI_SMALL_SIZE_MAX   (MI_SMALL_WSIZE_MAX * sizeof(void *))
mi_decl_export mi_decl_nodiscard void *mi_malloc_small(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_zalloc_small(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_zalloc(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_mallocn(size_t count, size_t size) mi_attr_malloc mi_attr_alloc_size2(1, 2);
mi_decl_export mi_decl_nodiscard void *mi_reallocn(void *p, size_t count, size_t size) mi_attr_alloc_size2(2, 3);
mi_decl_export mi_decl_nodiscard void *mi_reallocf(void *p, size_t newsize) mi_attr_alloc_size(2);

mi_decl_export mi_decl_nodiscard size_t mi_usable_size(const void *p);
mi_decl_export mi_decl_nodiscard size_t mi_good_size(size_t size);
mi_decl_export void mi_free_small(void *p);   /* mi_free, for any block */

/* The same, also telling the usable size of the block handed out (or
 * freed) through block_size when it is not NULL; 0 for NULL. */
mi_decl_export mi_decl_nodiscard void *mi_umalloc(size_t size, size_t *block_size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_ucalloc(size_t count, size_t size, size_t *block_size) mi_attr_malloc mi_attr_alloc_size2(1, 2);
mi_decl_export mi_decl_nodiscard void *mi_urealloc(void *p, size_t newsize, size_t *block_size_pre, size_t *block_size_post) mi_attr_alloc_size(2);
mi_decl_export void mi_ufree(void *p, size_t *block_size);
mi_decl_export mi_decl_nodiscard void *mi_umalloc_aligned(size_t size, size_t alignment, size_t *block_size) mi_attr_malloc mi_attr_alloc_size(1) mi_attr_alloc_align(2);
mi_decl_export mi_decl_nodiscard void *mi_uzalloc_aligned(size_t size, size_t alignment, size_t *block_size) mi_attr_malloc mi_attr_alloc_size(1) mi_attr_alloc_align(2);
mi_decl_export mi_decl_nodiscard void *mi_umalloc_small(size_t size, size_t *block_size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_uzalloc_small(size_t size, size_t *block_size) mi_attr_malloc mi_attr_alloc_size(1);

/* Zero-initialising re-allocation: bytes past the old size are zero. */
mi_decl_export mi_decl_nodiscard void *mi_rezalloc(void *p, size_t newsize) mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_recalloc(void *p, size_t newcount, size_t size) mi_attr_alloc_size2(2, 3);

/* ---------------------------------------------------------------------------
 * Aligned allocation.  alignment must be a power of two; *_at variants align
 * p + offset instead of p.
 * ------------------------------------------------------------------------ */
mi_decl_export mi_decl_nodiscard void *mi_malloc_aligned(size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size(1) mi_attr_alloc_align(2);
mi_decl_export mi_decl_nodiscard void *mi_malloc_aligned_at(size_t size, size_t alignment, size_t offset) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_zalloc_aligned(size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size(1) mi_attr_alloc_align(2);
mi_decl_export mi_decl_nodiscard void *mi_zalloc_aligned_at(size_t size, size_t alignment, size_t offset) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_calloc_aligned(size_t count, size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size2(1, 2) mi_attr_alloc_align(3);
mi_decl_export mi_decl_nodiscard void *mi_calloc_aligned_at(size_t count, size_t size, size_t alignment, size_t offset) mi_attr_malloc mi_attr_alloc_size2(1, 2);
mi_decl_export mi_decl_nodiscard void *mi_realloc_aligned(void *p, size_t newsize, size_t alignment) mi_attr_alloc_size(2) mi_attr_alloc_align(3);
mi_decl_export mi_decl_nodiscard void *mi_realloc_aligned_at(void *p, size_t newsize, size_t alignment, size_t offset) mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_rezalloc_aligned(void *p, size_t newsize, size_t alignment) mi_attr_alloc_size(2) mi_attr_alloc_align(3);
mi_decl_export mi_decl_nodiscard void *mi_rezalloc_aligned_at(void *p, size_t newsize, size_t alignment, size_t offset) mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_recalloc_aligned(void *p, size_t newcount, size_t size, size_t alignment) mi_attr_alloc_size2(2, 3) mi_attr_alloc_align(4);
mi_decl_export mi_decl_nodiscard void *mi_recalloc_aligned_at(void *p, size_t newcount, size_t size, size_t alignment, size_t offset) mi_attr_alloc_size2(2, 3);

/* ---------------------------------------------------------------------------
 * Posix-style names (also used by the malloc override).
 * ------------------------------------------------------------------------ */
mi_decl_export mi_decl_nodiscard size_t mi_malloc_size(const void *p);
mi_decl_export mi_decl_nodiscard size_t mi_malloc_usable_size(const void *p);
mi_decl_export void mi_cfree(void *p);
mi_decl_export int mi_posix_memalign(void **p, size_t alignment, size_t size);
mi_decl_export mi_decl_nodiscard void *mi_memalign(size_t alignment, size_t size) mi_attr_malloc mi_attr_alloc_size(2) mi_attr_alloc_align(1);
mi_decl_export mi_decl_nodiscard void *mi_valloc(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_pvalloc(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_aligned_alloc(size_t alignment, size_t size) mi_attr_malloc mi_attr_alloc_size(2) mi_attr_alloc_align(1);
mi_decl_export mi_decl_nodiscard void *mi_reallocarray(void *p, size_t count, size_t size) mi_attr_alloc_size2(2, 3);
mi_decl_export int mi_reallocarr(void *p, size_t count, size_t size);
mi_decl_export mi_decl_nodiscard size_t mi_malloc_good_size(size_t size);   /* mi_good_size */

/* Microsoft CRT-style names.  mi__expand is mi_expand; the recalloc forms
 * take the alignment last.  mi_dupenv_s copies an environment variable
 * into *buf (NULL, and 0, if it is not set; *size counts the final NUL);
 * there is no wide environment on Linux, so mi_wdupenv_s sets *buf to NULL
 * and returns EINVAL. */
mi_decl_export void *mi__expand(void *p, size_t newsize);
mi_decl_export mi_decl_nodiscard void *mi_aligned_recalloc(void *p, size_t newcount, size_t size, size_t alignment);
mi_decl_export mi_decl_nodiscard void *mi_aligned_offset_recalloc(void *p, size_t newcount, size_t size, size_t alignment, size_t offset);
mi_decl_export int mi_dupenv_s(char **buf, size_t *size, const char *name);
mi_decl_export int mi_wdupenv_s(wchar_t **buf, size_t *size, const wchar_t *name);
mi_decl_export mi_decl_nodiscard wchar_t *mi_wcsdup(const wchar_t *s) mi_attr_malloc;
mi_decl_export mi_decl_nodiscard unsigned char *mi_mbsdup(const unsigned char *s) mi_attr_malloc;

/* C++-style allocation: never return NULL, call the new-handler instead. */
mi_decl_export mi_decl_nodiscard void *mi_new(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_new_aligned(size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size(1) mi_attr_alloc_align(2);
mi_decl_export mi_decl_nodiscard void *mi_new_nothrow(size_t size) mi_attr_malloc mi_attr_alloc_size(1);
mi_decl_export mi_decl_nodiscard void *mi_new_aligned_nothrow(size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size(1) mi_attr_alloc_align(2);
mi_decl_export mi_decl_nodiscard void *mi_new_n(size_t count, size_t size) mi_attr_malloc mi_attr_alloc_size2(1, 2);
mi_decl_export mi_decl_nodiscard void *mi_new_realloc(void *p, size_t newsize) mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_new_reallocn(void *p, size_t newcount, size_t size) mi_attr_alloc_size2(2, 3);
mi_decl_export mi_decl_nodiscard void *mi_heap_alloc_new(mi_heap_t *heap, size_t size) mi_attr_malloc mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_heap_alloc_new_n(mi_heap_t *heap, size_t count, size_t size) mi_attr_malloc mi_attr_alloc_size2(2, 3);

/* ---------------------------------------------------------------------------
 * Process and thread, collection, introspection
 * ------------------------------------------------------------------------ */
mi_decl_export void mi_collect(bool force);
/* Give back what the calling thread's heaps and the arenas hold free:
 * mi_collect(true).  The target (bytes the thread may keep) is accepted
 * for compatibility. */
mi_decl_export void mi_collect_reduce(size_t target_thread_owned);
/* A hint that the calling thread belongs to a thread pool; accepted for
 * compatibility, it changes nothing (mialloc never lets a thread's
 * reclaiming of abandoned memory depend on it). */
mi_decl_export void mi_thread_set_in_threadpool(void);
mi_decl_export int  mi_version(void);
mi_decl_export bool mi_is_redirected(void);
mi_decl_export bool mi_is_in_heap_region(const void *p);
mi_decl_export bool mi_check_owned(const void *p);
mi_decl_export void mi_process_init(void);
mi_decl_export void mi_process_done(void);
mi_decl_export void mi_thread_init(void);
mi_decl_export void mi_thread_done(void);

/* ---------------------------------------------------------------------------
 * Output, errors and callbacks
 * ------------------------------------------------------------------------ */
typedef void (mi_output_fun)(const char *msg, void *arg);
typedef void (mi_error_fun)(int err, void *arg);
typedef void (mi_deferred_free_fun)(bool force, unsigned long long heartbeat, void *arg);
mi_decl_export void mi_register_output(mi_output_fun *out, void *arg);
mi_decl_export void mi_register_error(mi_error_fun *fun, void *arg);
mi_decl_export void mi_register_deferred_free(mi_deferred_free_fun *deferred_free, void *arg);

/* ---------------------------------------------------------------------------
 * Statistics
 * ------------------------------------------------------------------------ */
mi_decl_export void mi_stats_reset(void);
mi_decl_export void mi_stats_merge(void);
mi_decl_export void mi_stats_print(void *out);  /* out is ignored; prints to the output */
mi_decl_export void mi_stats_print_out(mi_output_fun *out, void *arg);
/* The counters are process-wide: the same report as mi_stats_print_out. */
mi_decl_export void mi_thread_stats_print_out(mi_output_fun *out, void *arg);
/* Print the arenas of the calling thread's sub-process (size, segments in
 * use, dirty); the flags are accepted for compatibility. */
mi_decl_export void mi_debug_show_arenas(bool show_inuse, bool show_abandoned, bool show_purge);
mi_decl_export void mi_arenas_print(void);   /* the same */
/* JSON form of the statistics into buf (size bytes); returns buf, or NULL if
 * it is too small.  With buf NULL the text is allocated with mi_malloc (free
 * it with mi_free); NULL when out of memory. */
mi_decl_export char *mi_stats_get_json(size_t size, char *buf);
mi_decl_export void mi_process_info(size_t *elapsed_msecs, size_t *user_msecs, size_t *system_msecs,
                                    size_t *current_rss, size_t *peak_rss,
                                    size_t *current_commit, size_t *peak_commit, size_t *page_faults);

/* ---------------------------------------------------------------------------
 * First-class heaps.  A heap is usable from any thread (each thread gets its
 * own part of it, a theap).  mi_heap_delete moves the heap's live blocks to
 * the main heap (they stay valid); mi_heap_destroy frees them all at once.
 * Neither may race with other threads allocating from the same heap.
 * ------------------------------------------------------------------------ */
typedef int mi_arena_id_t;          /* 0: no specific arena */
typedef void *mi_subproc_id_t;

mi_decl_export mi_decl_nodiscard mi_heap_t *mi_heap_new(void);
mi_decl_export mi_decl_nodiscard mi_heap_t *mi_heap_new_in_arena(mi_arena_id_t arena_id);
mi_decl_export mi_decl_nodiscard mi_heap_t *mi_heap_new_ex(int heap_tag, bool allow_destroy, mi_arena_id_t arena_id);
mi_decl_export void mi_heap_delete(mi_heap_t *heap);
mi_decl_export void mi_heap_destroy(mi_heap_t *heap);
mi_decl_export mi_heap_t *mi_heap_main(void);
mi_decl_export mi_heap_t *mi_heap_get_default(void);
mi_decl_export mi_heap_t *mi_heap_get_backing(void);
mi_decl_export mi_heap_t *mi_heap_set_default(mi_heap_t *heap);
mi_decl_export mi_heap_t *mi_heap_of(const void *p);
mi_decl_export bool mi_heap_contains(const mi_heap_t *heap, const void *p);
mi_decl_export bool mi_heap_contains_block(mi_heap_t *heap, const void *p);
mi_decl_export bool mi_heap_check_owned(mi_heap_t *heap, const void *p);
mi_decl_export bool mi_any_heap_contains(const void *p);
mi_decl_export void mi_heap_collect(mi_heap_t *heap, bool force);

mi_decl_export mi_decl_nodiscard void *mi_heap_malloc(mi_heap_t *heap, size_t size) mi_attr_malloc mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_heap_zalloc(mi_heap_t *heap, size_t size) mi_attr_malloc mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_heap_calloc(mi_heap_t *heap, size_t count, size_t size) mi_attr_malloc mi_attr_alloc_size2(2, 3);
mi_decl_export mi_decl_nodiscard void *mi_heap_mallocn(mi_heap_t *heap, size_t count, size_t size) mi_attr_malloc mi_attr_alloc_size2(2, 3);
mi_decl_export mi_decl_nodiscard void *mi_heap_malloc_small(mi_heap_t *heap, size_t size) mi_attr_malloc mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_heap_zalloc_small(mi_heap_t *heap, size_t size) mi_attr_malloc mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_heap_realloc(mi_heap_t *heap, void *p, size_t newsize) mi_attr_alloc_size(3);
mi_decl_export mi_decl_nodiscard void *mi_heap_reallocn(mi_heap_t *heap, void *p, size_t count, size_t size) mi_attr_alloc_size2(3, 4);
mi_decl_export mi_decl_nodiscard void *mi_heap_reallocf(mi_heap_t *heap, void *p, size_t newsize) mi_attr_alloc_size(3);
mi_decl_export mi_decl_nodiscard void *mi_heap_rezalloc(mi_heap_t *heap, void *p, size_t newsize) mi_attr_alloc_size(3);
mi_decl_export mi_decl_nodiscard void *mi_heap_recalloc(mi_heap_t *heap, void *p, size_t newcount, size_t size) mi_attr_alloc_size2(3, 4);
mi_decl_export mi_decl_nodiscard char *mi_heap_strdup(mi_heap_t *heap, const char *s) mi_attr_malloc;
mi_decl_export mi_decl_nodiscard char *mi_heap_strndup(mi_heap_t *heap, const char *s, size_t n) mi_attr_malloc;
mi_decl_export mi_decl_nodiscard char *mi_heap_realpath(mi_heap_t *heap, const char *fname, char *resolved_name);
mi_decl_export mi_decl_nodiscard void *mi_heap_malloc_aligned(mi_heap_t *heap, size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size(2) mi_attr_alloc_align(3);
mi_decl_export mi_decl_nodiscard void *mi_heap_malloc_aligned_at(mi_heap_t *heap, size_t size, size_t alignment, size_t offset) mi_attr_malloc mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_heap_zalloc_aligned(mi_heap_t *heap, size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size(2) mi_attr_alloc_align(3);
mi_decl_export mi_decl_nodiscard void *mi_heap_zalloc_aligned_at(mi_heap_t *heap, size_t size, size_t alignment, size_t offset) mi_attr_malloc mi_attr_alloc_size(2);
mi_decl_export mi_decl_nodiscard void *mi_heap_calloc_aligned(mi_heap_t *heap, size_t count, size_t size, size_t alignment) mi_attr_malloc mi_attr_alloc_size2(2, 3) mi_attr_alloc_align(4);
mi_decl_export mi_decl_nodiscard void *mi_heap_calloc_aligned_at(mi_heap_t *heap, size_t count, size_t size, size_t alignment, size_t offset) mi_attr_malloc mi_attr_alloc_size2(2, 3);
mi_decl_export mi_decl_nodiscard void *mi_heap_realloc_aligned(mi_heap_t *heap, void *p, size_t newsize, size_t alignment) mi_attr_alloc_size(3) mi_attr_alloc_align(4);
mi_decl_export mi_decl_nodiscard void *mi_heap_realloc_aligned_at(mi_heap_t *heap, void *p, size_t newsize, size_t alignment, size_t offset) mi_attr_alloc_size(3);
mi_decl_export mi_decl_nodiscard void *mi_heap_rezalloc_aligned(mi_heap_t *heap, void *p, size_t newsize, size_t alignment) mi_attr_alloc_size(3) mi_attr_alloc_align(4);
mi_decl_export mi_decl_nodiscard void *mi_heap_rezalloc_aligned_at(mi_heap_t *heap, void *p, size_t newsize, size_t alignment, size_t offset) mi_attr_alloc_size(3);
mi_decl_export mi_decl_nodiscard void *mi_heap_recalloc_aligned(mi_heap_t *heap, void *p, size_t newcount, size_t size, size_t alignment) mi_attr_alloc_size2(3, 4) mi_attr_alloc_align(5);
mi_decl_export mi_decl_nodiscard void *mi_heap_recalloc_aligned_at(mi_heap_t *heap, void *p, size_t newcount, size_t size, size_t alignment, size_t offset) mi_attr_alloc_size2(3, 4);

/* Visiting: one call per area (block == NULL) and, with visit_all_blocks,
 * one per live block.  Exact when no other thread uses the heap meanwhile. */
typedef struct mi_heap_area_s {
  void *blocks;            /* start of the area's blocks */
  size_t reserved;         /* bytes reserved for blocks */
  size_t committed;        /* bytes carved into blocks so far */
  size_t used;             /* live blocks */
  size_t block_size;       /* usable bytes per block */
  size_t full_block_size;  /* bytes per block including any padding */
  int heap_tag;
} mi_heap_area_t;
typedef bool (mi_block_visit_fun)(const mi_heap_t *heap, const mi_heap_area_t *area, void *block,
                                  size_t block_size, void *arg);
mi_decl_export bool mi_heap_visit_blocks(const mi_heap_t *heap, bool visit_all_blocks,
                                         mi_block_visit_fun *visitor, void *arg);

/* ---------------------------------------------------------------------------
 * Arenas: OS memory reserved (or provided by the caller) up front.  An
 * exclusive arena serves only heaps created in it (mi_heap_new_in_arena).
 * ------------------------------------------------------------------------ */
mi_decl_export int mi_reserve_os_memory(size_t size, bool commit, bool allow_large);
mi_decl_export int mi_reserve_os_memory_ex(size_t size, bool commit, bool allow_large, bool exclusive, mi_arena_id_t *arena_id);
mi_decl_export bool mi_manage_os_memory(void *start, size_t size, bool is_committed, bool is_large, bool is_zero, int numa_node);
mi_decl_export bool mi_manage_os_memory_ex(void *start, size_t size, bool is_committed, bool is_large, bool is_zero, int numa_node, bool exclusive, mi_arena_id_t *arena_id);
mi_decl_export int mi_reserve_huge_os_pages_interleave(size_t pages, size_t numa_nodes, size_t timeout_msecs);
mi_decl_export int mi_reserve_huge_os_pages_at(size_t pages, int numa_node, size_t timeout_msecs);
mi_decl_export int mi_reserve_huge_os_pages_at_ex(size_t pages, int numa_node, size_t timeout_msecs, bool exclusive, mi_arena_id_t *arena_id);
/* Deprecated form: *pages_reserved is pages on success, else 0. */
mi_decl_export int mi_reserve_huge_os_pages(size_t pages, double max_secs, size_t *pages_reserved);
mi_decl_export void *mi_arena_area(mi_arena_id_t arena_id, size_t *size);

/* ---------------------------------------------------------------------------
 * Sub-processes: isolated allocator states (own arenas, heaps, abandoned
 * memory) for groups of threads.  Memory of one is never given to another.
 * ------------------------------------------------------------------------ */
typedef bool (mi_heap_visit_fun)(mi_heap_t *heap, void *arg);
mi_decl_export mi_subproc_id_t mi_subproc_main(void);
mi_decl_export mi_subproc_id_t mi_subproc_new(void);
mi_decl_export void mi_subproc_add_current_thread(mi_subproc_id_t subproc);
mi_decl_export bool mi_subproc_visit_heaps(mi_subproc_id_t subproc, mi_heap_visit_fun *visitor, void *arg);
/* Releases the sub-process's heaps and arenas; no thread may still use it. */
mi_decl_export void mi_subproc_destroy(mi_subproc_id_t subproc);
mi_decl_export void mi_subproc_delete(mi_subproc_id_t subproc);   /* same as destroy */
/* Visit the blocks that threads of the sub-process left behind when they
 * exited (abandoned memory not yet taken over by another thread) of heaps
 * with the given tag (the main heap's tag is 0, mi_heap_new_ex sets
 * others), or of every heap if heap_tag is negative.  The visitor gets
 * the owning heap; it must not allocate from or free into that memory.
 * False if the visitor stopped early or subproc is not a sub-process. */
mi_decl_export bool mi_abandoned_visit_blocks(mi_subproc_id_t subproc, int heap_tag, bool visit_blocks,
                                              mi_block_visit_fun *visitor, void *arg);

/* ---------------------------------------------------------------------------
 * Profiler interface (SPEC section 5).  A profiler is attached to the
 * current sub-process with mi_profile.  Sampling is byte based (a Poisson
 * process): after on average sample_rate bytes an allocation is sampled,
 * on_alloc runs, and its result is the byte count to the next sample.
 * Each sampled block carries sample_data_size bytes of the profiler's data
 * (at most MI_PROFILE_DATA_MAX) that reach on_free whichever thread frees
 * it.  Callbacks run inside malloc/free: they must not allocate from a
 * profiled heap (use a heap excluded with mi_heap_profile_disable).
 * ------------------------------------------------------------------------ */
#define MI_PROFILE_DATA_MAX 64
typedef struct mi_profiler_s {
  size_t sample_rate;        /* mean bytes between samples; 0: no sampling */
  size_t sample_data_size;   /* bytes of per-sample data, <= MI_PROFILE_DATA_MAX */
  uint64_t seed;             /* seed of the core's random draws; 0: random */
  void *arg;                 /* passed to every callback */
  /* A sampled allocation of size bytes at p in heap.  sample_size is the
   * byte count the sampling process charged for it (its block size, >= size):
   * the block was sampled with probability 1 - exp(-sample_size/sample_rate).
   * data: the block's sample data (zeroed).  Returns the bytes until the next
   * sample of this stream (0: let the core draw one). */
  size_t (*on_alloc)(mi_heap_t *heap, void *p, size_t size, size_t sample_size, void *data, void *arg);
  /* A sampled block is freed (or its heap destroyed), from any thread. */
  void (*on_free)(void *p, size_t size, void *data, void *arg);
  /* mi_profiler_snapshot was called. */
  void (*on_snapshot)(void *arg);
} mi_profiler_t;

/* Attach (the struct is copied) or, with NULL, detach.  Attaching starts
 * sampling.  Returns false if another profiler is attached or the values
 * are out of range.  A detach waits for the callbacks other threads are
 * running: once it returns, no callback of the old profiler runs any more
 * (a callback must not wait for a thread that is detaching).  Blocks sampled
 * for a profiler that was detached are never reported to one attached
 * later. */
mi_decl_export bool mi_profile(const mi_profiler_t *profiler);
mi_decl_export void mi_profiler_start(void);     /* resume sampling */
mi_decl_export void mi_profiler_stop(void);      /* stop sampling; frees still reported */
mi_decl_export void mi_profiler_snapshot(void);  /* calls on_snapshot */
mi_decl_export void mi_heap_profile_disable(mi_heap_t *heap);

/* ---------------------------------------------------------------------------
 * Guarded sampling per heap (builds with guarded sampling; no effect in
 * others).  About 1 in sample_rate allocations from the heap whose size
 * lies in [min, max] is placed against a guard page (0: none, 1: all);
 * a seed other than 0 restarts the calling thread's draws from it.  New
 * heaps start from MIALLOC_GUARDED_SAMPLE_RATE/MIN/MAX.
 * ------------------------------------------------------------------------ */
mi_decl_export void mi_heap_guarded_set_sample_rate(mi_heap_t *heap, size_t sample_rate, size_t seed);
mi_decl_export void mi_heap_guarded_set_size_bound(mi_heap_t *heap, size_t min, size_t max);

/* ---------------------------------------------------------------------------
 * Options.  Each option reads MIALLOC_<NAME> from the environment once (the
 * environment is ignored in setuid/setgid/AT_SECURE processes).
 * ------------------------------------------------------------------------ */
typedef enum mi_option_e {
  mi_option_show_errors,          /* print error messages (default on) */
  mi_option_show_stats,           /* print statistics at exit */
  mi_option_verbose,              /* explain decisions on stderr */
  mi_option_eager_commit,         /* accepted for compatibility */
  mi_option_arena_eager_commit,   /* 0: commit arenas as segments are claimed (default), 1: at once */
  mi_option_purge_decommits,      /* purge with MADV_DONTNEED (1) or MADV_FREE (0) */
  mi_option_allow_large_os_pages, /* ask for transparent huge pages on arenas */
  mi_option_reserve_huge_os_pages,/* reserve N GiB of 1 GiB/2 MiB huge pages at start */
  mi_option_reserve_huge_os_pages_at, /* accepted for compatibility (NUMA node) */
  mi_option_reserve_os_memory,    /* reserve this much OS memory at start (size) */
  mi_option_deprecated_segment_cache,
  mi_option_deprecated_page_reset,
  mi_option_abandoned_page_purge,
  mi_option_deprecated_segment_reset,
  mi_option_eager_commit_delay,
  mi_option_purge_delay,          /* milliseconds before freed memory is purged */
  mi_option_use_numa_nodes,
  mi_option_disallow_os_alloc,
  mi_option_os_tag,
  mi_option_max_errors,           /* print at most this many error messages */
  mi_option_max_warnings,         /* print at most this many warnings */
  mi_option_max_segment_reclaim,
  mi_option_destroy_on_exit,
  mi_option_arena_reserve,        /* size of each OS reservation (size) */
  mi_option_arena_purge_mult,
  mi_option_purge_extend_delay,
  mi_option_abandoned_reclaim_on_free,
  mi_option_disallow_arena_alloc,
  mi_option_retry_on_oom,
  mi_option_abort_on_error,       /* abort() after reporting an error */
  mi_option_purge_thread,         /* background purging in idle programs */
  mi_option_guarded_sample_rate,  /* place 1 in N allocations against a guard page (0: off) */
  mi_option_guarded_min,          /* smallest size guarded sampling considers */
  mi_option_guarded_max,          /* largest size guarded sampling considers (<= 4080) */
  mi_option_guarded_sample_seed,  /* seed of the guarded sampling draws (0: random) */
  mi_option_show_leaks,           /* list the blocks still live at exit */
  mi_option_page_thin,            /* purge the free OS pages of sparse pages (release builds) */
  /* accepted for compatibility, no effect: */
  mi_option_visit_abandoned,      /* abandoned blocks can always be visited */
  mi_option_guarded_precise,      /* guarded blocks always end at their guard page */
  mi_option_target_segments_per_thread,
  mi_option_generic_collect,
  mi_option_allow_thp,            /* transparent huge pages: see allow_large_os_pages */
  mi_option_dlopen_deepbind,      /* let dlopen keep RTLD_DEEPBIND (default: cleared) */
  _mi_option_last,
  /* legacy names */
  mi_option_large_os_pages = mi_option_allow_large_os_pages,
  mi_option_eager_region_commit = mi_option_arena_eager_commit,
  mi_option_reset_decommits = mi_option_purge_decommits,
  mi_option_reset_delay = mi_option_purge_delay,
  mi_option_abandoned_page_reset = mi_option_abandoned_page_purge,
  mi_option_limit_os_alloc = mi_option_disallow_os_alloc,
  mi_option_deprecated_eager_region_commit = mi_option_arena_eager_commit,
  mi_option_deprecated_reset_decommits = mi_option_purge_decommits,
  mi_option_page_reset = mi_option_deprecated_page_reset,
  mi_option_abandoned_page_decommit = mi_option_abandoned_page_purge,
  mi_option_decommit_delay = mi_option_purge_delay,
  mi_option_decommit_extend_delay = mi_option_purge_extend_delay,
  mi_option_allow_decommit = mi_option_purge_decommits,
  mi_option_segment_decommit_delay = mi_option_deprecated_segment_cache
} mi_option_t;

mi_decl_export bool mi_option_is_enabled(mi_option_t option);
mi_decl_export void mi_option_enable(mi_option_t option);
mi_decl_export void mi_option_disable(mi_option_t option);
mi_decl_export void mi_option_set_enabled(mi_option_t option, bool enable);
mi_decl_export void mi_option_set_enabled_default(mi_option_t option, bool enable);
mi_decl_export long mi_option_get(mi_option_t option);
mi_decl_export long mi_option_get_clamp(mi_option_t option, long min, long max);
mi_decl_export size_t mi_option_get_size(mi_option_t option);
mi_decl_export void mi_option_set(mi_option_t option, long value);
mi_decl_export void mi_option_set_default(mi_option_t option, long value);
mi_decl_export void mi_options_print(void);

/* Walk the calling thread's part of its default heap and check every
 * block's canary and (debug builds) every freed block's fill; reports what
 * it finds through the error callback and returns false if anything was
 * wrong.  Always true in builds without padding (release). */
mi_decl_export bool mi_debug_check(void);

/* ---------------------------------------------------------------------------
 * Typed allocation
 * ------------------------------------------------------------------------ */
#define mi_malloc_tp(tp)                ((tp *)mi_malloc(sizeof(tp)))
#define mi_zalloc_tp(tp)                ((tp *)mi_zalloc(sizeof(tp)))
#define mi_calloc_tp(tp, n)             ((tp *)mi_calloc(n, sizeof(tp)))
#define mi_mallocn_tp(tp, n)            ((tp *)mi_mallocn(n, sizeof(tp)))
#define mi_reallocn_tp(p, tp, n)        ((tp *)mi_reallocn(p, n, sizeof(tp)))
#define mi_recalloc_tp(p, tp, n)        ((tp *)mi_recalloc(p, n, sizeof(tp)))
#define mi_heap_malloc_tp(hp, tp)       ((tp *)mi_heap_malloc(hp, sizeof(tp)))
#define mi_heap_zalloc_tp(hp, tp)       ((tp *)mi_heap_zalloc(hp, sizeof(tp)))
#define mi_heap_calloc_tp(hp, tp, n)    ((tp *)mi_heap_calloc(hp, n, sizeof(tp)))
#define mi_heap_mallocn_tp(hp, tp, n)   ((tp *)mi_heap_mallocn(hp, n, sizeof(tp)))
#define mi_heap_reallocn_tp(hp, p, tp, n) ((tp *)mi_heap_reallocn(hp, p, n, sizeof(tp)))
#define mi_heap_recalloc_tp(hp, p, tp, n) ((tp *)mi_heap_recalloc(hp, p, n, sizeof(tp)))

#ifdef __cplusplus
}
#include "mialloc-stl.h"
#endif

#endif /* MIALLOC_H */

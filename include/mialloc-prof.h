/* mialloc-prof.h -- libmialloc-prof, the sampling heap profiler for mialloc.
 *
 * A profiler samples allocations through libmialloc's profiler interface
 * (mi_profile, see <mialloc.h>) and writes pprof heap profiles: gzip'ed
 * protobuf (<base>.<pid>.<seq>.pb.gz) or, when the base name ends in ".heap"
 * or ".text", the legacy text format (<base>.<pid>.<seq>.heap).
 *
 * Most programs never call this interface: LD_PRELOAD the library (or run
 * mialloc-prof(1)) with MIALLOC_PROFILE=<base> set; see doc/profiler.md.
 * Link with `pkg-config --libs mialloc-prof`.
 */
#ifndef MIALLOC_PROF_H
#define MIALLOC_PROF_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define mi_pprof_export __attribute__((visibility("default")))
#else
#define mi_pprof_export
#endif

typedef struct mi_pprof_profiler_s mi_pprof_profiler_t;

/* Create a profiler and attach it (mi_profile) to the calling thread's
 * sub-process; sampling starts at once.  Only one profiler can be attached
 * to a sub-process: returns NULL (errno EBUSY) if one is, EINVAL for a bad
 * argument, ENOMEM when out of memory.
 *   sample_rate         mean bytes between samples (0: 512 KiB)
 *   base_name           output path prefix; ".heap"/".text" selects text
 *   alloc_interval      snapshot after this many (estimated) bytes allocated; 0 off
 *   inuse_interval      snapshot when in-use bytes grew this much since the
 *                       last snapshot; 0 off
 *   time_interval_secs  snapshot every this many seconds (also while the
 *                       program is idle); 0 off, at most 86400
 * A final snapshot is written at process exit. */
mi_pprof_export mi_pprof_profiler_t *mi_pprof_profiler_new(size_t sample_rate, const char *base_name,
                                                           size_t alloc_interval, size_t inuse_interval,
                                                           size_t time_interval_secs);

/* Write a final snapshot, detach the profiler and release it.  No other
 * thread may allocate or free concurrently (the same rule as for
 * mi_heap_destroy).  Accepts NULL. */
mi_pprof_export void mi_pprof_profiler_delete(mi_pprof_profiler_t *prof);

/* Write a snapshot now.  Returns its sequence number (>= 0), or -1 with
 * errno set.  mi_profiler_snapshot() (the core call) does the same for the
 * attached profiler. */
mi_pprof_export long mi_pprof_snapshot(mi_pprof_profiler_t *prof);

/* The profiler started from the environment (MIALLOC_PROFILE), or NULL. */
mi_pprof_export mi_pprof_profiler_t *mi_pprof_env_profiler(void);

/* Introspection: the profiler's current estimates of in-use and
 * allocated-so-far bytes (unsampled, summed over all locations). */
mi_pprof_export uint64_t mi_pprof_inuse_bytes(const mi_pprof_profiler_t *prof);
mi_pprof_export uint64_t mi_pprof_alloc_bytes(const mi_pprof_profiler_t *prof);

#ifdef __cplusplus
}
#endif

#endif

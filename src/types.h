/* types.h -- the allocator's internal data structures and their constants.
 *
 * Memory layout, from the OS up:
 *   arena    a large OS reservation (MIALLOC_ARENA_RESERVE) cut into segments
 *   segment  4 MiB, owned by one thread; slice 0 holds the segment's metadata
 *            (never user data), slices 1..63 hold pages
 *   page     one or more 64 KiB slices holding blocks of one size class
 *   span     a "huge" allocation: whole segments, one block
 * The page map (pagemap.c) maps every 64 KiB slice of the address space to
 * its page, or to NULL when mialloc does not own it.
 */
#ifndef MIALLOC_TYPES_H
#define MIALLOC_TYPES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "mialloc.h"

/* A futex lock for the rare paths (lock.c).  The word holds the holder's
 * thread id (the thread pointer: 8-byte aligned, so the low bits are free)
 * with bit 0 set while held and bit 1 while others wait; 0 when free. */
typedef struct mia_lock_s {
  uintptr_t word;
  bool fork_skipped;              /* fork_prepare found it held by the forking thread */
} mia_lock_t;

#define MIA_WORD_SIZE        8
#define MIA_SLICE_SHIFT      16
#define MIA_SLICE_SIZE       ((size_t)1 << MIA_SLICE_SHIFT)       /* 64 KiB */
#define MIA_SEGMENT_SHIFT    22
#define MIA_SEGMENT_SIZE     ((size_t)1 << MIA_SEGMENT_SHIFT)     /* 4 MiB */
#define MIA_SEGMENT_SLICES   (MIA_SEGMENT_SIZE / MIA_SLICE_SIZE)  /* 64 */

#define MIA_SMALL_MAX        (8 * 1024)          /* blocks in 1-slice pages */
#define MIA_MEDIUM_MAX       (64 * 1024)         /* blocks in 8-slice pages */
#define MIA_LARGE_MAX        (512 * 1024)        /* above: huge spans */
#define MIA_MEDIUM_PAGE_SLICES 8

#define MIA_DIRECT_WSIZE_MAX 128                 /* direct table: sizes <= 1 KiB */
#define MIA_DIRECT_SIZE_MAX  (MIA_DIRECT_WSIZE_MAX * MIA_WORD_SIZE)
#define MIA_BIN_COUNT        56                  /* bins 1..56; 0 unused */
#define MIA_BIN_HUGE         (MIA_BIN_COUNT + 1)

/* Largest request we accept: leaves room for rounding without overflow. */
#define MIA_MAX_ALLOC_SIZE   (PTRDIFF_MAX / 2)
/* Largest alignment served from pages by offsetting inside a larger block. */
#define MIA_MAX_ALIGN_IN_PAGE (MIA_SLICE_SIZE)

typedef struct mia_block_s { struct mia_block_s *next; } mia_block_t;

typedef struct mia_theap_s mia_theap_t;
typedef struct mia_tld_s mia_tld_t;
typedef struct mia_segment_s mia_segment_t;
typedef struct mia_arena_s mia_arena_t;
typedef struct mia_subproc_s mia_subproc_t;

/* Flags that send every free of a page's blocks to the generic path.  They
 * live in the low bits of page->free_key, next to the owner's thread id
 * (which is pointer-aligned), so the free fast path tests all of them and the
 * ownership in one compare. */
enum {
  MIA_PAGE_IN_FULL     = 0x1,   /* page sits in the theap's full list */
  MIA_PAGE_HAS_ALIGNED = 0x2,   /* some block was handed out at an offset */
  MIA_PAGE_HAS_SAMPLED = 0x4,   /* some block carries profiler sample data */
  MIA_PAGE_HAS_HELD    = 0x8,   /* free blocks held back in purged OS pages (thin.c) */
  MIA_PAGE_FLAG_MASK   = 0xf,
};

typedef struct mia_page_s {
  /* first cache line: what every free reads (the owner's and other
   * threads') and the owner writes only when the page is set up, extended,
   * flagged or thinned.  The owner's per-call writes live on the next line:
   * were they here, each remote free's read of free_key would take the line
   * away from the owner, and the owner's next malloc would wait for it. */
  uintptr_t free_key;            /* owner thread id | flags; 0 when unowned */
  size_t block_size;
  uint8_t *start;                /* first block */
  uint32_t capacity;             /* blocks carved out of the page so far */
  uint32_t reserved;             /* blocks that fit in the page */
  uint16_t slice_count;          /* slices this page spans */
  uint8_t bin;
  uint8_t flags;                 /* copy of the MIA_PAGE_* flags */
  bool free_is_zero;             /* free list holds only never-used memory */
  bool is_zero_init;             /* memory came zeroed from the OS */
  bool is_huge;
  bool is_guarded;               /* a guarded-sampling slot page (guarded.c) */
  /* thinning (thin.c): OS pages of a sparse page purged while it keeps its
   * live blocks; the free blocks touching them are on no list ("held") */
  uint64_t held_mask[2];         /* purged OS pages, one bit each */
  uint32_t held;                 /* free blocks touching them */
  uint32_t thin_used;            /* used when last thinned; 0: never */
  /* second cache line: written by the owner on every malloc and free
   * (free, used, local_free); no other thread touches it */
  mia_block_t *free __attribute__((aligned(64)));  /* blocks the allocation fast path pops */
  uint32_t used;                 /* blocks handed out, not yet freed locally */
  uint32_t sample_rest_len;      /* blocks in sample_rest; UINT32_MAX: not known */
  mia_block_t *local_free;       /* blocks freed by the owner */
  /* profiler sampling (prof.c): while a profiler runs, free holds only the
   * blocks before the next sample; the rest wait here, so the fast path
   * needs no counter and falls into the slow path at the sample */
  mia_block_t *sample_rest;
  int64_t sample_left;           /* bytes before the sample; <0: not armed */
  int32_t guard_left;            /* blocks before a guarded sample; <0: not armed */
  uint32_t thin_stamp;           /* the theap's thinning round that saw it sparse */
  uint32_t thin_ms;              /* when it was thinned (low bits of the ms clock) */
  bool sample_rest_is_zero;      /* free_is_zero of the list sample_rest was cut from */
  uint32_t idle_since;           /* ms clock: last seen in use (theap.c) */
  uint32_t idle_mark;            /* the free lists' heads when last looked at */
  /* third cache line: written by other threads (remote frees) */
  _Atomic(uintptr_t) thread_free __attribute__((aligned(64)));  /* remote frees (LIFO), full-page state */
  _Atomic(uint32_t) sampled_live;  /* profiler-sampled blocks alive in the page */
  struct mia_page_s *remote_next;
  _Atomic(mia_theap_t *) theap;  /* owner; read by remote freers to notify */
  struct mia_page_s *next;       /* theap queue links */
  struct mia_page_s *prev;
  uint64_t fresh_slices;         /* its slices that were clean when it was cut (segment bits) */
#if MIALLOC_SECURE
  /* fourth cache line, secure builds: what their fast paths check besides
   * the first two lines (every pop decodes a link, every free checks the
   * block start), kept together so the checks touch one line more, not two */
  uintptr_t keys[2] __attribute__((aligned(64)));  /* free-list encoding keys */
  /* block_size = odd << shift.  rotr((p - start) * inverse(odd), shift) is
   * the block index when p - start is a multiple of block_size, and above
   * UINT64_MAX / block_size (so above any capacity) when it is not: one
   * multiply, one rotate and one compare check a free (no division) */
  uint64_t div_inv;
  uintptr_t area_size;           /* reserved * block_size: where links may point */
  uint8_t div_shift;
#endif
} __attribute__((aligned(64))) mia_page_t;

typedef struct mia_page_queue_s {
  mia_page_t *first;
  mia_page_t *last;
  size_t block_size;
} mia_page_queue_t;

struct mia_segment_s {
  uintptr_t cookie;              /* address ^ process secret: validates the header */
  mia_subproc_t *subproc;
  mia_arena_t *arena;
  mia_tld_t *tld;                /* owning thread; NULL when abandoned or huge */
  size_t size;                   /* bytes of the whole segment (span) */
  uint64_t used_mask;            /* slices holding pages (bit 0: metadata) */
  uint64_t dirty_mask;           /* slices touched since their last purge */
  uint64_t purge_mask;           /* free dirty slices already waited a delay */
  uint64_t purge_at;             /* ms deadline to purge dirty free slices */
  uint64_t pending_mask;         /* free dirty slices counted in the purge thread's pending bytes */
  uint64_t guard_mask;           /* secure: slices whose last OS page is a guard (bit 0: the metadata guard) */
  uint64_t abandoned_at;         /* ms its last owner left it (on the abandoned list) */
  bool is_huge;
  bool in_full_list;
  mi_heap_t *heap;               /* heap of its pages (NULL: a deleted heap's, now the main heap's) */
  struct mia_segment_s *next;    /* tld list, abandoned list, or heap's huge list */
  struct mia_segment_s *prev;
  mia_page_t pages[MIA_SEGMENT_SLICES];  /* indexed by first slice */
};

struct mia_arena_s {
  uint8_t *base;
  int id;                        /* mi_arena_id_t: 1, 2, ... */
  bool exclusive;                /* only for heaps created in it */
  bool caller_owned;             /* mi_manage_os_memory: never unmapped */
  size_t size;
  size_t segment_count;
  mia_subproc_t *subproc;
  uint64_t purge_at;             /* next purge pass over the dirty free segments */
  bool pinned;                   /* huge OS pages: never purged */
  bool on_demand;                /* committed while claimed or dirty only (mia_arena_commits_on_demand) */
  bool dedicated;                /* made for a block larger than the reserve, which is still at its start */
  struct mia_arena_s *next;
  uint64_t *used_map;            /* one bit per segment, claimed */
  uint64_t *dirty_map;           /* one bit per free segment not yet purged */
  uint64_t *aged_map;            /* dirty free segments seen by the last purge pass */
  uint64_t *guards;              /* secure: per free segment, the guards still set */
};

/* Remote frees a thread batches per page, to push several in one go
 * (free.c).  Release builds only: the checked and the tools builds want
 * each free seen where it happens. */
#if MIALLOC_SECURE || MIALLOC_PADDING || MIALLOC_DEBUG || MIALLOC_VALGRIND || MIALLOC_ASAN
#define MIA_REMOTE_BATCH 0
#else
#define MIA_REMOTE_BATCH 128          /* batches (pages) per thread, direct-mapped */
#endif

typedef struct mia_remote_batch_s {
  mia_page_t *page;
  mia_block_t *first;            /* the latest block; linked to the ones before */
  mia_block_t *last;             /* the earliest */
  uint32_t count;
  uint32_t limit;                /* push when count reaches it */
} mia_remote_batch_t;

/* A statistic with a current value, its highest value, and the sum of all
 * increases (for counts: how many were ever made). */
typedef struct mia_stat_count_s {
  int64_t current;
  int64_t peak;
  int64_t total;
} mia_stat_count_t;

/* A thread's change to a page statistic not yet added to the process-wide
 * one (stats.c): its current value, its increases, and the highest value
 * the change reached meanwhile (since the last reset, if later), for the
 * peak. */
typedef struct mia_stat_delta_s {
  int64_t current;
  int64_t total;
  int64_t high;
} mia_stat_delta_t;

typedef struct mia_stat_local_s {
  mia_stat_delta_t pages, in_use;
  mia_stat_delta_t bins[MIA_BIN_HUGE + 1];
  uint32_t epoch;   /* mi_stats_reset's count when the highs were last restarted */
} mia_stat_local_t;

/* A segment owner: the thread's segments for one heap, and that heap's
 * theap.  Each thread has one for its sub-process's main heap (the "thread
 * tld", which also lists the others) and one per first-class heap it uses,
 * so a heap's memory can be destroyed without touching another heap's. */
struct mia_tld_s {
  mia_theap_t *theap_default;
  mi_heap_t *heap;
  struct mia_tld_s *thread_tld;  /* the thread's main tld (itself there) */
  mia_theap_t *heap_theaps;      /* thread tld only: theaps of other heaps */
  mia_segment_t *segments;       /* segments with free slices */
  mia_segment_t *segments_full;  /* segments without */
  size_t segment_count;
  uint64_t next_purge_check;     /* ms; read by the purge thread without the lock */
  mia_subproc_t *subproc;
  struct mia_tld_s *next_free;   /* metadata pool link */
  /* the segment lists and masks: the owner holds it in segment.c's entry
   * points (segment_lock_depth deep: they call each other), the purge
   * thread takes it with trylock for a thread gone idle */
  mia_lock_t segment_lock;
  uint32_t segment_lock_depth;
  bool purge_poke;               /* pending bytes grew: poke the purge thread once unlocked */
  uint8_t purge_start_later;     /* thread tld only: a start waits for its outermost leave (purge.c) */
  struct mia_tld_s *live_next;   /* every tld in use (init.c), for the purge thread */
  struct mia_tld_s *live_prev;
  uint32_t prof_calls;           /* thread tld only: profiler callbacks this thread is inside */
  unsigned long long heartbeat;  /* thread tld only: fresh pages and collects (mi_register_deferred_free) */
  int64_t purge_pending;         /* pending_set's bytes not yet in purge.c's count (segment.c) */
  mia_stat_local_t stat_local;   /* thread tld only: written by its thread alone (stats.c) */
  bool is_done;
#if MIA_REMOTE_BATCH
  mia_remote_batch_t remote_batch[MIA_REMOTE_BATCH];  /* thread tld only */
  uint64_t remote_waiting[MIA_REMOTE_BATCH / 64];     /* which of them hold blocks */
#endif
};

/* Process-wide statistics, updated atomically and only on slow paths (see
 * stats.c for where each one is counted and what it means exactly). */
typedef struct mia_stats_s {
  mia_stat_count_t arenas;        /* OS reservations */
  mia_stat_count_t reserved;      /* bytes of address space in arenas */
  mia_stat_count_t committed;     /* bytes touched and not purged since */
  mia_stat_count_t in_use;        /* bytes of pages held by theaps, plus huge spans */
  mia_stat_count_t segments;      /* 4 MiB segments claimed from arenas */
  mia_stat_count_t pages;         /* pages held by theaps */
  mia_stat_count_t huge;          /* bytes of live huge spans */
  mia_stat_count_t huge_blocks;   /* live huge allocations */
  mia_stat_count_t threads;       /* threads with a theap */
  mia_stat_count_t bins[MIA_BIN_HUGE + 1];  /* pages per size class */
  int64_t purges;                 /* purge calls (madvise) */
  int64_t purged_bytes;
  int64_t reclaimed_segments;
  int64_t abandoned_segments;
  int64_t released_segments;      /* abandoned ones given back once other threads freed their blocks */
  int64_t foreign_frees;
  int64_t errors;                 /* errors reported (error callback calls) */
} mia_stats_t;

struct mia_theap_s {
  mia_page_t *pages_direct[MIA_DIRECT_WSIZE_MAX + 1];  /* first: reached in one load */
  mia_page_queue_t pages[MIA_BIN_HUGE + 1];
  mia_page_queue_t full;
  uintptr_t tid;
  mia_tld_t *tld;
  _Atomic(mia_page_t *) remote_pages;  /* full pages that got remote frees */
  bool in_deferred;               /* inside the deferred-free callback */
  bool in_sample;                 /* inside a profiler sample: no sampling */
  uint16_t groups_started;        /* power-of-two bins whose shared page was set up (theap.c) */
  uint16_t groups_split;          /* ... and whose sizes now have bins of their own */
  _Atomic(mi_heap_t *) heap;      /* NULL once the heap was deleted */
  mia_theap_t *heap_next;         /* the heap's list of theaps */
  mia_theap_t *heap_prev;
  mia_theap_t *tld_next;          /* the thread's list of first-class theaps */
  int64_t huge_sample_left;       /* profiler: bytes of huge blocks to the sample */
  uint64_t thin_at;               /* ms: the next thinning round (thin.c) */
  uint32_t thin_round;
  uint8_t thin_backoff[MIA_BIN_COUNT + 1];    /* per bin: thinned too soon this often */
  uint64_t thin_resume[MIA_BIN_COUNT + 1];    /* per bin: ms until which it is not thinned */
  int64_t thin_budget;            /* ns thinning's system calls may still take */
  uint64_t thin_budget_at;        /* ns: when the budget was last topped up */
  uint64_t random;                /* profiler: state of the theap's draws */
};

struct mi_heap_s {
  mia_subproc_t *subproc;
  mia_arena_t *arena;             /* exclusive arena, or NULL */
  mia_lock_t lock;                /* guards theaps, abandoned, huge */
  mia_theap_t *theaps;            /* every thread's part */
  mia_segment_t *abandoned;       /* parts of exited threads (first-class heaps) */
  mia_segment_t *huge;            /* live huge spans */
  struct mi_heap_s *next;         /* the sub-process's heaps; pool link */
  struct mi_heap_s *prev;
  int tag;
  bool is_main;
  bool no_profile;
  bool allow_destroy;
};

/* What a profiler attached to a sub-process needs in the slow paths. */
typedef struct mia_prof_s {
  mi_profiler_t profiler;         /* read inside callbacks only (prof.c) */
  size_t rate;                    /* the profiler's sample_rate and seed, for any thread's draws */
  uint64_t seed;
  size_t header_size;             /* bytes before a sampled block: cookie, size, data */
  uint16_t generation;            /* attachments so far (wraps): a sample's own is in its header */
  uint8_t state;                  /* MIA_PROF_DETACHED, _ATTACHED or _CHANGING (prof.c) */
  bool running;
  uint32_t in_callback;           /* threads inside (or entering) one of the profiler's callbacks */
} mia_prof_t;

struct mia_subproc_s {
  mia_lock_t lock;                /* guards arenas, abandoned list */
  mia_arena_t *arenas;
  mia_segment_t *abandoned;
  uint64_t abandoned_purge_at;    /* ms: the earliest abandoned segment's free slices are due (0: none) */
  _Atomic(uint64_t) orphans_due;  /* ms: scan the abandoned list for pages other threads' frees emptied (0: none freed into it since the last scan) */
  size_t arena_count;
  mia_lock_t heaps_lock;          /* guards heaps */
  mi_heap_t *heaps;               /* first-class heaps */
  mi_heap_t heap_main;
  mia_prof_t prof;
  bool is_main;
  struct mia_subproc_s *next;     /* list of created sub-processes */
};

#endif

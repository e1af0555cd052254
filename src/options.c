/* options.c -- MIALLOC_<NAME> options from the environment and mi_option_*.
 *
 * Every option has a name, a default and a kind; values are read from the
 * environment once, at process start (or at the first mi_option_get before
 * that).  A privileged process (setuid/setgid, AT_SECURE) ignores the
 * environment entirely: an attacker who controls it must not be able to
 * change how a privileged program allocates.
 */
#include "internal.h"

#include <limits.h>
#include <stdio.h>

typedef enum { MIA_OPT_UNINIT, MIA_OPT_DEFAULT, MIA_OPT_ENV, MIA_OPT_SET } mia_opt_state_t;
typedef enum { MIA_OPT_BOOL, MIA_OPT_LONG, MIA_OPT_SIZE } mia_opt_kind_t;

typedef struct mia_option_desc_s {
  long value;
  mia_opt_state_t state;
  mia_opt_kind_t kind;
  const char *name;       /* environment name without the MIALLOC_ prefix */
  long default_value;
  const char *doc;
} mia_option_desc_t;

/* guarded sampling is on by default in secure builds */
#if MIALLOC_SECURE && MIALLOC_GUARDED
#define MIA_GUARDED_DEFAULT_RATE 4096
#else
#define MIA_GUARDED_DEFAULT_RATE 0
#endif

#define KIB 1024L
#define MIB (1024L * 1024L)
#define GIB (1024L * 1024L * 1024L)

static mia_option_desc_t mia_options[_mi_option_last] = {
  [mi_option_show_errors] = {0, 0, MIA_OPT_BOOL, "SHOW_ERRORS", 1, "print error and warning messages (failed allocations only with VERBOSE)"},
  [mi_option_show_stats] = {0, 0, MIA_OPT_BOOL, "SHOW_STATS", 0, "print statistics at exit"},
  [mi_option_verbose] = {0, 0, MIA_OPT_BOOL, "VERBOSE", 0, "explain decisions on stderr"},
  [mi_option_eager_commit] = {0, 0, MIA_OPT_BOOL, "EAGER_COMMIT", 1, "accepted for compatibility; no effect (memory is committed when first touched)"},
  [mi_option_arena_eager_commit] = {0, 0, MIA_OPT_LONG, "ARENA_EAGER_COMMIT", 0, "commit arena memory as segments are claimed (0), at once (1), or at once only where the kernel overcommits (2)"},
  [mi_option_purge_decommits] = {0, 0, MIA_OPT_BOOL, "PURGE_DECOMMITS", 1, "purge with MADV_DONTNEED (1, RSS drops at once) or MADV_FREE (0)"},
  [mi_option_allow_large_os_pages] = {0, 0, MIA_OPT_BOOL, "ALLOW_LARGE_OS_PAGES", 0, "ask for transparent huge pages on arenas"},
  [mi_option_reserve_huge_os_pages] = {0, 0, MIA_OPT_LONG, "RESERVE_HUGE_OS_PAGES", 0, "reserve N GiB of huge OS pages (hugetlbfs) at start; never purged"},
  [mi_option_reserve_huge_os_pages_at] = {0, 0, MIA_OPT_LONG, "RESERVE_HUGE_OS_PAGES_AT", -1, "accepted for compatibility; no effect (NUMA node of the huge pages)"},
  [mi_option_reserve_os_memory] = {0, 0, MIA_OPT_SIZE, "RESERVE_OS_MEMORY", 0, "reserve this much address space at start (size)"},
  [mi_option_deprecated_segment_cache] = {0, 0, MIA_OPT_LONG, "DEPRECATED_SEGMENT_CACHE", 0, "accepted for compatibility; no effect"},
  [mi_option_deprecated_page_reset] = {0, 0, MIA_OPT_LONG, "DEPRECATED_PAGE_RESET", 0, "accepted for compatibility; no effect"},
  [mi_option_abandoned_page_purge] = {0, 0, MIA_OPT_BOOL, "ABANDONED_PAGE_PURGE", 0, "accepted for compatibility; no effect"},
  [mi_option_deprecated_segment_reset] = {0, 0, MIA_OPT_LONG, "DEPRECATED_SEGMENT_RESET", 0, "accepted for compatibility; no effect"},
  [mi_option_eager_commit_delay] = {0, 0, MIA_OPT_LONG, "EAGER_COMMIT_DELAY", 1, "accepted for compatibility; no effect"},
  [mi_option_purge_delay] = {0, 0, MIA_OPT_LONG, "PURGE_DELAY", 25, "milliseconds before freed memory is returned to the OS (-1: never)"},
  [mi_option_use_numa_nodes] = {0, 0, MIA_OPT_LONG, "USE_NUMA_NODES", 0, "accepted for compatibility; no effect"},
  [mi_option_disallow_os_alloc] = {0, 0, MIA_OPT_BOOL, "DISALLOW_OS_ALLOC", 0, "reserve no OS memory after start: only arenas reserved at start are used"},
  [mi_option_os_tag] = {0, 0, MIA_OPT_LONG, "OS_TAG", 100, "accepted for compatibility; no effect"},
  [mi_option_max_errors] = {0, 0, MIA_OPT_LONG, "MAX_ERRORS", 16, "print at most this many error messages"},
  [mi_option_max_warnings] = {0, 0, MIA_OPT_LONG, "MAX_WARNINGS", 16, "print at most this many warnings"},
  [mi_option_max_segment_reclaim] = {0, 0, MIA_OPT_LONG, "MAX_SEGMENT_RECLAIM", 10, "abandoned segments a thread tries before it claims a new one"},
  [mi_option_destroy_on_exit] = {0, 0, MIA_OPT_BOOL, "DESTROY_ON_EXIT", 0, "accepted for compatibility; no effect"},
  [mi_option_arena_reserve] = {0, 0, MIA_OPT_SIZE, "ARENA_RESERVE", GIB, "address space reserved per arena (size)"},
  [mi_option_arena_purge_mult] = {0, 0, MIA_OPT_LONG, "ARENA_PURGE_MULT", 10, "free whole segments wait PURGE_DELAY times this before their arena purges them"},
  [mi_option_purge_extend_delay] = {0, 0, MIA_OPT_LONG, "PURGE_EXTEND_DELAY", 1, "accepted for compatibility; no effect"},
  [mi_option_abandoned_reclaim_on_free] = {0, 0, MIA_OPT_BOOL, "ABANDONED_RECLAIM_ON_FREE", 0, "accepted for compatibility; no effect"},
  [mi_option_disallow_arena_alloc] = {0, 0, MIA_OPT_BOOL, "DISALLOW_ARENA_ALLOC", 0, "accepted for compatibility; no effect"},
  [mi_option_retry_on_oom] = {0, 0, MIA_OPT_LONG, "RETRY_ON_OOM", 400, "accepted for compatibility; no effect"},
  [mi_option_abort_on_error] = {0, 0, MIA_OPT_BOOL, "ABORT_ON_ERROR", 0, "abort the process after reporting any error (see mialloc(3) for the codes)"},
  [mi_option_purge_thread] = {0, 0, MIA_OPT_BOOL, "PURGE_THREAD", 1, "purge from a background thread so idle programs return memory"},
  [mi_option_guarded_sample_rate] = {0, 0, MIA_OPT_LONG, "GUARDED_SAMPLE_RATE", MIA_GUARDED_DEFAULT_RATE, "place about 1 in N allocations against a guard page (0: off; builds with --enable-guarded; by default in secure builds 4096, sparser where closing a page is slow)"},
  [mi_option_guarded_min] = {0, 0, MIA_OPT_SIZE, "GUARDED_MIN", 0, "smallest allocation guarded sampling considers (size)"},
  [mi_option_guarded_max] = {0, 0, MIA_OPT_SIZE, "GUARDED_MAX", 4080, "largest allocation guarded sampling considers (size, at most 4080)"},
  [mi_option_guarded_sample_seed] = {0, 0, MIA_OPT_LONG, "GUARDED_SAMPLE_SEED", 0, "seed of guarded sampling (0: random)"},
  [mi_option_show_leaks] = {0, 0, MIA_OPT_BOOL, "SHOW_LEAKS", 0, "at exit, list the blocks of the main thread still allocated"},
  [mi_option_page_thin] = {0, 0, MIA_OPT_BOOL, "PAGE_THIN", 0, "give back the free OS pages of sparse pages, keeping their live blocks (release builds; off by default)"},
  [mi_option_visit_abandoned] = {0, 0, MIA_OPT_BOOL, "VISIT_ABANDONED", 1, "accepted for compatibility; no effect (abandoned blocks can always be visited)"},
  [mi_option_guarded_precise] = {0, 0, MIA_OPT_BOOL, "GUARDED_PRECISE", 1, "accepted for compatibility; no effect (guarded blocks always end at their guard page)"},
  [mi_option_target_segments_per_thread] = {0, 0, MIA_OPT_LONG, "TARGET_SEGMENTS_PER_THREAD", 0, "accepted for compatibility; no effect"},
  [mi_option_generic_collect] = {0, 0, MIA_OPT_LONG, "GENERIC_COLLECT", 10000, "accepted for compatibility; no effect"},
  [mi_option_allow_thp] = {0, 0, MIA_OPT_BOOL, "ALLOW_THP", 1, "accepted for compatibility; no effect (see ALLOW_LARGE_OS_PAGES)"},
  [mi_option_dlopen_deepbind] = {0, 0, MIA_OPT_BOOL, "DLOPEN_DEEPBIND", 0, "let dlopen keep RTLD_DEEPBIND (its plugins then call glibc's malloc: a block crossing to the program crashes it)"},
};

static bool mia_streq_nocase(const char *a, const char *b) {
  for (;; a++, b++) {
    char x = *a, y = *b;
    if (x >= 'A' && x <= 'Z') x = (char)(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = (char)(y - 'A' + 'a');
    if (x != y) return false;
    if (x == 0) return true;
  }
}

/* Parse a value: booleans as words, numbers with an optional size suffix
 * (K, KB, KiB, M, MiB, G, GiB; case-insensitive).  Size options are in
 * bytes; a plain number for a size option means bytes too. */
static bool mia_parse_value(const mia_option_desc_t *desc, const char *s, long *out) {
  static const char *const yes[] = {"1", "on", "yes", "true", "enable", "enabled"};
  static const char *const no[] = {"0", "off", "no", "false", "disable", "disabled"};
  for (size_t i = 0; i < sizeof yes / sizeof yes[0]; i++) {
    if (mia_streq_nocase(s, yes[i])) { *out = 1; return true; }
    if (mia_streq_nocase(s, no[i])) { *out = 0; return true; }
  }
  if (desc->kind == MIA_OPT_BOOL) return false;
  const char *p = s;
  bool neg = false;
  if (*p == '-') { neg = true; p++; }
  if (*p < '0' || *p > '9') return false;
  long v = 0;
  while (*p >= '0' && *p <= '9') {
    if (v > (LONG_MAX - 9) / 10) return false;
    v = v * 10 + (*p++ - '0');
  }
  long mult = 1;
  if (*p != 0) {
    if (desc->kind != MIA_OPT_SIZE) return false;
    char unit = *p++;
    if (unit >= 'a' && unit <= 'z') unit = (char)(unit - 'a' + 'A');
    if (unit == 'K') mult = KIB;
    else if (unit == 'M') mult = MIB;
    else if (unit == 'G') mult = GIB;
    else return false;
    if (*p == 'i' || *p == 'I') p++;
    if (*p == 'b' || *p == 'B') p++;
    if (*p != 0) return false;
  }
  if (v > LONG_MAX / mult) return false;
  *out = (neg ? -v : v) * mult;
  return true;
}

/* Whether the environment can hold no option for us, asked once: the
 * privilege test is four system calls that every option used to repeat
 * (144 at the start of every process), and most environments have no
 * MIALLOC_ variable, so one pass over it spares a search per option.  All
 * options are read together at process start, so a program that changes
 * its ids or environment later could not have been affected anyway. */
static bool mia_env_ignored(void) {
  static int ignored = -1;
  if (ignored < 0) ignored = mia_prim_is_privileged() || !mia_prim_env_has_prefix("MIALLOC_");
  return ignored;
}

static void mia_option_init_one(mi_option_t opt) {
  mia_option_desc_t *desc = &mia_options[opt];
  if (desc->state != MIA_OPT_UNINIT) return;
  desc->value = desc->default_value;
  desc->state = MIA_OPT_DEFAULT;
  if (mia_env_ignored()) return;
  /* not snprintf: every process reads the options at start-up, and
   * printf's code would be paged in for programs that never print */
  static const char prefix[] = "MIALLOC_";
  char name[64];
  char value[64];
  size_t len = strlen(desc->name);
  if (len >= sizeof name - sizeof prefix) return;
  memcpy(name, prefix, sizeof prefix - 1);
  memcpy(name + sizeof prefix - 1, desc->name, len + 1);
  if (!mia_prim_getenv(name, value, sizeof value) || value[0] == 0) return;
  long v;
  if (mia_parse_value(desc, value, &v)) {
    desc->value = v;
    desc->state = MIA_OPT_ENV;
  } else {
    /* verbose/show_errors themselves may not be parsed yet: they default
     * to showing warnings, which is what we want for a bad value */
    mia_warning("environment option %s has an invalid value \"%s\"; using the default (%ld)\n",
                name, value, desc->default_value);
  }
}

void mia_options_init(void) {
  /* show_errors and verbose first: the others may need to warn */
  mia_option_init_one(mi_option_show_errors);
  mia_option_init_one(mi_option_verbose);
  mia_option_init_one(mi_option_max_warnings);
  mia_option_init_one(mi_option_max_errors);
  for (int i = 0; i < _mi_option_last; i++) mia_option_init_one((mi_option_t)i);
}

long mia_option_get_fast(mi_option_t option) {
  mia_option_desc_t *desc = &mia_options[option];
  /* init_one marks the option read before it can warn, so the message
   * functions asking for verbose/show_errors here cannot recurse */
  if (mia_unlikely(desc->state == MIA_OPT_UNINIT)) mia_option_init_one(option);
  return desc->value;
}

/* Neither the environment nor mi_option_set gave the option a value. */
bool mia_option_is_default(mi_option_t option) {
  (void)mia_option_get_fast(option);
  return mia_options[option].state == MIA_OPT_DEFAULT;
}

static bool mia_option_valid(mi_option_t option) {
  return (int)option >= 0 && option < _mi_option_last;
}

mia_export long mi_option_get(mi_option_t option) {
  return mia_option_valid(option) ? mia_option_get_fast(option) : 0;
}

mia_export long mi_option_get_clamp(mi_option_t option, long min, long max) {
  long v = mi_option_get(option);
  return v < min ? min : (v > max ? max : v);
}

mia_export size_t mi_option_get_size(mi_option_t option) {
  long v = mi_option_get(option);
  return v < 0 ? 0 : (size_t)v;
}

/* Options cached at start-up take a new value at once. */
static void mia_option_changed(mi_option_t option) {
  if (option == mi_option_guarded_sample_rate || option == mi_option_guarded_min || option == mi_option_guarded_max)
    mia_guarded_options_changed();
}

mia_export void mi_option_set(mi_option_t option, long value) {
  if (!mia_option_valid(option)) return;
  mia_options[option].value = value;
  mia_options[option].state = MIA_OPT_SET;
  mia_option_changed(option);
}

mia_export void mi_option_set_default(mi_option_t option, long value) {
  if (!mia_option_valid(option)) return;
  mia_options[option].default_value = value;
  if (mia_options[option].state != MIA_OPT_SET && mia_options[option].state != MIA_OPT_ENV) {
    mia_options[option].value = value;
    mia_option_changed(option);
  }
}

mia_export bool mi_option_is_enabled(mi_option_t option) { return mi_option_get(option) != 0; }
mia_export void mi_option_set_enabled(mi_option_t option, bool enable) { mi_option_set(option, enable); }
mia_export void mi_option_set_enabled_default(mi_option_t option, bool enable) {
  mi_option_set_default(option, enable);
}
mia_export void mi_option_enable(mi_option_t option) { mi_option_set(option, 1); }
mia_export void mi_option_disable(mi_option_t option) { mi_option_set(option, 0); }

/* One line per option: name, value, default, where the value came from,
 * and what it does (to the registered output function, or stderr). */
mia_export void mi_options_print(void) {
  static const char *const origin[] = {"default", "default", "environment", "mi_option_set"};
  for (int i = 0; i < _mi_option_last; i++) {
    const mia_option_desc_t *desc = &mia_options[i];
    long v = mi_option_get((mi_option_t)i);
    mia_output_to(NULL, NULL, "mialloc: option MIALLOC_%-26s = %-12ld (default %ld, from %s) %s\n",
                  desc->name, v, desc->default_value, origin[desc->state], desc->doc);
  }
}

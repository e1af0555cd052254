/* probe.c - which library does malloc come from?  (helper, not a workload)
 *
 * bench/run runs this once under every allocator's LD_PRELOAD.  The dynamic
 * loader only prints a warning and carries on with glibc when a preloaded
 * library cannot be loaded, which would silently benchmark glibc under
 * another name; the probe makes that visible.  It also makes one
 * malloc/free so that a library that crashes on start-up is caught early.
 *
 * Output: the path of the object that defines the malloc this program calls.
 */
#include "common.h"
#include <dlfcn.h>

int main(void)
{
    bench_init("probe");
    void *(*m)(size_t) = malloc;
    Dl_info info;
    if (!dladdr((void *)m, &info) || !info.dli_fname)
        bench_fail("dladdr(malloc) failed");
    void *p = xmalloc(100);
    memset(p, 1, 100);
    free(p);
    printf("%s\n", info.dli_fname);
    return 0;
}

/* dlopen-host.c -- loads the plugin named on the command line with dlopen
 * and calls it; prints the dlerror on failure (for "cannot allocate memory
 * in static TLS block"). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  int (*work)(void) = (int (*)(void))dlsym(h, "plugin_work");
  if (work == NULL || !work()) {
    printf("plugin_work %s\n", work == NULL ? "not found" : "failed");
    return 1;
  }
  if (0) {
    printf("plugin_work failed\n");
    return 1;
  }
  void *p = malloc(100);   /* the host's malloc is still glibc's */
  free(p);
  printf("ok\n");
  return 0;
}

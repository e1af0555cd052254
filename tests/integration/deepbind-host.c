/* deepbind-host.c -- opens libdeepbind-plugin.so by its bare name with
 * RTLD_DEEPBIND, as php opens its extensions, and passes blocks both ways.
 * The name is found only through this program's RUNPATH, so the open also
 * shows that dlopen still knows who called it.  Prints one line: "ok"
 * with where the plugin's malloc came from ("mialloc" or "other"), or what
 * failed. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef bool (*in_heap_fn)(const void *);

int main(int argc, char **argv) {
  bool cross = argc > 1 && strcmp(argv[1], "cross") == 0;   /* else keep each side's blocks apart */
  void *h = dlopen("libdeepbind-plugin.so", RTLD_NOW | RTLD_DEEPBIND);
  if (h == NULL) {
    printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  char *(*copy)(const char *) = (char *(*)(const char *))dlsym(h, "plugin_copy");
  char *(*grow)(char *, size_t) = (char *(*)(char *, size_t))dlsym(h, "plugin_grow");
  void (*plugin_free)(void *) = (void (*)(void *))dlsym(h, "plugin_free");
  in_heap_fn in_heap = (in_heap_fn)dlsym(RTLD_DEFAULT, "mi_is_in_heap_region");
  if (copy == NULL || grow == NULL || plugin_free == NULL) {
    printf("plugin functions not found\n");
    return 1;
  }
  char *theirs = copy("from the plugin");
  bool mialloc = in_heap != NULL && theirs != NULL && in_heap(theirs);
  if (cross) {
    /* the plugin's block grown and freed here, the host's freed there */
    char *grown = realloc(theirs, 4000);
    char *mine = malloc(64);
    if (grown == NULL || strcmp(grown, "from the plugin") != 0 || mine == NULL) {
      printf("blocks lost on the way\n");
      return 1;
    }
    strcpy(mine, "from the host");
    mine = grow(mine, 100000);
    if (mine == NULL || strcmp(mine, "from the host") != 0) {
      printf("the plugin's realloc lost the host's block\n");
      return 1;
    }
    plugin_free(mine);
    free(grown);
  } else {
    plugin_free(theirs);
  }
  dlclose(h);
  printf("ok %s\n", mialloc ? "mialloc" : "other");
  return 0;
}

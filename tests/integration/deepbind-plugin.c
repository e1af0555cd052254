/* deepbind-plugin.c -- a plugin that a host opens with RTLD_DEEPBIND, as
 * php opens its extensions: it frees what the host allocated and hands
 * the host blocks to free.  Not linked with libmialloc: its malloc is
 * whichever the dynamic linker binds. */
#include <stdlib.h>
#include <string.h>

#define PLUGIN_API __attribute__((visibility("default")))

PLUGIN_API char *plugin_copy(const char *s) {
  char *p = malloc(strlen(s) + 1);
  if (p != NULL) strcpy(p, s);
  return p;
}

PLUGIN_API char *plugin_grow(char *p, size_t size) { return realloc(p, size); }

PLUGIN_API void plugin_free(void *p) { free(p); }

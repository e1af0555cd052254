/* json.h -- a small JSON reader for the statistics tests.
 *
 * json_number(text, "pages.current") walks the whole text, checking its
 * syntax on the way, and returns the number at that path (object keys
 * joined with dots, array elements by their index: "bins.0.block_size").
 * Only what mi_stats_get_json produces needs to be understood, but the
 * syntax check is strict: any error makes every lookup fail.
 */
#ifndef MIALLOC_TEST_JSON_H
#define MIALLOC_TEST_JSON_H

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct json_walk_s {
  const char *p;
  const char *want;    /* path looked for */
  char path[256];      /* path of the value being read */
  bool found, ok;
  double value;
} json_walk_t;

static void json_ws(json_walk_t *w) {
  while (*w->p == ' ' || *w->p == '\n' || *w->p == '\t' || *w->p == '\r') w->p++;
}

/* A string without escapes other than \" and \\ (enough for our keys). */
static bool json_string(json_walk_t *w, char *out, size_t outn) {
  if (*w->p != '"') return false;
  w->p++;
  size_t n = 0;
  while (*w->p != '"') {
    if (*w->p == 0 || (unsigned char)*w->p < 0x20) return false;
    if (*w->p == '\\') {
      w->p++;
      if (*w->p != '"' && *w->p != '\\') return false;
    }
    if (out != NULL && n + 1 < outn) out[n++] = *w->p;
    w->p++;
  }
  w->p++;
  if (out != NULL) out[n] = 0;
  return true;
}

static bool json_number_at(json_walk_t *w) {
  const char *start = w->p;
  if (*w->p == '-') w->p++;
  if (*w->p < '0' || *w->p > '9') return false;
  if (*w->p == '0' && w->p[1] >= '0' && w->p[1] <= '9') return false;   /* no leading zeros */
  while (*w->p >= '0' && *w->p <= '9') w->p++;
  if (*w->p == '.') {
    w->p++;
    if (*w->p < '0' || *w->p > '9') return false;
    while (*w->p >= '0' && *w->p <= '9') w->p++;
  }
  if (strcmp(w->path, w->want) == 0) {
    w->found = true;
    w->value = strtod(start, NULL);
  }
  return true;
}

static bool json_value(json_walk_t *w);

static bool json_member(json_walk_t *w, const char *name) {
  size_t len = strlen(w->path);
  if (len + strlen(name) + 2 >= sizeof w->path) return false;
  if (len > 0) strcat(w->path, ".");
  strcat(w->path, name);
  bool ok = json_value(w);
  w->path[len] = 0;
  return ok;
}

static bool json_value(json_walk_t *w) {
  json_ws(w);
  if (*w->p == '{') {
    w->p++;
    json_ws(w);
    if (*w->p == '}') { w->p++; return true; }
    for (;;) {
      char key[64];
      json_ws(w);
      if (!json_string(w, key, sizeof key)) return false;
      json_ws(w);
      if (*w->p++ != ':') return false;
      if (!json_member(w, key)) return false;
      json_ws(w);
      if (*w->p == ',') { w->p++; continue; }
      if (*w->p == '}') { w->p++; return true; }
      return false;
    }
  }
  if (*w->p == '[') {
    w->p++;
    json_ws(w);
    if (*w->p == ']') { w->p++; return true; }
    for (int i = 0;; i++) {
      char idx[16];
      snprintf(idx, sizeof idx, "%d", i);
      if (!json_member(w, idx)) return false;
      json_ws(w);
      if (*w->p == ',') { w->p++; continue; }
      if (*w->p == ']') { w->p++; return true; }
      return false;
    }
  }
  if (*w->p == '"') return json_string(w, NULL, 0);
  if (strncmp(w->p, "true", 4) == 0 || strncmp(w->p, "null", 4) == 0) { w->p += 4; return true; }
  if (strncmp(w->p, "false", 5) == 0) { w->p += 5; return true; }
  return json_number_at(w);
}

/* The whole text is valid JSON (one value, nothing after it). */
static inline bool json_valid(const char *text) {
  json_walk_t w = {text, "", "", false, false, 0};
  if (!json_value(&w)) return false;
  json_ws(&w);
  return *w.p == 0;
}

/* The number at path, or fallback when the text is invalid or has none. */
static inline double json_number(const char *text, const char *path, double fallback) {
  json_walk_t w = {text, path, "", false, false, 0};
  if (!json_value(&w)) return fallback;
  json_ws(&w);
  if (*w.p != 0 || !w.found) return fallback;
  return w.value;
}

#endif

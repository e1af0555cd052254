/* pprof-text.c -- the legacy (gperftools) text heap profile, heap_v2.
 *
 * The format stores *sampled* values and the mean sampling interval R; the
 * reader scales each line by s = 1/(1 - exp(-(bytes/objs)/R)).  The profiler
 * keeps unbiased estimates (C objects, B bytes) per location instead, so each
 * line is written as c = C/s, b = B/s with s taken at the line's own mean
 * object size B/C: the reader's scaling then gives back C and B (up to the
 * rounding of c to a whole number), also for locations that allocate
 * objects of mixed sizes.
 *
 * Addresses are written as captured (return addresses): the readers adjust
 * them for this format themselves.
 */
#include "internal.h"

#include <math.h>

static void sampled_pair(double C, double B, size_t rate, uint64_t *c, uint64_t *b) {
  if (C <= 0 || B <= 0) {
    *c = *b = 0;
    return;
  }
  double s = 1.0;
  if (rate > 1) {
    double q = -expm1(-(B / C) / (double)rate); /* 1 - exp(-avg/R) */
    if (q > 0) s = 1.0 / q;
  }
  double cc = nearbyint(C / s);
  if (cc < 1) cc = 1;
  *c = (uint64_t)cc;
  *b = (uint64_t)nearbyint(cc * (B / C)); /* keep the mean size exact */
}

static void put_pair(prof_buf_t *b, uint64_t objs, uint64_t bytes) {
  prof_buf_put_u64(b, objs);
  prof_buf_puts(b, ": ");
  prof_buf_put_u64(b, bytes);
}

bool prof_encode_text(prof_buf_t *out, const prof_snapshot_t *s) {
  prof_buf_t lines;
  prof_buf_init(&lines, out->heap);
  uint64_t tot[4] = {0, 0, 0, 0};
  const double unit = (double)(1u << PROF_COUNT_SHIFT);
  for (size_t i = 0; i < s->nsamples; i++) {
    const prof_sample_t *sm = &s->samples[i];
    uint64_t v[4];
    sampled_pair((double)sm->inuse_count / unit, (double)sm->inuse_bytes, s->rate, &v[0], &v[1]);
    sampled_pair((double)sm->alloc_count / unit, (double)sm->alloc_bytes, s->rate, &v[2], &v[3]);
    if ((v[0] | v[1] | v[2] | v[3]) == 0 || sm->depth == 0) continue;
    for (int k = 0; k < 4; k++) tot[k] += v[k];
    put_pair(&lines, v[0], v[1]);
    prof_buf_puts(&lines, " [");
    put_pair(&lines, v[2], v[3]);
    prof_buf_puts(&lines, "] @");
    for (unsigned k = 0; k < sm->depth; k++) {
      prof_buf_putc(&lines, ' ');
      prof_buf_put_hex(&lines, sm->frames[k]);
    }
    prof_buf_putc(&lines, '\n');
  }
  prof_buf_puts(out, "heap profile: ");
  put_pair(out, tot[0], tot[1]);
  prof_buf_puts(out, " [");
  put_pair(out, tot[2], tot[3]);
  prof_buf_puts(out, "] @ heap_v2/");
  prof_buf_put_u64(out, s->rate);
  prof_buf_putc(out, '\n');
  if (lines.len > 0) prof_buf_put(out, lines.data, lines.len);
  prof_buf_puts(out, "\nMAPPED_LIBRARIES:\n");
  if (s->maps != NULL && s->maps->text.len > 0) prof_buf_put(out, s->maps->text.data, s->maps->text.len);
  bool ok = !lines.failed && !out->failed;
  prof_buf_free(&lines);
  return ok;
}

/* test-idle-page.c -- an emptied page that is its bin's current page stays
 * there while the program may want the size again, and goes back to its
 * segment when the thread next needs a new page after it was empty and
 * untouched for a tenth of the purge delay.  A page used again meanwhile stays,
 * a page that carved few of its blocks stays, and with purging off
 * (MIALLOC_PURGE_DELAY=-1) none goes back.
 *
 * A new page is needed here by allocating a size whose bin has no page yet.
 */
#include "internal.h"
#include "tls.h"
#include "../tap.h"

#include <time.h>

#define DELAY_MS 2000              /* the purge delay */
#define IDLE_MS (DELAY_MS / 10)    /* long enough that valgrind's slowness stays inside it */

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0) {}
}

/* the bin a malloc of `size` uses (checked builds add a padding record) */
static mia_page_queue_t *queue_of(size_t size) {
  return &mia_theap_get()->pages[mia_bin_of(mia_padded() ? mia_padded_request(size) : size)];
}

/* Fill the current page of `size` up to `fraction` percent of its blocks,
 * free them all, and return the page (its bin's current page, empty). */
static mia_page_t *emptied_page(size_t size, unsigned fraction) {
  void *first = mi_malloc(size);
  mia_page_t *page = mia_page_of(first);
  size_t n = page->reserved * fraction / 100;
  void **blocks = mi_malloc(n * sizeof *blocks);
  blocks[0] = first;
  for (size_t i = 1; i < n; i++) blocks[i] = mi_malloc(size);
  for (size_t i = 0; i < n; i++) mi_free(blocks[i]);
  mi_free(blocks);
  return page;
}

/* one block of a size class nobody used yet: the thread sets up a page */
static void need_new_page(const char *why) {
  size_t size = 1100;
  while (size < 60000 && queue_of(size)->first != NULL) size += 300;
  bool fresh = queue_of(size)->first == NULL;
  void *p = mi_malloc(size);
  TAP_OK(fresh && p != NULL, "%s: a %zu-byte block needs a new page", why, size);
  mi_free(p);
}

static bool still_current(mia_page_t *page, size_t size) {
  return page->block_size != 0 && queue_of(size)->first == page && page->used == 0;
}

int main(void) {
  mi_option_set(mi_option_guarded_sample_rate, 0);   /* secure builds sample by default */
  mi_option_set(mi_option_purge_delay, DELAY_MS);
  mia_theap_split_groups(mia_theap_get());   /* each size its own bin and page */

  mia_page_t *a = emptied_page(64, 75);
  mia_page_t *b = emptied_page(128, 75);
  mia_page_t *c = emptied_page(256, 2);
  TAP_OK(still_current(a, 64) && still_current(b, 128), "emptied pages stay their bins' current pages");
  need_new_page("at once");
  TAP_OK(still_current(a, 64) && still_current(b, 128), "a page empty for less than a tenth of the delay stays");

  sleep_ms(IDLE_MS / 2);
  void *p = mi_malloc(128);   /* b is used again (and emptied again) */
  mi_free(p);
  sleep_ms(IDLE_MS / 2 + 50);
  need_new_page("after a tenth of the delay");
  TAP_OK(a->block_size == 0 || queue_of(64)->first != a,
         "the page empty and untouched for a tenth of the delay went back to its segment");
  TAP_OK(still_current(b, 128), "the page used meanwhile stays");
  TAP_OK(still_current(c, 256), "the page that carved %u of its %u blocks stays", c->capacity, c->reserved);
  void *q = mi_malloc(64);
  memset(q, 0x5a, 64);
  TAP_OK(q != NULL && mia_page_of(q) != NULL && mia_page_of(q)->block_size >= 64,
         "the size is served again afterwards");
  mi_free(q);

  /* purging off: no page goes back */
  mi_option_set(mi_option_purge_delay, -1);
  mia_page_t *d = emptied_page(512, 75);
  need_new_page("purging off");
  sleep_ms(50);
  need_new_page("purging off, later");
  TAP_OK(still_current(d, 512), "with MIALLOC_PURGE_DELAY=-1 the emptied page stays");
  return tap_done();
}

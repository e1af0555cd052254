/* test-guard-rate.c -- the default guarded rate of secure builds follows
 * what closing a guarded page costs: one in 4096 while a close takes up to
 * 2 us, sparser by the same power of two where closes take longer (at most
 * 64 times), and back as they get cheaper; one outlier moves it a step at
 * most.  A rate the user chose (the
 * environment, mi_option_set, mi_heap_guarded_set_sample_rate) never
 * moves.  The closes are fed in directly: timed ones would depend on the
 * machine. */
#include "internal.h"
#include "../tap.h"

#include <stdio.h>

static void closes(int n, uint64_t ns) {
  for (int i = 0; i < n; i++) mia_guarded_note_close(ns);
}

static void test_user_rate_kept(const char *how) {
  long before = mia_guarded_rate_in_use();
  closes(50, 100000);
  TAP_OK(mia_guarded_rate_in_use() == before, "a rate set by %s stays 1 in %ld after dear closes (now %ld)", how,
         before, mia_guarded_rate_in_use());
}

int main(void) {
#if !MIALLOC_GUARDED
  printf("1..0 # SKIP guarded sampling is not built in\n");
  return 0;
#else
  long start = mia_guarded_rate_in_use();
  if (!mia_option_is_default(mi_option_guarded_sample_rate)) {
    printf("1..0 # SKIP MIALLOC_GUARDED_SAMPLE_RATE is set in the environment\n");
    return 0;
  }
#if MIALLOC_SECURE
  TAP_OK(start == 4096, "secure build: guarded sampling starts at 1 in 4096 (%ld)", start);
  closes(50, 1500);
  TAP_OK(mia_guarded_rate_in_use() == 4096, "closes of 1.5 us keep it (%ld)", mia_guarded_rate_in_use());
  closes(60, 10000);
  TAP_OK(mia_guarded_rate_in_use() == 4096 * 8, "closes of 10 us make it 8 times sparser: 1 in %d (%ld)", 4096 * 8,
         mia_guarded_rate_in_use());
  closes(60, 1000000);
  TAP_OK(mia_guarded_rate_in_use() == 4096 * 64, "closes of 1 ms make it at most 64 times sparser (%ld)",
         mia_guarded_rate_in_use());
  closes(1, 1000);
  TAP_OK(mia_guarded_rate_in_use() == 4096 * 64, "one cheap close does not move it at once (%ld)",
         mia_guarded_rate_in_use());
  closes(80, 1000);
  TAP_OK(mia_guarded_rate_in_use() == 4096, "closes of 1 us bring it back to 1 in 4096 (%ld)",
         mia_guarded_rate_in_use());
  closes(40, 1500);
  closes(1, 50000000);
  TAP_OK(mia_guarded_rate_in_use() <= 4096 * 2, "one close of 50 ms (a preempted thread) makes it at most twice "
         "as sparse (1 in %ld)", mia_guarded_rate_in_use());
  closes(80, 1000);
  mi_option_set(mi_option_guarded_sample_rate, 4096);
  test_user_rate_kept("mi_option_set");
#else
  TAP_OK(start == 0, "release build: guarded sampling is off by default (rate %ld)", start);
#endif
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 4096, 7);
  test_user_rate_kept("mi_heap_guarded_set_sample_rate");
  mi_heap_guarded_set_sample_rate(mi_heap_main(), 0, 0);
  return tap_done();
#endif
}

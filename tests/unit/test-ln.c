/* test-ln.c -- mia_ln, the logarithm behind the sampling intervals,
 * agrees with libm's log over (0, 1]: at the ends, at powers of two and at
 * the reduction's boundary (sqrt(1/2)), and at 200,000 points spread over
 * every binade the draws can reach. */
#include "internal.h"
#include "../tap.h"

#include <math.h>

static double worst;

static bool close_to_log(double u) {
  double want = log(u), got = mia_ln(u);
  double err = want == 0.0 ? fabs(got) : fabs(got - want) / fabs(want);
  if (err > worst) worst = err;
  return err <= 1e-14;
}

int main(void) {
  TAP_OK(mia_ln(1.0) == 0.0, "ln 1 is exactly 0");
  TAP_OK(close_to_log(0.5) && close_to_log(0.25) && close_to_log(ldexp(1.0, -53)), "powers of two, down to 2^-53");
  TAP_OK(close_to_log(0.70710678118654752) && close_to_log(0.70710678118654746) && close_to_log(0.9999999999999999),
         "either side of sqrt(1/2), and just below 1");
  /* the draws use u = k * 2^-53 for k in [1, 2^53] */
  uint64_t x = 88172645463325252ull;
  int bad = 0;
  for (int i = 0; i < 200000; i++) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    double u = (double)((x >> (11 + i % 53)) + 1) * (1.0 / 9007199254740992.0);
    if (!close_to_log(u)) bad++;
  }
  tap_diag("largest relative error %.3g", worst);
  TAP_OK(bad == 0, "200,000 points over every binade agree within 1e-14 (%d do not)", bad);
  return tap_done();
}

// The quantile every table reports: linear between the nearest ranks at q x (n - 1) (numpy's default).
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "sim/core/quantile.hpp"

TEST_CASE("quantile: linear between the nearest ranks at q x (n - 1)") {
  // Sorted 10..50: p50 at rank 2 is 30; p95 at rank 3.8 is 40 + 0.8 x 10 = 48; p0 and p100 the ends.
  const std::vector<double> v = {30, 10, 50, 20, 40};
  CHECK(epsim::quantile_of(v, 0.5) == doctest::Approx(30));
  CHECK(epsim::quantile_of(v, 0.95) == doctest::Approx(48));
  CHECK(epsim::quantile_of(v, 0.0) == 10);
  CHECK(epsim::quantile_of(v, 1.0) == 50);
  CHECK(epsim::quantile_sorted({10, 20, 30, 40, 50}, 0.25) == 20);
  // Two values: p95 = 100 + 0.95 x 200.
  CHECK(epsim::quantile_of({300, 100}, 0.95) == doctest::Approx(290));
  CHECK(epsim::quantile_of({7}, 0.95) == 7);
  CHECK_THROWS_AS(epsim::quantile_of({}, 0.5), std::invalid_argument);
}

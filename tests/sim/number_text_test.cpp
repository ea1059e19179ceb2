// g9 (sim/core/number_text.hpp): the one way metrics.csv, gpus.csv and exact_check.csv write a number.
#include <doctest/doctest.h>

#include <limits>

#include "sim/core/number_text.hpp"

TEST_CASE("g9 writes 9 significant digits, the shortest form printf gives") {
  using epsim::g9;
  CHECK(g9(0) == "0");
  CHECK(g9(1.5) == "1.5");
  CHECK(g9(1.0 / 3) == "0.333333333");
  CHECK(g9(-2.0 / 3) == "-0.666666667");
  CHECK(g9(123456789012.0) == "1.23456789e+11");
  CHECK(g9(18897.87021) == "18897.8702");
  // Read back, a written figure is within half a unit of its ninth digit.
  CHECK(std::stod(g9(1.0 / 7)) == doctest::Approx(1.0 / 7).epsilon(5e-10));
  // Edge cases as printf writes them: a negative zero keeps its sign, the largest double fits.
  CHECK(g9(-0.0) == "-0");
  CHECK(g9(-std::numeric_limits<double>::max()) == "-1.79769313e+308");
  CHECK(g9(std::numeric_limits<double>::infinity()) == "inf");
}

TEST_CASE("signed_percent writes a share as a signed percentage with 3 decimals, zero always +0.000%") {
  using epsim::signed_percent;
  CHECK(signed_percent(0.01) == "+1.000%");
  CHECK(signed_percent(-0.0099009901) == "-0.990%");
  CHECK(signed_percent(0) == "+0.000%");
  CHECK(signed_percent(-0.0) == "+0.000%");
  CHECK(signed_percent(-3.8e-6) == "+0.000%");  // rounds to zero: no sign of its own
  CHECK(signed_percent(-6e-6) == "-0.001%");
}

// MicroMoE's LP shares made whole tokens (sim/balancers/micromoe_rounding.hpp), worked by hand.
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "sim/balancers/micromoe_rounding.hpp"

using epsim::micromoe_round_shares;
using Tokens = std::vector<std::int64_t>;

TEST_CASE("MicroMoE's LP shares: rounded down then the rest to the largest fractional parts") {
  // 1.3 and 1.7 of 3: 1 and 1, and the third token to the larger fraction (0.7).
  CHECK(micromoe_round_shares({1.3, 1.7}, 3) == Tokens{1, 2});
  CHECK(micromoe_round_shares({1.7, 1.3}, 3) == Tokens{2, 1});
  // 0.4, 0.35, 0.25 of 1: one token, to the first.
  CHECK(micromoe_round_shares({0.4, 0.35, 0.25}, 1) == Tokens{1, 0, 0});
  // Ties go to the lower instance: 1.5 and 1.5 of 3.
  CHECK(micromoe_round_shares({1.5, 1.5}, 3) == Tokens{2, 1});
  // Twenty instances at half a token each, 10 tokens: the first ten get one, whatever the sort's size.
  const Tokens halves = micromoe_round_shares(std::vector<double>(20, 0.5), 10);
  Tokens first_ten(20, 0);
  for (int i = 0; i < 10; ++i) first_ten[static_cast<std::size_t>(i)] = 1;
  CHECK(halves == first_ten);
  // Whole shares stay as they are.
  CHECK(micromoe_round_shares({4, 0, 6}, 10) == Tokens{4, 0, 6});
}

TEST_CASE("MicroMoE's LP shares: a share below zero counts as none and the others add up to the count") {
  // -0.5 (far beyond the simplex's noise, to show the rule) and 3 of 3: 0 and 3. Kept negative, the
  // shares would be scaled to -0.6 and 3.6 and rounded to -1 and 4.
  CHECK(micromoe_round_shares({-0.5, 3}, 3) == Tokens{0, 3});
  // Shares adding up to 2 for a count of 4 (the LP's rows are met to 1e-9 only; exaggerated): scaled
  // to 2 and 2.
  CHECK(micromoe_round_shares({1, 1}, 4) == Tokens{2, 2});
  CHECK(micromoe_round_shares({1, 3}, 8) == Tokens{2, 6});  // not {3, 5}: the shares keep their ratio
  // Nothing to give: nothing given.
  CHECK(micromoe_round_shares({0, 0}, 0) == Tokens{0, 0});
}

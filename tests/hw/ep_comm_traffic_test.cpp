// The rows of `epsim-hw bench ep_comm` (hw/host/ep_comm_traffic.hpp): a token goes once to each rank
// holding any of its experts, worked out by hand for small cases; the uniform draw's invariants.
#include <doctest/doctest.h>

#include <numeric>
#include <stdexcept>

#include "hw/host/ep_comm_traffic.hpp"

using namespace epsim::hw;

TEST_CASE("ep_comm rows: once per destination rank, however many of its experts a token picked") {
  // 2 ranks, 4 experts: rank 0 holds experts 0 and 1, rank 1 holds 2 and 3.
  CHECK(expert_rank(1, 4, 2) == 0);
  CHECK(expert_rank(2, 4, 2) == 1);
  // Rank 0: {0,1} stays home (1 row to itself, not 2); {1,2} goes to both; {2,3} only to rank 1.
  // Rank 1: {3,2} stays home; {0,3} goes to both.
  const PairRows rows = pair_rows(2, 4, {{{0, 1}, {1, 2}, {2, 3}}, {{3, 2}, {0, 3}}});
  CHECK(rows == PairRows{{2, 2}, {1, 2}});
  CHECK(received_rows(rows) == std::vector<std::int64_t>{3, 4});

  // 4 ranks, 8 experts (2 each), top-3: token {0, 5, 7} of rank 2 reaches ranks 0, 2 and 3.
  const PairRows four = pair_rows(4, 8, {{}, {}, {{0, 5, 7}}, {{6, 7, 1}}});
  CHECK(four == PairRows{{0, 0, 0, 0}, {0, 0, 0, 0}, {1, 0, 1, 1}, {1, 0, 0, 1}});

  CHECK_THROWS_AS(pair_rows(2, 4, {{{4}}, {}}), std::invalid_argument);   // no expert 4
  CHECK_THROWS_AS(pair_rows(3, 4, {{}, {}, {}}), std::invalid_argument);  // 4 experts on 3 ranks
  CHECK_THROWS_AS(pair_rows(2, 4, {{}}), std::invalid_argument);         // routes for 1 rank of 2
}

TEST_CASE("ep_comm uniform rows: reproducible, each token at most min(top-k, ranks) times, all ranks when top-k = E") {
  const PairRows a = uniform_pair_rows(8, 512, 8, 256, 1);
  CHECK(a == uniform_pair_rows(8, 512, 8, 256, 1));
  CHECK(a != uniform_pair_rows(8, 512, 8, 256, 2));
  for (const auto& from : a) {
    const std::int64_t sent = std::accumulate(from.begin(), from.end(), std::int64_t{0});
    CHECK(sent >= 512);      // every token reaches at least one rank
    CHECK(sent <= 512 * 8);  // and at most min(top-k, ranks) = 8
    // 8 of 256 experts, 32 per rank: a rank is missed with probability C(224,8)/C(256,8) = 0.338, so a
    // token reaches 8 * 0.662 = 5.29 ranks on average (standard deviation 0.88); over 512 tokens
    // 2711 with a standard deviation of 20: the bounds are more than 5 of them away.
    CHECK(sent > 2600);
    CHECK(sent < 2820);
  }
  // Every set of 8 experts equally likely, so every rank equally reached: 8 sources x 4,096 tokens
  // reach a rank with probability 1 - C(224,8)/C(256,8) = 0.66183, 21,687 times on average
  // (standard deviation 86): each rank's total within 5 of them.
  const std::vector<std::int64_t> received = received_rows(uniform_pair_rows(8, 4096, 8, 256, 3));
  for (std::size_t dst = 0; dst < received.size(); ++dst) {
    CAPTURE(dst);
    CHECK(received[dst] > 21687 - 430);
    CHECK(received[dst] < 21687 + 430);
  }
  // top-k = every expert: every token goes to every rank, itself included.
  CHECK(uniform_pair_rows(3, 10, 6, 6, 7) == PairRows{{10, 10, 10}, {10, 10, 10}, {10, 10, 10}});
  // One expert per token on one rank: every row stays home.
  CHECK(uniform_pair_rows(1, 5, 1, 4, 7) == PairRows{{5}});
  CHECK_THROWS_AS(uniform_pair_rows(2, 5, 5, 4, 1), std::invalid_argument);   // top-k above the experts
  CHECK_THROWS_AS(uniform_pair_rows(3, 5, 1, 256, 1), std::invalid_argument);  // 256 experts on 3 ranks
}

// The top-k sampler's search: the branch-free binary search must give std::upper_bound's index for
// every point, ties and ends included, since a trace's bytes follow from which expert each draw
// lands on. And a draw never lands on an expert of zero weight.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "traces/synth/rng.hpp"
#include "traces/synth/topk_sampler.hpp"

using namespace epsim;

namespace {

std::uint32_t upper_bound_index(const std::vector<double>& c, double x) {
  return static_cast<std::uint32_t>(std::upper_bound(c.begin(), c.end(), x) - c.begin());
}

}  // namespace

TEST_CASE("first_above gives std::upper_bound's index: random sums with ties, their own values, both ends") {
  Xoshiro256ss rng(7);
  for (int trial = 0; trial < 400; ++trial) {
    const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng.below(trial < 40 ? 9 : 1500));
    std::vector<double> weights(n);
    for (double& w : weights) w = rng.below(4) == 0 ? 0.0 : static_cast<double>(rng.below(1000)) / 7.0;  // a quarter zero: ties
    std::vector<double> cumulative(n);
    double sum = 0;
    for (std::uint32_t e = 0; e < n; ++e) cumulative[e] = sum += weights[e];
    std::vector<double> points = {-1.0, 0.0, sum, sum + 1.0, sum * 0.5};
    for (const double c : cumulative) points.push_back(c);  // exactly on a sum, where ties sit
    for (int i = 0; i < 200; ++i) points.push_back(rng.uniform() * sum);
    for (const double x : points) {
      CAPTURE(n);
      CAPTURE(x);
      REQUIRE(first_above(cumulative.data(), n, x) == upper_bound_index(cumulative, x));
    }
  }
}

TEST_CASE("the sampler draws k distinct experts and never one of zero weight") {
  std::vector<double> weights(300, 0.0);
  for (std::size_t e = 0; e < weights.size(); e += 3) weights[e] = 1.0 + static_cast<double>(e % 17);
  TopkSampler sampler;
  sampler.reset(weights, 8);
  Xoshiro256ss rng(11);
  std::vector<std::uint16_t> out(8);
  for (int t = 0; t < 20'000; ++t) {
    sampler.sample(rng, out.data());
    for (std::size_t j = 0; j < out.size(); ++j) {
      REQUIRE(weights[out[j]] > 0);
      for (std::size_t i = 0; i < j; ++i) REQUIRE(out[i] != out[j]);
    }
  }
}

TEST_CASE("the guided search gives first_above's index: random sums, long runs of zero weights, both ends") {
  Xoshiro256ss rng(19);
  for (int trial = 0; trial < 400; ++trial) {
    const std::uint32_t n = 1 + static_cast<std::uint32_t>(rng.below(trial < 40 ? 9 : 1500));
    std::vector<double> weights(n);
    // A quarter of the trials have runs of zeros longer than the guided walk's steps.
    const bool runs = trial % 4 == 0;
    for (std::uint32_t e = 0; e < n; ++e)
      weights[e] = (runs ? e % 40 < 30 : rng.below(4) == 0) ? 0.0 : static_cast<double>(1 + rng.below(1000)) / 7.0;
    weights[n - 1] = 1.0;  // the last sum is positive
    std::vector<double> cumulative(n);
    double sum = 0;
    for (std::uint32_t e = 0; e < n; ++e) cumulative[e] = sum += weights[e];
    for (const std::uint32_t buckets : {n, 1u, 3u, 4 * n}) {
      const std::vector<std::uint32_t> guide = first_above_guide(cumulative.data(), n, buckets);
      for (std::uint32_t b = 0; b < buckets; ++b)
        REQUIRE(guide[b] == upper_bound_index(cumulative, static_cast<double>(b) * sum / buckets));
      const double scale = static_cast<double>(buckets) / sum;
      std::vector<double> points = {-1.0, 0.0, sum, sum + 1.0, sum * 0.5, std::nextafter(sum, 0.0)};
      for (const double c : cumulative) {
        points.push_back(c);  // exactly on a sum, where ties sit, and either side of it
        points.push_back(std::nextafter(c, 0.0));
        points.push_back(std::nextafter(c, 2 * sum));
      }
      for (int i = 0; i < 200; ++i) points.push_back(rng.uniform() * sum);
      for (const double x : points) {
        CAPTURE(n);
        CAPTURE(buckets);
        CAPTURE(x);
        REQUIRE(guided_first_above(cumulative.data(), n, guide, scale, x) == upper_bound_index(cumulative, x));
      }
    }
  }
}

// Draws a token's top-k: k DISTINCT experts, each draw with probability proportional to the weights
// of the experts not drawn yet (sequential sampling without replacement). While the experts not yet
// drawn hold at least half the weight it samples the full distribution by binary search and redraws
// duplicates (the same conditional law, two tries on average); after that it scans the remaining
// experts. Both paths are exact and consume the generator deterministically.
#pragma once

#include <cstdint>
#include <vector>

#include "traces/synth/rng.hpp"

namespace epsim {

class TopkSampler {
 public:
  TopkSampler() = default;
  /// `weights` >= 0 and finite, with at least `k` of them positive (the caller checks; asserted).
  void reset(const std::vector<double>& weights, std::uint32_t k);
  /// Writes k distinct expert ids into out[0..k).
  void sample(Xoshiro256ss& rng, std::uint16_t* out);
  std::uint32_t k() const { return k_; }

 private:
  std::vector<double> weights_;
  std::vector<double> cumulative_;  ///< cumulative_[e] = sum of weights_[0..e]
  std::vector<char> taken_;
  double total_ = 0;
  std::uint32_t k_ = 0;
  std::uint32_t last_positive_ = 0;
};

/// Number of positive entries of `weights`.
std::uint32_t count_positive(const std::vector<double>& weights);

}  // namespace epsim

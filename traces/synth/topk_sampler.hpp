// Draws a token's top-k: k DISTINCT experts, each draw with probability proportional to the weights
// of the experts not drawn yet (sequential sampling without replacement). While the experts not yet
// drawn hold at least half the weight it samples the full distribution by a guided search and redraws
// duplicates (the same conditional law, two tries on average); after that it scans the remaining
// experts. Both paths are exact and consume the generator deterministically.
//
// Group-limited (DeepSeek-V3's node-limited routing): the experts form `groups` equal contiguous
// groups; a token first draws `groups_per_token` distinct groups the same way, each with the weight of
// its experts together, then its k experts sequentially among the experts of those groups only.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "traces/synth/rng.hpp"

namespace epsim {

class TopkSampler {
 public:
  TopkSampler() = default;
  TopkSampler(const TopkSampler& other);
  TopkSampler& operator=(const TopkSampler& other);
  TopkSampler(TopkSampler&&) noexcept = default;
  TopkSampler& operator=(TopkSampler&&) noexcept = default;
  ~TopkSampler();
  /// `weights` >= 0 and finite, with at least `k` of them positive (the caller checks; asserted).
  /// With groups_per_token in [1, groups) the draw is group-limited: `groups` divides weights.size()
  /// and group_limited_feasible() holds (asserted). Otherwise every expert is open to every token.
  void reset(const std::vector<double>& weights, std::uint32_t k, std::uint32_t groups = 0,
             std::uint32_t groups_per_token = 0);
  /// Writes k distinct expert ids into out[0..k).
  void sample(Xoshiro256ss& rng, std::uint16_t* out);
  std::uint32_t k() const { return k_; }

 private:
  void sample_in_groups(Xoshiro256ss& rng, std::uint16_t* out);

  std::vector<double> weights_;
  std::vector<double> cumulative_;  ///< cumulative_[e] = sum of weights_[0..e]
  std::vector<std::uint32_t> guide_;  ///< first_above_guide over cumulative_, two buckets per expert
  double guide_scale_ = 0;            ///< buckets per unit of weight
  std::vector<char> taken_;
  double total_ = 0;
  std::uint32_t k_ = 0;
  std::uint32_t last_positive_ = 0;
  // Group-limited draws only.
  std::uint32_t group_size_ = 0;
  std::unique_ptr<TopkSampler> group_sampler_;  ///< over the groups' weights, k = groups_per_token
  std::vector<double> group_weight_;
  std::vector<std::uint16_t> chosen_;
};

/// The index of the first of `cumulative[0..n)` (non-decreasing, n >= 1) above `x`, n if none:
/// std::upper_bound's answer. A binary search whose steps are conditional moves, not branches: the
/// sampler's draws land at random, so a branch per step was mispredicted every other time, and
/// drawing the experts was two fifths of a wide sweep's time.
std::uint32_t first_above(const double* cumulative, std::uint32_t n, double x);

/// A guide table for first_above over cumulative[0..n) (n >= 1, its last entry > 0): entry b is the
/// answer for the lower end of bucket b of `buckets` equal buckets of [0, cumulative[n - 1]).
std::vector<std::uint32_t> first_above_guide(const double* cumulative, std::uint32_t n, std::uint32_t buckets);

/// first_above's answer, found from the guide's entry for x's bucket and at most two steps up (a lookup
/// where the binary search took log2(n) dependent steps: drawing experts, eight draws for each of a
/// rank's thousands of tokens, was a fifth of a wide sweep's time), or by first_above where that does
/// not reach it (a bucket holding several sums, x rounded below its bucket). `scale` = buckets /
/// cumulative[n - 1].
std::uint32_t guided_first_above(const double* cumulative, std::uint32_t n, const std::vector<std::uint32_t>& guide,
                                 double scale, double x);

/// Number of positive entries of `weights`.
std::uint32_t count_positive(const std::vector<double>& weights);

/// Whether every group-limited draw can find k experts of positive weight: at least groups_per_token
/// groups have some weight, and whichever groups_per_token of them are drawn hold k positive experts.
/// `groups` divides weights.size().
bool group_limited_feasible(const std::vector<double>& weights, std::uint32_t k, std::uint32_t groups,
                            std::uint32_t groups_per_token);

}  // namespace epsim

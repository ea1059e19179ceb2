#include "traces/synth/topk_sampler.hpp"

#include <algorithm>
#include <cassert>

namespace epsim {

std::uint32_t count_positive(const std::vector<double>& weights) {
  std::uint32_t n = 0;
  for (double w : weights) n += w > 0 ? 1 : 0;
  return n;
}

void TopkSampler::reset(const std::vector<double>& weights, std::uint32_t k) {
  assert(k >= 1 && count_positive(weights) >= k);
  weights_ = weights;
  k_ = k;
  cumulative_.resize(weights.size());
  taken_.assign(weights.size(), 0);
  double sum = 0;
  for (std::size_t e = 0; e < weights.size(); ++e) {
    sum += weights[e];
    cumulative_[e] = sum;
    if (weights[e] > 0) last_positive_ = static_cast<std::uint32_t>(e);
  }
  total_ = sum;
}

void TopkSampler::sample(Xoshiro256ss& rng, std::uint16_t* out) {
  const std::size_t n = weights_.size();
  double remaining = total_;
  for (std::uint32_t j = 0; j < k_; ++j) {
    std::uint32_t pick = last_positive_;
    if (remaining >= 0.5 * total_) {
      for (;;) {
        const double x = rng.uniform() * total_;
        const auto it = std::upper_bound(cumulative_.begin(), cumulative_.end(), x);
        pick = it == cumulative_.end() ? last_positive_ : static_cast<std::uint32_t>(it - cumulative_.begin());
        if (!taken_[pick]) break;
      }
    } else {
      const double x = rng.uniform() * remaining;
      double acc = 0;
      bool found = false;
      std::uint32_t last_free = 0;
      for (std::size_t e = 0; e < n; ++e) {
        if (taken_[e] || weights_[e] <= 0) continue;
        last_free = static_cast<std::uint32_t>(e);
        acc += weights_[e];
        if (x < acc) {
          pick = static_cast<std::uint32_t>(e);
          found = true;
          break;
        }
      }
      if (!found) pick = last_free;  // rounding: x fell beyond the recomputed sum
    }
    taken_[pick] = 1;
    remaining -= weights_[pick];
    out[j] = static_cast<std::uint16_t>(pick);
  }
  for (std::uint32_t j = 0; j < k_; ++j) taken_[out[j]] = 0;
}

}  // namespace epsim

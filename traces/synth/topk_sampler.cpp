#include "traces/synth/topk_sampler.hpp"

#include <algorithm>
#include <cassert>

namespace epsim {

std::uint32_t count_positive(const std::vector<double>& weights) {
  std::uint32_t n = 0;
  for (double w : weights) n += w > 0 ? 1 : 0;
  return n;
}

std::uint32_t first_above(const double* cumulative, std::uint32_t n, double x) {
  // `base` ends at the last entry <= x, or at the first entry when none is; each step halves the
  // span that holds it.
  const double* base = cumulative;
  std::uint32_t len = n;
  while (len > 1) {
    const std::uint32_t half = len / 2;
    base = base[half] <= x ? base + half : base;
    len -= half;
  }
  return static_cast<std::uint32_t>(base - cumulative) + (*base <= x ? 1u : 0u);
}

std::vector<std::uint32_t> first_above_guide(const double* cumulative, std::uint32_t n, std::uint32_t buckets) {
  std::vector<std::uint32_t> guide(buckets);
  const double total = cumulative[n - 1];
  // The buckets' lower ends never decrease, so one walk along the sums answers them all.
  std::uint32_t at = 0;
  for (std::uint32_t b = 0; b < buckets; ++b) {
    const double lower = static_cast<double>(b) * total / static_cast<double>(buckets);
    while (at < n && cumulative[at] <= lower) ++at;
    guide[b] = at;
  }
  return guide;
}

std::uint32_t guided_first_above(const double* cumulative, std::uint32_t n, const std::vector<std::uint32_t>& guide,
                                 double scale, double x) {
  const double position = x * scale;
  const std::uint32_t last = static_cast<std::uint32_t>(guide.size()) - 1;
  const std::uint32_t bucket = !(position > 0) ? 0 : position >= static_cast<double>(last) ? last
                                                                                        : static_cast<std::uint32_t>(position);
  // The entry answers the bucket's lower end, at or below x, so the answer is the entry or a little
  // above it: two steps up, without a branch (the draws land at random, and a branch on where a walk
  // stops was mispredicted about once a draw). Rounding may put x a hair below the bucket's lower end,
  // and a bucket may hold more sums than two steps pass (zero weights tie sums): then the check below
  // fails, rarely and so predictably, and the binary search answers.
  std::uint32_t at = guide[bucket];
  for (int step = 0; step < 2; ++step) {
    const std::uint32_t probe = at < n ? at : n - 1;
    at += static_cast<std::uint32_t>((at < n) & (cumulative[probe] <= x));
  }
  const bool below = at < n && cumulative[at] <= x;
  const bool above = at > 0 && cumulative[at - 1] > x;
  return below || above ? first_above(cumulative, n, x) : at;
}

bool group_limited_feasible(const std::vector<double>& weights, std::uint32_t k, std::uint32_t groups,
                            std::uint32_t groups_per_token) {
  assert(groups >= 1 && weights.size() % groups == 0);
  const std::size_t size = weights.size() / groups;
  std::vector<std::uint32_t> positive;  // positive experts of each group with some weight
  for (std::uint32_t g = 0; g < groups; ++g) {
    std::uint32_t n = 0;
    for (std::size_t e = g * size; e < (g + 1) * size; ++e) n += weights[e] > 0 ? 1 : 0;
    if (n > 0) positive.push_back(n);
  }
  if (positive.size() < groups_per_token) return false;
  std::sort(positive.begin(), positive.end());
  std::uint64_t fewest = 0;
  for (std::uint32_t i = 0; i < groups_per_token; ++i) fewest += positive[i];
  return fewest >= k;
}

TopkSampler::TopkSampler(const TopkSampler& other)
    : weights_(other.weights_),
      cumulative_(other.cumulative_),
      guide_(other.guide_),
      guide_scale_(other.guide_scale_),
      taken_(other.taken_),
      total_(other.total_),
      k_(other.k_),
      last_positive_(other.last_positive_),
      group_size_(other.group_size_),
      group_sampler_(other.group_sampler_ ? std::make_unique<TopkSampler>(*other.group_sampler_) : nullptr),
      group_weight_(other.group_weight_),
      chosen_(other.chosen_) {}

TopkSampler& TopkSampler::operator=(const TopkSampler& other) {
  if (this != &other) *this = TopkSampler(other);
  return *this;
}

TopkSampler::~TopkSampler() = default;

void TopkSampler::reset(const std::vector<double>& weights, std::uint32_t k, std::uint32_t groups,
                        std::uint32_t groups_per_token) {
  assert(k >= 1 && count_positive(weights) >= k);
  const bool limited = groups_per_token >= 1 && groups_per_token < groups;
  group_size_ = 0;
  if (limited) {
    assert(weights.size() % groups == 0 && group_limited_feasible(weights, k, groups, groups_per_token));
    group_size_ = static_cast<std::uint32_t>(weights.size() / groups);
    group_weight_.assign(groups, 0.0);
    for (std::size_t e = 0; e < weights.size(); ++e) group_weight_[e / group_size_] += weights[e];
    if (!group_sampler_) group_sampler_ = std::make_unique<TopkSampler>();
    group_sampler_->reset(group_weight_, groups_per_token);
    chosen_.resize(groups_per_token);
  }
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
  const auto n = static_cast<std::uint32_t>(weights.size());
  // Two buckets per expert: most draws then land in a bucket whose answer is its entry or the next.
  guide_ = first_above_guide(cumulative_.data(), n, 2 * n);
  guide_scale_ = static_cast<double>(2 * n) / total_;
}

void TopkSampler::sample_in_groups(Xoshiro256ss& rng, std::uint16_t* out) {
  group_sampler_->sample(rng, chosen_.data());
  // The chosen groups are scanned in ascending order, so a draw depends on the set, not the order.
  std::sort(chosen_.begin(), chosen_.end());
  double remaining = 0;
  for (std::uint16_t g : chosen_) remaining += group_weight_[g];
  for (std::uint32_t j = 0; j < k_; ++j) {
    const double x = rng.uniform() * remaining;
    double acc = 0;
    std::uint32_t pick = 0, last_free = 0;
    bool found = false;
    for (std::uint16_t g : chosen_) {
      for (std::uint32_t e = g * group_size_; e < (g + 1u) * group_size_; ++e) {
        if (taken_[e] || weights_[e] <= 0) continue;
        last_free = e;
        acc += weights_[e];
        if (x < acc) {
          pick = e;
          found = true;
          break;
        }
      }
      if (found) break;
    }
    if (!found) pick = last_free;  // rounding: x fell beyond the recomputed sum
    taken_[pick] = 1;
    remaining -= weights_[pick];
    out[j] = static_cast<std::uint16_t>(pick);
  }
  for (std::uint32_t j = 0; j < k_; ++j) taken_[out[j]] = 0;
}

void TopkSampler::sample(Xoshiro256ss& rng, std::uint16_t* out) {
  if (group_size_ > 0) {
    sample_in_groups(rng, out);
    return;
  }
  const std::size_t n = weights_.size();
  double remaining = total_;
  for (std::uint32_t j = 0; j < k_; ++j) {
    std::uint32_t pick = last_positive_;
    if (remaining >= 0.5 * total_) {
      for (;;) {
        const double x = rng.uniform() * total_;
        const std::uint32_t at = guided_first_above(cumulative_.data(), static_cast<std::uint32_t>(n), guide_, guide_scale_, x);
        pick = at == n ? last_positive_ : at;
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

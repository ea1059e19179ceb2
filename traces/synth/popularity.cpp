#include "traces/synth/popularity.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace epsim {

bool parse_popularity_dist(const std::string& name, PopularityDist& out) {
  if (name == "uniform")
    out = PopularityDist::uniform;
  else if (name == "zipf")
    out = PopularityDist::zipf;
  else if (name == "lognormal")
    out = PopularityDist::lognormal;
  else
    return false;
  return true;
}

const char* popularity_dist_name(PopularityDist dist) {
  switch (dist) {
    case PopularityDist::uniform:
      return "uniform";
    case PopularityDist::zipf:
      return "zipf";
    case PopularityDist::lognormal:
      return "lognormal";
  }
  return "?";
}

std::vector<double> base_log_popularity(PopularityDist dist, std::uint32_t num_experts, double zipf_alpha,
                                        double lognormal_sigma, Xoshiro256ss& rng) {
  std::vector<double> logs(num_experts, 0.0);
  if (dist == PopularityDist::zipf) {
    std::vector<std::uint32_t> order(num_experts);  // order[i] = expert at popularity rank i
    std::iota(order.begin(), order.end(), 0u);
    for (std::uint32_t i = num_experts; i > 1; --i)
      std::swap(order[i - 1], order[static_cast<std::size_t>(rng.below(i))]);
    for (std::uint32_t i = 0; i < num_experts; ++i)
      logs[order[i]] = -zipf_alpha * std::log(static_cast<double>(i) + 1.0);
  } else if (dist == PopularityDist::lognormal) {
    for (double& l : logs) l = lognormal_sigma * rng.normal();
  }
  return logs;
}

std::vector<double> weights_from_logs(const std::vector<double>& log_weights) {
  const double top = *std::max_element(log_weights.begin(), log_weights.end());
  std::vector<double> w(log_weights.size());
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = std::exp(log_weights[i] - top);
  return w;
}

}  // namespace epsim

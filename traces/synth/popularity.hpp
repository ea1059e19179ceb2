// Per-layer expert popularity profiles of the synthetic generator, as natural logarithms of
// unnormalised weights (docs/trace-format.md, "Synthetic traces").
//  - uniform: every expert equally popular (all zeros);
//  - zipf: the expert at popularity rank i (0 = hottest) has weight 1/(i+1)^alpha; which expert has
//    which rank is a Fisher-Yates shuffle drawn from the generator;
//  - lognormal: weight exp(sigma * N(0,1)) per expert.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/synth/rng.hpp"

namespace epsim {

enum class PopularityDist { uniform, zipf, lognormal };

/// "uniform", "zipf" or "lognormal"; false if `name` is none of them.
bool parse_popularity_dist(const std::string& name, PopularityDist& out);
const char* popularity_dist_name(PopularityDist dist);

/// Log-weights of `num_experts` experts; draws from `rng` for zipf (the shuffle) and lognormal.
std::vector<double> base_log_popularity(PopularityDist dist, std::uint32_t num_experts, double zipf_alpha,
                                        double lognormal_sigma, Xoshiro256ss& rng);

/// exp(log_weights - max), so the largest weight is 1 and none overflows.
std::vector<double> weights_from_logs(const std::vector<double>& log_weights);

}  // namespace epsim

// GLM-5-like routing counts for planner benchmarks: 128 experts, top-8, 4,096 tokens per rank,
// log-normal expert popularity with per-rank jitter, from a fixed-seed generator of its own (no <random>
// distribution, whose output differs between standard libraries), so every benchmark plans the same
// counts.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "sim/hardware/model_spec.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim::bench {

inline constexpr int kExperts = 128;
inline constexpr int kTopK = 8;
inline constexpr int kTokensPerRank = 4096;
inline constexpr int kGpusPerNode = 8;

/// Uniform in (0, 1) from a 64-bit LCG, then standard normals by Box-Muller: no <random>
/// distribution, whose output differs between standard libraries.
class Normal {
 public:
  double next() {
    const double u1 = uniform();
    const double u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  }

 private:
  double uniform() {
    state_ = state_ * 6364136223846793005ULL + 1442695040888963407ULL;
    return (static_cast<double>(state_ >> 11) + 0.5) / 9007199254740992.0;  // 2^53
  }
  std::uint64_t state_ = 20260419;
};

/// c[s][e]: expert popularity log-normal (sigma 1) across experts, with a per-rank log-normal jitter
/// (sigma 0.3); each rank's 4096 x 8 assignments split in proportion, at most 4096 per expert.
inline TraceRecord glm5_like_counts(int ranks) {
  Normal normal;
  std::vector<double> popularity(kExperts);
  for (double& p : popularity) p = std::exp(normal.next());
  TraceRecord record;
  record.counts.resize(static_cast<std::size_t>(ranks) * kExperts);
  for (int s = 0; s < ranks; ++s) {
    std::vector<double> weight(kExperts);
    double sum = 0;
    for (int e = 0; e < kExperts; ++e) sum += weight[e] = popularity[e] * std::exp(0.3 * normal.next());
    for (int e = 0; e < kExperts; ++e) {
      const double share = static_cast<double>(kTokensPerRank) * kTopK * weight[e] / sum;
      record.counts[static_cast<std::size_t>(s) * kExperts + e] =
          static_cast<std::uint32_t>(std::min(share, static_cast<double>(kTokensPerRank)));
    }
  }
  return record;
}

inline ModelSpec glm5_like_model() {
  ModelSpec m;
  m.name = "glm5-like-128";
  m.hidden_size = 6144;
  m.expert_ffn_size = 2048;
  m.num_experts = kExperts;
  m.top_k = kTopK;
  m.gated_ffn = true;
  m.dtype_bytes = 2;
  m.moe_layers = 1;
  return m;
}

}  // namespace epsim::bench

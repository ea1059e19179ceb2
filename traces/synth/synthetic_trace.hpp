// The synthetic gating-trace generator behind `epsim trace generate` (docs/trace-format.md,
// "Synthetic traces"). Records are produced one at a time in (step, micro-batch, layer) order.
//
// Model, per layer l: base log-popularity b_l (PopularityDist); per source rank s and expert e a
// static log-factor rank_skew * N(0,1); per micro-batch (counted across steps, m = step * M + mb) the
// layer's log-popularity walks: p_l(0) = b_l, p_l(m) = p_l(m-1) + drift * N(0,1) per expert. Rank s
// then draws T tokens, each a top-k of distinct experts with weights exp(p_l(m)[e] + skew_l[s][e]).
// With group-limited routing (groups G, groups_per_token M, as a model's routing block) the experts
// form G equal contiguous groups and each token first draws M distinct groups by their total weight,
// then its top-k inside them (TopkSampler), so it reaches at most M groups.
//
// Random streams (all Xoshiro256** seeded through mix_seed(seed, ...)): {1, l} base popularity,
// {2, l} rank skew, {3, l} drift, {4, step, mb, l} the tokens of one record. Hence the first records
// do not depend on how many steps or micro-batches are asked for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/format/trace_types.hpp"
#include "traces/synth/popularity.hpp"
#include "traces/synth/rng.hpp"
#include "traces/synth/topk_sampler.hpp"

namespace epsim {

struct SyntheticOptions {
  std::uint32_t ranks = 8;
  std::uint32_t experts = 64;
  std::uint32_t top_k = 2;
  std::uint32_t layers = 1;
  std::uint32_t micro_batches = 1;
  std::uint32_t steps = 1;
  std::uint32_t tokens_per_rank = 1024;
  PopularityDist dist = PopularityDist::uniform;
  double zipf_alpha = 1.2;
  double lognormal_sigma = 1.0;
  double rank_skew = 0.0;  ///< sigma of the per-rank log-normal factor; 0 = every rank alike
  double drift = 0.0;      ///< std of the per-micro-batch log-popularity step; 0 = static
  std::uint64_t seed = 1;
  bool token_ids = false;
  std::uint32_t groups = 0;            ///< expert groups of group-limited routing; 0: unrestricted
  std::uint32_t groups_per_token = 0;  ///< groups each token may reach; 0: unrestricted
  bool group_limited() const { return groups_per_token >= 1 && groups_per_token < groups; }
};

/// Throws InputError (file "epsim trace generate") for impossible options.
void check_synthetic_options(const SyntheticOptions& options);
/// The equivalent command line, stored as the trace's provenance.
std::string synthetic_command(const SyntheticOptions& options);

class SyntheticTrace {
 public:
  explicit SyntheticTrace(const SyntheticOptions& options);
  const TraceHeader& header() const { return header_; }
  /// The next record in (step, micro-batch, layer) order; false after the last.
  bool next(TraceRecord& record);

 private:
  void advance_drift();  ///< moves every layer's log-popularity to the current micro-batch

  SyntheticOptions opt_;
  TraceHeader header_;
  std::vector<std::vector<double>> log_pop_;            ///< [layer][expert], at micro-batch m_
  std::vector<std::vector<std::vector<double>>> skew_;  ///< [layer][rank][expert], empty if no skew
  std::vector<Xoshiro256ss> drift_rng_;                 ///< per layer
  std::vector<TopkSampler> samplers_;
  std::uint32_t step_ = 0, micro_batch_ = 0, layer_ = 0;
  std::uint64_t drift_at_ = 0;  ///< global micro-batch log_pop_ is at
  bool done_ = false;
};

/// Streams the whole synthetic trace into `path` (see TraceWriter for `overwrite`).
void generate_trace(const SyntheticOptions& options, const std::string& path, bool overwrite);

}  // namespace epsim

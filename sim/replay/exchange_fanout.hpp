// How many distinct tokens each leg of a plan's EP exchange carries. A plan counts (token, expert)
// assignments; an EP library that sends a token once per destination GPU (or once per destination
// node, then forwards it) moves fewer copies than that whenever a token has several experts in one
// place. Where the trace has token ids the count is exact: each (source, expert) assignment is given
// to the plan's routes for that pair in token order, and the distinct tokens per leg are counted.
// Without token ids it is the expectation under a documented rule (docs/config.md, "Token copies"):
//
//   a token's K slots are independent draws; a slot lands in destination D (a GPU or a node) with
//   probability a_D = A_D / (n_s K), the share of the source's assignments that go there, so
//   E[distinct tokens to D] = n_s (1 - (1 - a_D)^K).
//
// With group-limited routing (G groups of contiguous experts, M < G per token) a token first picks M
// groups, group g with probability q_g = min(1, M a_g), and spreads K a_g / q_g slots (K / M when
// uncapped) over the experts of each picked group, so
//   P(token reaches D) = 1 - prod_g (1 - q_g (1 - (1 - a_Dg / a_g)^(K a_g / q_g))),
// where a_g is group g's share of the source's assignments and a_Dg the share that goes to D in g.
// Both rules give at most min(A_D, n_s) and at least A_D / K tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/plan/plan.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

/// Distinct tokens one source sends to one GPU or one node in one exchange stage.
struct LegTokens {
  int src = 0;
  int dst = 0;  ///< a GPU (gpu legs) or a node (node legs)
  double tokens = 0;
};

class ExchangeFanout {
 public:
  /// Distinct tokens per EP leg of `plan` for `copies` on nodes of `gpus_per_node` GPUs. With
  /// per_expert, every assignment is a copy (the plan's counts as they are). `record` may be null (a
  /// plan read without its trace); its token ids, when present and consistent with the plan's routes,
  /// give exact counts. A source's tokens are its assignments (all its routes) over the model's top-k.
  ExchangeFanout(const Plan& plan, const TraceRecord* record, const ModelSpec& model, TokenCopies copies,
                 int gpus_per_node);

  TokenCopies copies() const { return copies_; }
  /// Whether the counts came from token ids (exact) rather than the expectation rule.
  bool exact() const { return exact_; }
  /// Stage `stage`'s legs to GPUs (every EP leg: the route's via GPU or instance GPU, not the source).
  const std::vector<LegTokens>& gpu_legs(int stage) const { return gpu_legs_[static_cast<std::size_t>(stage)]; }
  /// Stage `stage`'s legs to other nodes (per_node only; empty otherwise).
  const std::vector<LegTokens>& node_legs(int stage) const { return node_legs_[static_cast<std::size_t>(stage)]; }

 private:
  void count_assignments(const Plan& plan);
  bool count_token_ids(const Plan& plan, const TraceRecord& record, int top_k);
  void expect(const Plan& plan, const ModelSpec& model);

  TokenCopies copies_;
  int gpus_per_node_;
  bool exact_ = false;
  std::vector<std::vector<LegTokens>> gpu_legs_;   ///< per stage, sorted by (src, dst)
  std::vector<std::vector<LegTokens>> node_legs_;  ///< per stage, sorted by (src, dst node)
};

}  // namespace epsim

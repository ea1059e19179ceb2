// FasterMoE (PPoPP'22; laekov/fastmoe v1 with FMOE_FASTER_SCHEDULE_ENABLE / _SHADOW_ENABLE): every
// forward pass, on the exact counts, a greedy policy picks hot experts to "shadow" (fastermoe_policy.hpp).
// A shadowed expert's weights are broadcast from its owner to every other GPU over the EP backend,
// each GPU computes its own tokens for it locally (they skip both all-to-alls), and the weight
// gradients are reduced back to the owner in backward. The other tokens move by the group-wise
// exchange (group_exchange.hpp): computation C_j on a GPU handles exactly the tokens of exchange step
// j, so each (expert, step) gets its own instance on the home GPU and each C_j is its own grouped
// GEMM; the shadowed experts' GEMM runs after all C_j on the compute stream, as in FasterMoE.
#pragma once

#include <memory>

#include "sim/balancers/balancer.hpp"
#include "sim/balancers/fastermoe_policy.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

struct FasterMoeOptions {
  ShadowPolicy policy = ShadowPolicy::paper;
  bool smart_schedule = true;  ///< group-wise exchange; false: one all-to-all each way
  int group_size = 4;          ///< v1's FMOE_FASTER_GROUP_SIZE default, capped at the EP degree
  /// The policy's time on the GPU before the dispatch, the all_gather of the counts folded in.
  double planner_time_us = 20;
};

class FasterMoe : public Balancer {
 public:
  explicit FasterMoe(FasterMoeOptions options = {});
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  FasterMoeOptions options_;
};

/// Parameters: policy (paper | code | none, default paper), smart_schedule (default true),
/// group_size (>= 1, default 4), planner_time_us (>= 0, default 20).
std::unique_ptr<Balancer> make_fastermoe(ConfigMap& params);

}  // namespace epsim

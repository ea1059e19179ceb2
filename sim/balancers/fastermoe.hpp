// FasterMoE (PPoPP'22; laekov/fastmoe v1 with FMOE_FASTER_SCHEDULE_ENABLE / _SHADOW_ENABLE): every
// forward pass, on the exact counts, a greedy policy picks hot experts to "shadow" (fastermoe_policy.hpp).
// A shadowed expert's weights are broadcast from its owner to every other GPU over the EP backend,
// each GPU computes its own tokens for it locally (they skip both all-to-alls), and the weight
// gradients are reduced back to the owner in backward. The other tokens move by the group-wise
// exchange (group_exchange.hpp): computation C_j on a GPU handles exactly the tokens of exchange step
// j, so each (expert, step) gets its own instance on the home GPU and each C_j is its own grouped
// GEMM; the shadowed experts' GEMM runs after all C_j on the compute stream, as in FasterMoE.
//
// The broadcast and the reduce run as NCCL runs them, a pipelined ring by default
// (fastermoe_collective.hpp). v1 launches each expert's computation on its own (expert_fn_single, one
// per expert and exchange step, skipped when the batch is empty): `gemm: per_expert`, one GEMM group
// per instance; `gemm: grouped` puts each C_j, and the shadows, in one grouped GEMM.
#pragma once

#include <memory>

#include "sim/balancers/balancer.hpp"
#include "sim/balancers/fastermoe_collective.hpp"
#include "sim/balancers/fastermoe_policy.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

/// How a GPU's expert computations are launched.
enum class FasterMoeGemm {
  per_expert,  ///< one GEMM group per instance, as v1 calls each expert's forward on its own
  grouped,     ///< one grouped GEMM per exchange step, and one for the shadows
};

struct FasterMoeOptions {
  ShadowPolicy policy = ShadowPolicy::paper;
  bool smart_schedule = true;  ///< group-wise exchange; false: one all-to-all each way
  int group_size = 4;          ///< v1's FMOE_FASTER_GROUP_SIZE default, capped at the EP degree
  /// The policy's time on the GPU before the dispatch, the all_gather of the counts folded in.
  double planner_time_us = 20;
  /// How the shadow weights' broadcast and the gradients' reduce move (NCCL: a pipelined ring).
  ShadowCollective collective = ShadowCollective::ring;
  FasterMoeGemm gemm = FasterMoeGemm::per_expert;
};

class FasterMoe : public Balancer {
 public:
  explicit FasterMoe(FasterMoeOptions options = {});
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  FasterMoeOptions options_;
};

/// Parameters: policy (paper | code | prototype | none, default paper), smart_schedule (default true),
/// group_size (>= 1, default 4), planner_time_us (>= 0, default 20), collective (ring | tree | star,
/// default ring), gemm (per_expert | grouped, default per_expert).
std::unique_ptr<Balancer> make_fastermoe(ConfigMap& params);

}  // namespace epsim

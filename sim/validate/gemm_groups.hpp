// Which GEMM group each GEMM on a timeline computed. A GPU's GEMM events all share three names (gemm
// fwd, gemm dgrad, gemm wgrad), and pairing them by occurrence assumes both sides ran the groups in the
// same order. They need not: the simulator runs an on-arrival group (FEPLB's dynamic instances) as soon
// as its tokens are in, ahead of groups listed before it, while epsim-hw run follows the plan's order.
// So before matching, `epsim validate` names every GEMM by its group ("gemm fwd g2": the plan's
// gemm_order[gpu][2]) on both sides, each from the order that side ran.
#pragma once

#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/replay/timeline.hpp"

namespace epsim {

/// Per kernel name, the groups in the order a GPU runs them, given the order its forward ran the
/// groups: the backward as the simulator and epsim-hw run it (each backward_first group's data and
/// weight gradient first, then the other groups' data gradients, then their weight gradients, each in
/// forward order).
struct GemmGroupOrder {
  std::vector<int> fwd, dgrad, wgrad;
};
GemmGroupOrder gemm_group_order(const std::vector<GemmGroup>& groups, const std::vector<int>& forward_order);

/// True when `name` already says its group (ends in " g<digits>").
bool names_gemm_group(const std::string& name);

/// Appends " g<k>" to the GEMM events of `predicted` and `measured`: on each GPU and for each of the
/// three names, the i-th event by start time is the i-th group of that side's order. The predicted
/// order comes from `predicted_forward[gpu]` (LayerResult::forward_gemm_groups); measured events are
/// taken in the plan's order (epsim-hw run's), unless they already name their group, in which case
/// they are kept. A GPU and name whose event count differs from its group count on either side is left
/// unnamed on both (a measured group name is taken off), and pairs by occurrence as before.
void name_gemm_groups(const Plan& plan, const std::vector<std::vector<int>>& predicted_forward,
                      std::vector<TimelineEvent>& predicted, std::vector<TimelineEvent>& measured);

}  // namespace epsim

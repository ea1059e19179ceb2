// MicroMoE's load balance as a flow problem. Which source sent a token does not change the load of
// the GPU that computes it, so the min-max load over replicas is a problem on expert loads alone:
// expert e's l_e tokens may go to any GPU holding an instance of e, and the most loaded GPU should
// carry as little as possible. For a bound z, a schedule exists exactly when the network
//   source -> expert e (capacity l_e) -> each GPU holding e (unbounded) -> sink (capacity z)
// carries all tokens; max-flow's integrality makes the smallest such integer z the optimum in whole
// tokens, which is the ceiling of the LP's fractional optimum. z is found by a binary search whose
// infeasible steps keep their flow as the next step's start (raising z keeps a flow feasible).
// Which source's tokens an instance takes is then a transport problem on a hierarchical cost (own
// GPU < same node < another node), which filling the cheapest level first solves exactly.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace epsim {

/// Tokens per instance at the optimum: `per_instance[e][r]` for the r-th GPU of `gpus_of[e]`.
struct ReplicaBalance {
  std::int64_t max_load = 0;  ///< the optimal integer max load over the GPUs
  std::vector<std::vector<std::int64_t>> per_instance;
};

/// The min-max load schedule of `loads[e]` over the GPUs `gpus_of[e]` (distinct, non-empty, the home
/// first) of `num_gpus` GPUs. Among optimal flows it keeps tokens at the first-listed GPU where it can:
/// augmenting paths try the home edge first, and afterwards each replica's tokens move back home
/// while the home stays at or below the optimum.
ReplicaBalance micromoe_balance_over_replicas(const std::vector<std::int64_t>& loads,
                                              const std::vector<std::vector<int>>& gpus_of, int num_gpus);

/// Splits expert e's per-source counts `counts[s]` over its instances on `gpus` with totals `totals`
/// (which sum to the counts' sum, and are used up): first each source's tokens to an instance on its
/// own GPU, then to instances in its node, then to the rest, each level in source then instance
/// order. Writes split[s * stride + r] for every source s and instance r < gpus.size(); the rest of
/// each row is left as it was. This is a minimum-cost transport for the cost 0 / 1 / w (w >= 1) of
/// those levels. Throws std::logic_error when the totals do not cover the counts.
void micromoe_split_by_source(const std::vector<std::int64_t>& counts, const std::vector<int>& gpus,
                              std::vector<std::int64_t>& totals, int gpus_per_node, std::int64_t* split,
                              std::size_t stride);

}  // namespace epsim

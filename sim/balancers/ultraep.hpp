// UltraEP (Dots-Infra/UltraEP v1.0.0, arXiv 2606.04101): in every layer of every micro-batch, on the
// exact counts and on the critical path, a GPU kernel decides per NVLink domain which experts get
// copies in the `spare_slots_per_gpu` redundant slots of each rank, and how many tokens (a quota)
// each copy computes. It binary-searches a per-rank token cap T; for each T a greedy oracle exports
// quotas of the overloaded ranks' hottest master experts into the largest free slack of the domain
// (csrc/kernels/placement.cu). Each source rank then splits its tokens for an expert across the
// expert's instances in proportion to their quotas. Tokens travel straight to the replica on the EP
// backend (UltraEP's SM/TMA streaming kernels); replica weights come from the home GPU before the
// GEMM and the weight gradients go back in backward. See docs/balancers.md (UltraEP).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

/// update_placement + reroute in UltraEP's README table (EP64, 256 experts, 1.51 imbalance:
/// 0.067 ms + 0.039 ms), rounded to whole microseconds. A constant so that runs are reproducible.
constexpr double kUltraEpDefaultPlannerTimeUs = 106.0;

/// Defaults are UltraEP's own (README / ultra_ep tuning, ULTRA_EP_* environment variables).
struct UltraEpParams {
  int spare_slots_per_gpu = 2;          ///< num_local_redundant_experts R (README: 4 master + 2 redundant)
  double balance_threshold = 1.0;       ///< ULTRA_EP_BALANCE_THRESHOLD: search floor = ceil(mean * max(this, 1))
  double oracle_eps = 0.01;             ///< ULTRA_EP_QUOTA_ORACLE_EPS: fast path tries ceil(floor * (1 + eps))
  std::int64_t min_tokens_per_replica = 1024;  ///< ULTRA_EP_QUOTA_MIN_TOKENS_PER_REPLICA (a soft floor)
  bool allow_zero_master_quota = false;  ///< ULTRA_EP_QUOTA_ALLOW_ZERO_MASTER_QUOTA
  bool locality_aware = true;            ///< ULTRA_EP_QUOTA_LOCALITY_AWARE
  int max_search_iterations = 32;        ///< bisection steps on T (32 make T exact below 2^32 tokens)
  double planner_time_us = kUltraEpDefaultPlannerTimeUs;  ///< GPU time before the dispatch, every GPU
};

/// One quota export: `tokens` of `expert` computed by a new copy on `gpu` (global index).
struct UltraEpMove {
  int expert = 0;
  int gpu = 0;
  std::int64_t tokens = 0;
};

/// The result of one NVLink domain's quota search.
struct UltraEpDomainQuotas {
  std::int64_t threshold = 0;  ///< the cap T accepted (the domain's max rank load when nothing moves)
  std::vector<UltraEpMove> moves;  ///< in the order the oracle made them; (expert, gpu) pairs unique
};

/// The quota search for the domain of GPUs [first_gpu, first_gpu + num_domain_gpus). `expert_load[e]`
/// is l_e for every expert, `home[e]` its home GPU; only experts whose home is in the domain count.
///   lo = ceil(domain mean * max(balance_threshold, 1)), hi = max rank load; nothing moves if lo >= hi.
///   Fast path: nothing moves if ceil(lo * (1 + oracle_eps)) >= hi; T = that value if feasible; otherwise the
///   smallest feasible T in [lo, hi] by bisection (at most max_search_iterations steps; hi is
///   always feasible, with no moves).
/// Oracle for T (reject if sum of excess > sum of slack): sources by descending load (ties: lower
/// GPU), each one's master experts by descending load (ties: lower id); while the source is above T
/// and the expert has exportable tokens (all but one unless allow_zero_master_quota), the target is
/// the rank with the largest slack (ties: lower GPU) that has a free slot and holds no copy of the
/// expert; q = min(need, slack, exportable); a q below the floor min(min_tokens_per_replica,
/// ceil(need / such ranks)) is not made and the source goes on to its next expert. T is feasible
/// when every source gets down to T.
UltraEpDomainQuotas ultraep_domain_quotas(const std::vector<std::int64_t>& expert_load, const std::vector<int>& home,
                                          int first_gpu, int num_domain_gpus, const UltraEpParams& params);

class UltraEp : public Balancer {
 public:
  explicit UltraEp(UltraEpParams params) : params_(params) {}
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  UltraEpParams params_;
};

/// Reads spare_slots_per_gpu, balance_threshold, oracle_eps, min_tokens_per_replica,
/// allow_zero_master_quota, locality_aware, max_search_iterations, planner_time_us (all optional);
/// the caller's finish() rejects any other key.
std::unique_ptr<Balancer> make_ultraep(ConfigMap& params);

}  // namespace epsim

// UltraEP (Dots-Infra/UltraEP v1.0.0, arXiv 2606.04101): in every layer of every micro-batch, on the
// exact counts and on the critical path, a GPU kernel decides per NVLink domain which experts get
// copies in the `spare_slots_per_gpu` redundant slots of each rank, and how many tokens (a quota)
// each copy computes. It searches a per-rank token cap T; for each T a greedy oracle exports quotas
// of the overloaded ranks' hottest master experts into the largest free slack of the domain
// (csrc/kernels/placement.cu, quota_placement_solve_kernel): a fast path with a retry ladder first,
// then a coarse bisection and a four-probe search. Each source rank then splits its tokens for an
// expert across the expert's instances in proportion to their quotas. Replica weights are
// synchronised from the home GPU before the dispatch (weight_sync), tokens travel straight to the
// replica on the EP backend (UltraEP's SM/TMA streaming kernels), and in backward the replicas'
// weight gradients go back to the masters in the training's gradient precision (grad_reduce). See
// docs/balancers.md (UltraEP).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/config/config_map.hpp"
#include "sim/hardware/dtype.hpp"

namespace epsim {

/// update_placement + reroute in UltraEP's README table (EP64, 256 experts, 1.51 imbalance:
/// 0.067 ms + 0.039 ms), rounded to whole microseconds. A constant so that runs are reproducible.
constexpr double kUltraEpDefaultPlannerTimeUs = 106.0;

/// Defaults are UltraEP's own (README / ultra_ep tuning, ULTRA_EP_* environment variables).
struct UltraEpParams {
  int spare_slots_per_gpu = 2;          ///< num_local_redundant_experts R (README: 4 master + 2 redundant)
  double balance_threshold = 1.0;       ///< ULTRA_EP_BALANCE_THRESHOLD: search floor = ceil(mean * max(this, 1))
  double oracle_eps = 0.01;             ///< ULTRA_EP_QUOTA_ORACLE_EPS: fast path starts at ceil(floor * (1 + eps))
  /// ULTRA_EP_QUOTA_MIN_TOKENS_PER_REPLICA: the smallest quota of a copy in the search after the fast
  /// path (the fast path uses ceil(need / feasible targets) instead).
  std::int64_t min_tokens_per_replica = 1024;
  bool allow_zero_master_quota = false;  ///< ULTRA_EP_QUOTA_ALLOW_ZERO_MASTER_QUOTA
  bool locality_aware = true;            ///< ULTRA_EP_QUOTA_LOCALITY_AWARE
  double planner_time_us = kUltraEpDefaultPlannerTimeUs;  ///< GPU time before the dispatch, every GPU
  /// Number format of the replicas' weight gradients that grad_reduce sends to the masters (the
  /// Manager's grad_dtype; FP32 in UltraEP's README, as Megatron-LM's main gradients).
  Dtype grad_dtype = Dtype::fp32;
};

/// The kernel's fixed constants (csrc/kernels/placement.cu).
constexpr int kUltraEpFastRetries = 2;  ///< QUOTA_ORACLE_FAST_MAX_RETRY: the fast path tries 1 + this caps
constexpr int kUltraEpProbes = 4;       ///< QUOTA_SOLVER_WARPS: caps probed at once in the search

/// One quota export: `tokens` of `expert` computed by a new copy on `gpu` (global index).
struct UltraEpMove {
  int expert = 0;
  int gpu = 0;
  std::int64_t tokens = 0;
};

/// Which part of the search settled the cap.
enum class UltraEpSearch {
  none,      ///< no spare slots or a one-GPU domain: nothing can move
  fast,      ///< the fast path (try `fast_tries`)
  precheck,  ///< the smallest cap with enough total slack, tried once with the static floor
  probes,    ///< the four-probe search
};

/// The result of one NVLink domain's quota search.
struct UltraEpDomainQuotas {
  std::int64_t threshold = 0;  ///< the cap T accepted (the domain's max rank load when nothing moves)
  std::vector<UltraEpMove> moves;  ///< in the order the oracle made them; (expert, gpu) pairs unique
  UltraEpSearch search = UltraEpSearch::none;
  int fast_tries = 0;  ///< caps the fast path tried (1 to 1 + kUltraEpFastRetries)
};

/// The quota search for the domain of GPUs [first_gpu, first_gpu + num_domain_gpus), as UltraEP's
/// kernel does it. `expert_load[e]` is l_e for every expert, `home[e]` its home GPU; only experts
/// whose home is in the domain count. Rank loads L_r count master experts only.
///   lo = ceil(mean * max(balance_threshold, 1)) and hi = max(max_r L_r, lo), in single precision
///   as the kernel computes them.
///   Fast path, floor ceil(need / feasible targets): T = max(ceil(lo * (1 + oracle_eps)), lo); if
///   the oracle fails, T += max(1, ceil(hi / 100)) (capped at hi), at most kUltraEpFastRetries times.
///   Otherwise, with the static floor min_tokens_per_replica: the smallest T in [lo, hi] whose total
///   slack covers the total excess (bisection) is tried once; if it fails, [T + 1, hi] is searched
///   with kUltraEpProbes probes per round (lo + range * (w + 1) / 5, or lo .. lo + 3 once the range is
///   at most 4), keeping the first feasible probe, until lo == hi. hi needs no moves.
/// Oracle for T (reject if the total excess exceeds the total slack): sources by descending load
/// (ties: lower GPU), each one's master experts by descending load (ties: lower id); while the
/// source is above T and the expert has exportable tokens (all but one unless
/// allow_zero_master_quota), the target is the rank with the largest slack (ties: lower GPU) that
/// has slack, a free slot and no copy of the expert, among those whose q = min(need, slack,
/// exportable) reaches the floor; without one the source goes on to its next expert. T is
/// feasible when every source gets down to T.
UltraEpDomainQuotas ultraep_domain_quotas(const std::vector<std::int64_t>& expert_load, const std::vector<int>& home,
                                          int first_gpu, int num_domain_gpus, const UltraEpParams& params);

class UltraEp : public Balancer {
 public:
  explicit UltraEp(UltraEpParams params);
  ~UltraEp() override;
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;
  /// Whether plan() may split an expert's tokens four sources at a time where the CPU has AVX2 (on by
  /// default). The plans are the same either way; turned off, the one-source path runs on any CPU,
  /// which is how the tests check it on machines that have AVX2.
  void use_vector_split(bool on) { vector_split_ = on; }
  /// Records of each layer that run before the balancer's steady-state plan: none, it plans every
  /// record from that record's own counts.

 private:
  struct Workspace;
  UltraEpParams params_;
  bool vector_split_ = true;
  std::unique_ptr<Workspace> work_;  ///< plan()'s buffers, kept between calls
};

/// Reads spare_slots_per_gpu, balance_threshold, oracle_eps, min_tokens_per_replica,
/// allow_zero_master_quota, locality_aware, planner_time_us, grad_dtype (all optional);
/// the caller's finish() rejects any other key.
std::unique_ptr<Balancer> make_ultraep(ConfigMap& params);

}  // namespace epsim

// MicroMoE / FineMoE (arXiv 2511.16947): every micro-batch, on the exact counts, tokens are scheduled
// across the replicas of their expert so that the most loaded GPU computes as little as possible. The
// paper's LP, replica placement and solver are not public; this is our documented stand-in:
//   replicas placed ahead of time by a fixed ring layout (`redundant_per_gpu` per GPU), and per
//   micro-batch the LP   min z  s.t.  sum of tokens on GPU g <= z (every g),
//                        sum over instances r of e of x[s,e,r] = c[s][e] (every s, e),  x >= 0,
//   solved by GLPK's simplex, then (optionally) a second LP that keeps z at its optimum and
//   minimizes the tokens that leave their source GPU (those leaving the node weigh more), then a
//   deterministic rounding to whole tokens that keeps every c[s][e]. Tokens travel on the EP backend.
// See docs/balancers.md (MicroMoE).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

/// Host time of the planner for the GLM-5-like case (EP=8, 128 experts, 2 replicas per GPU, 4096
/// tokens per rank, top-8): median CPU time of BM_MicroMoePlan/8/2 in tests/bench/micromoe_lp_bench.cpp
/// (both GLPK solves + rounding + the plan: 434-444 us on 2 shared 2.1 GHz cores), rounded up to
/// 10 us. A constant, not a run-time measurement, so that every run of a plan is reproducible.
constexpr double kMicroMoeDefaultPlannerTimeUs = 450.0;

struct MicroMoeParams {
  int redundant_per_gpu = 2;             ///< replica slots per GPU (capped at the experts not at home)
  bool minimize_traffic = true;          ///< the second, lexicographic LP on moved tokens
  double internode_traffic_weight = 4.0;  ///< a moved token that leaves its node counts this much (vs 1)
  double planner_time_us = kMicroMoeDefaultPlannerTimeUs;  ///< host time before the dispatch, per node
};

/// The fixed replica layout: per GPU, the experts it holds a replica of, by slot. Slot j of GPU g
/// (d = j mod (N-1), m = j / (N-1)) holds the ((m + g) mod E_loc)-th expert (ascending ids) of home GPU
/// (g - 1 - d) mod N: the first N-1 slots take one expert from each other GPU, nearest in the ring
/// first. R is capped at E - E_loc (every foreign expert once); one GPU gives no replicas.
std::vector<std::vector<int>> micromoe_replica_layout(int num_experts, int num_gpus, int redundant_per_gpu,
                                                      Placement placement);

/// The schedule of one micro-batch: `split[s * E + e][r]` = tokens of c[s][e] computed by the r-th
/// instance of e (instance GPUs as in `gpus_of[e]`, the home first).
struct MicroMoeSchedule {
  double lp_max_load = 0;  ///< z at the LP optimum (before rounding)
  std::vector<std::vector<std::int64_t>> split;
};

/// Solves the LP(s) and rounds: per (s, e), floor each instance's share and give the leftover tokens
/// to the largest fractional parts (ties: lower instance). Throws std::logic_error if GLPK fails.
MicroMoeSchedule micromoe_schedule(const TraceRecord& record, int num_gpus, int num_experts, int gpus_per_node,
                                   const std::vector<std::vector<int>>& gpus_of, const MicroMoeParams& params);

class MicroMoe : public Balancer {
 public:
  explicit MicroMoe(MicroMoeParams params) : params_(params) {}
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  MicroMoeParams params_;
};

/// Reads redundant_per_gpu, minimize_traffic, internode_traffic_weight and planner_time_us (all
/// optional); the caller's finish() rejects any other key.
std::unique_ptr<Balancer> make_micromoe(ConfigMap& params);

}  // namespace epsim

// MicroMoE / FineMoE (arXiv 2511.16947): every micro-batch, on the exact counts, tokens are scheduled
// across the replicas of their expert so that the most loaded GPU computes as little as possible. The
// paper's replica placement, LP and solver are not public; what this model does (docs/balancers.md):
//   replicas placed ahead of time by a fixed ring layout, `redundant_per_gpu` per GPU (default E/N:
//   every expert has one replica, twice the expert weights in HBM), and per micro-batch the LP
//                        min z  s.t.  sum of tokens on GPU g <= z (every g),
//                        sum over instances r of e of x[s,e,r] = c[s][e] (every s, e),  x >= 0,
//   solved exactly in whole tokens as a parametric max-flow on expert loads (micromoe_flow.hpp), or
//   with GLPK's simplex (`solver: lp`, with a second LP minimising moved tokens, then rounding).
//   Replicas' weights are synchronised from their home expert and their weight gradients reduced to
//   it (in the gradient precision) once per optimizer step. Tokens travel on the EP backend.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

/// Host time of the planner for the GLM-5-like case (EP=8, 128 experts, one replica of every expert,
/// 4096 tokens per rank, top-8): median CPU time of BM_PlannerMicroMoe/8 in
/// tests/bench/planner_bench.cpp (flow solver, split by source and the plan), rounded up to 10 us, as
/// first measured; the solver has since become faster (docs/balancers.md, "Planner time") and the
/// default is kept so that results stay comparable. A constant, not a run-time measurement, so that
/// every run of a plan is reproducible.
constexpr double kMicroMoeDefaultPlannerTimeUs = 200.0;

enum class MicroMoeSolver {
  flow,  ///< exact min-max in whole tokens by parametric max-flow; moved tokens kept low, not minimal
  lp,    ///< GLPK simplex on the fractional LP, optional second LP on moved tokens, then rounding
};

struct MicroMoeParams {
  int redundant_per_gpu = -1;            ///< replica slots per GPU (capped at the experts not at home); -1: E/N
  MicroMoeSolver solver = MicroMoeSolver::flow;
  bool minimize_traffic = true;          ///< `lp` only: the second, lexicographic LP on moved tokens
  double internode_traffic_weight = 4.0;  ///< a moved token that leaves its node counts this much (vs 1)
  double planner_time_us = kMicroMoeDefaultPlannerTimeUs;  ///< host time before the dispatch, per node
  bool sync = true;              ///< charge replica weight and gradient synchronisation once per step
  int grad_bytes_per_param = 0;  ///< bytes per parameter of the replicas' gradient reduce (YAML gradient_dtype); 0: dtype_bytes
};

/// Replica slots per GPU that `params` asks for on E experts and N GPUs (-1: E/N).
int micromoe_redundant_per_gpu(const MicroMoeParams& params, int num_experts, int num_gpus);

/// The fixed replica layout: per GPU, the experts it holds a replica of, by slot. Slot j of GPU g
/// (d = j mod (N-1), m = j / (N-1)) holds the ((m + g) mod E_loc)-th expert (ascending ids) of home GPU
/// (g - 1 - d) mod N: the first N-1 slots take one expert from each other GPU, nearest in the ring
/// first. R is capped at E - E_loc (every foreign expert once); one GPU gives no replicas.
std::vector<std::vector<int>> micromoe_replica_layout(int num_experts, int num_gpus, int redundant_per_gpu,
                                                      Placement placement);

/// The schedule of one micro-batch, one row of instance columns per source: the r-th instance of e
/// (instance GPUs as in `gpus_of[e]`, the home first) is column first_column[e] + r, and
/// tokens(s, column) is how many of c[s][e] it computes. One block for all rows: a wide EP degree has
/// tens of thousands of (source, expert) pairs, each with a handful of instances.
struct MicroMoeSchedule {
  double lp_max_load = 0;  ///< z at the optimum (flow: whole tokens; lp: the LP's, before rounding)
  std::vector<int> first_column;      ///< E + 1 entries, the last one the number of columns
  std::vector<std::int64_t> split;    ///< row-major sources x columns

  int columns() const { return first_column.empty() ? 0 : first_column.back(); }
  /// Source s's row: its column first_column[e] + r is the r-th instance of e.
  const std::int64_t* row(int s) const { return split.data() + static_cast<std::size_t>(s) * columns(); }
  std::int64_t* row(int s) { return split.data() + static_cast<std::size_t>(s) * columns(); }
};

/// Schedules one micro-batch with `params.solver`. flow: the exact integer optimum, then each expert's
/// instance totals split over its sources own GPU first, then node, then the rest. lp: solves the
/// LP(s) and rounds: per (s, e), floor each instance's share and give the leftover tokens to the
/// largest fractional parts (ties: lower instance); throws std::logic_error if GLPK fails.
MicroMoeSchedule micromoe_schedule(const TraceRecord& record, int num_gpus, int num_experts, int gpus_per_node,
                                   const std::vector<std::vector<int>>& gpus_of, const MicroMoeParams& params);

class MicroMoe : public Balancer {
 public:
  explicit MicroMoe(MicroMoeParams params) : params_(params) {}
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  MicroMoeParams params_;
};

/// Reads redundant_per_gpu, solver, minimize_traffic, internode_traffic_weight, planner_time_us, sync
/// and gradient_dtype (all optional); the caller's finish() rejects any other key.
std::unique_ptr<Balancer> make_micromoe(ConfigMap& params);

}  // namespace epsim

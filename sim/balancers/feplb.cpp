#include "sim/balancers/feplb.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

#include "sim/balancers/placement.hpp"

namespace epsim {

namespace {

/// Tokens of one expert computed on a receiver GPU (global index) instead of at home.
struct Piece {
  int receiver;
  std::int64_t tokens;
};

/// Runs the scheduler node by node; pieces[e] lists expert e's dynamic pieces by receiver GPU.
std::vector<std::vector<Piece>> schedule_all_nodes(const FeplbScheduler& scheduler,
                                                   const std::vector<std::int64_t>& load, const std::vector<int>& home,
                                                   int num_gpus, int gpus_per_node) {
  const int experts = static_cast<int>(load.size());
  std::vector<std::vector<Piece>> pieces(experts);
  for (int first = 0; first < num_gpus; first += gpus_per_node) {
    const int node_gpus = std::min(gpus_per_node, num_gpus - first);
    std::vector<std::vector<HomeExpert>> home_experts(node_gpus);
    for (int e = 0; e < experts; ++e)
      if (home[e] >= first && home[e] < first + node_gpus) home_experts[home[e] - first].push_back({e, load[e]});
    for (const DynamicMove& m : scheduler.schedule(home_experts))
      pieces[m.expert].push_back({first + m.receiver, m.tokens});
  }
  for (auto& p : pieces)
    std::sort(p.begin(), p.end(), [](const Piece& a, const Piece& b) { return a.receiver < b.receiver; });
  return pieces;
}

}  // namespace

Plan Feplb::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  // A bug in the caller, not bad input; checked always because a zero would loop forever.
  if (context.gpus_per_node <= 0) throw std::logic_error("feplb: gpus_per_node must be positive");
  std::vector<std::int64_t> load(experts, 0);
  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) {
    home[e] = home_gpu(e, experts, n, context.placement);
    for (int s = 0; s < n; ++s) load[e] += record.count(s, e, experts);
  }
  const std::vector<std::vector<Piece>> pieces = schedule_all_nodes(scheduler_, load, home, n, context.gpus_per_node);

  Plan plan = start_plan("feplb", record, n);
  plan.planner.site = PlannerSite::host_cpu;
  plan.planner.start = PlannerStart::after_dispatch;
  plan.planner.duration_ps = us_to_ps(params_.planner_time_us);
  // The whole count matrix as int32 reaches each node's host, as the engine's D2H copy models it.
  plan.planner.d2h_bytes = static_cast<std::int64_t>(n) * experts * 4;
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});
  // Instance e is expert e's home copy, as in static EP, so a plan without moves is static EP's.
  for (int e = 0; e < experts; ++e) {
    plan.instances.push_back({e, home[e], InstanceKind::static_expert});
    plan.gemm_order[home[e]].front().instances.push_back(e);
  }

  // Moved tokens come off the home GPU's count source rank by source rank, lowest rank first, piece
  // by piece in receiver order; the home instance keeps what is left.
  std::vector<std::int64_t> keep(static_cast<std::size_t>(n) * experts);
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) keep[static_cast<std::size_t>(s) * experts + e] = record.count(s, e, experts);
  std::vector<TokenRoute> dynamic_routes;
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  for (int e = 0; e < experts; ++e) {
    int s = 0;
    for (const Piece& piece : pieces[e]) {
      const int inst = static_cast<int>(plan.instances.size());
      plan.instances.push_back({e, piece.receiver, InstanceKind::dynamic_expert});
      if (plan.gemm_order[piece.receiver].size() < 2)
        plan.gemm_order[piece.receiver].push_back(GemmGroup{piece.receiver, {}});
      plan.gemm_order[piece.receiver][1].instances.push_back(inst);
      // Gradients travel in the weights' dtype, so both directions move expert_weight_bytes().
      plan.transfers.push_back({TransferKind::weights, PassKind::forward, inst, home[e], piece.receiver, weight_bytes,
                                Carrier::copy_engine});
      plan.transfers.push_back({TransferKind::gradients, PassKind::backward, inst, piece.receiver, home[e],
                                weight_bytes, Carrier::copy_engine});
      std::int64_t need = piece.tokens;
      while (need > 0) {
        std::int64_t& left = keep[static_cast<std::size_t>(s) * experts + e];
        if (left == 0) {
          ++s;
          continue;
        }
        const std::int64_t take = std::min(need, left);
        dynamic_routes.push_back({s, inst, take, Carrier::copy_engine, home[e], 0});
        left -= take;
        need -= take;
      }
    }
  }
  // Home routes first, in static EP's (source, expert) order, then the two-phase routes. Reserved
  // up front: regrowing them cost about 40 times the rest of plan() at EP=16 (feplb_planner_bench.cpp).
  plan.routes.reserve(
      static_cast<std::size_t>(std::count_if(keep.begin(), keep.end(), [](std::int64_t c) { return c > 0; })) +
      dynamic_routes.size());
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      const std::int64_t c = keep[static_cast<std::size_t>(s) * experts + e];
      if (c == 0) continue;
      plan.routes.push_back({s, e, c, home[e] == s ? Carrier::none : Carrier::ep_backend});
    }
  }
  plan.routes.insert(plan.routes.end(), dynamic_routes.begin(), dynamic_routes.end());
  return plan;
}

std::unique_ptr<Balancer> make_feplb(ConfigMap& params) {
  constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();
  FeplbParams p;
  p.scheduler.dynamic_experts_per_gpu =
      static_cast<int>(params.get_int_or("dynamic_experts_per_gpu", p.scheduler.dynamic_experts_per_gpu, 0, kMaxCount));
  p.scheduler.dynamic_slots_per_gpu =
      static_cast<int>(params.get_int_or("dynamic_slots_per_gpu", p.scheduler.dynamic_slots_per_gpu, 0, kMaxCount));
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  return std::make_unique<Feplb>(p);
}

}  // namespace epsim

#include "sim/balancers/feplb.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "sim/balancers/placement.hpp"

namespace epsim {

namespace {

/// Tokens of one expert computed on a receiver GPU (global index) instead of at home.
struct Piece {
  int receiver;
  std::int64_t tokens;
};

/// What the node schedulers decided: per expert, whether it is dynamic and its pieces by receiver.
struct Schedule {
  std::vector<char> dynamic;
  std::vector<std::vector<Piece>> pieces;
};

/// Runs the scheduler node by node.
Schedule schedule_all_nodes(const FeplbScheduler& scheduler, const std::vector<std::int64_t>& load,
                            const std::vector<int>& home, int num_gpus, int gpus_per_node) {
  const int experts = static_cast<int>(load.size());
  Schedule out;
  out.dynamic.assign(experts, 0);
  out.pieces.assign(experts, {});
  for (int first = 0; first < num_gpus; first += gpus_per_node) {
    const int node_gpus = std::min(gpus_per_node, num_gpus - first);
    std::vector<std::vector<HomeExpert>> home_experts(node_gpus);
    for (int e = 0; e < experts; ++e)
      if (home[e] >= first && home[e] < first + node_gpus) home_experts[home[e] - first].push_back({e, load[e]});
    for (const auto& list : scheduler.dynamic_experts(home_experts))
      for (const HomeExpert& h : list) out.dynamic[h.expert] = 1;
    for (const DynamicMove& m : scheduler.schedule(home_experts))
      out.pieces[m.expert].push_back({first + m.receiver, m.tokens});
  }
  for (auto& p : out.pieces)
    std::sort(p.begin(), p.end(), [](const Piece& a, const Piece& b) { return a.receiver < b.receiver; });
  return out;
}

}  // namespace

std::int64_t feplb_gradient_bytes(const ModelSpec& model, Dtype dtype) {
  const std::int64_t parameters =
      static_cast<std::int64_t>(model.matrices_per_expert()) * model.hidden_size * model.expert_ffn_size;
  return parameters * element_bytes(dtype);
}

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
  const Schedule schedule = schedule_all_nodes(scheduler_, load, home, n, context.gpus_per_node);

  Plan plan = start_plan("feplb", record, n);
  plan.planner.site = PlannerSite::host_cpu;
  plan.planner.start = PlannerStart::after_dispatch;
  plan.planner.duration_ps = us_to_ps(params_.planner_time_us);
  // The whole count matrix as int32 reaches each node's host, as the engine's D2H copy models it.
  plan.planner.d2h_bytes = static_cast<std::int64_t>(n) * experts * 4;
  // Per GPU, up to three grouped GEMMs in this order:
  //   static: its static experts, launched once its dispatch is done, while the host plans;
  //   dynamic at home: what its dynamic experts keep at home (all of an expert that stays, the home
  //     share of a split one, nothing of one moved whole): its rows are known only once the planner
  //     has decided, so it waits for it;
  //   moved in: the dynamic experts it computes for its peers, launched as soon as their tokens and
  //     weights have arrived, ahead of its own groups not started yet, since the home GPUs cannot
  //     combine before these outputs are back.
  std::vector<GemmGroup> static_group(n), home_dynamic(n), moved_in(n);
  for (int g = 0; g < n; ++g) {
    static_group[g].gpu = home_dynamic[g].gpu = moved_in[g].gpu = g;
    home_dynamic[g].after_planner = true;
    moved_in[g].after_planner = true;
    moved_in[g].on_arrival = true;
  }
  // Instance e is expert e's home copy, as in static EP.
  for (int e = 0; e < experts; ++e) {
    plan.instances.push_back({e, home[e], InstanceKind::static_expert});
    (schedule.dynamic[e] ? home_dynamic : static_group)[home[e]].instances.push_back(e);
  }

  // Moved tokens come off the home GPU's count source rank by source rank, lowest rank first, piece
  // by piece in receiver order; the home instance keeps what is left.
  std::vector<std::int64_t> keep(static_cast<std::size_t>(n) * experts);
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) keep[static_cast<std::size_t>(s) * experts + e] = record.count(s, e, experts);
  std::vector<TokenRoute> dynamic_routes;
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  const std::int64_t gradient_bytes = feplb_gradient_bytes(*context.model, params_.gradient_dtype);
  for (int e = 0; e < experts; ++e) {
    int s = 0;
    for (const Piece& piece : schedule.pieces[e]) {
      const int inst = static_cast<int>(plan.instances.size());
      plan.instances.push_back({e, piece.receiver, InstanceKind::dynamic_expert});
      moved_in[piece.receiver].instances.push_back(inst);
      // Weights go out once the planner has decided; the receiver's weight gradients come back in the
      // training's gradient precision after its weight-gradient GEMM, for the home GPU to sum.
      plan.transfers.push_back({TransferKind::weights, PassKind::forward, Carrier::copy_engine,
                                TransferStart::after_dispatch, inst, home[e], piece.receiver, weight_bytes});
      plan.transfers.push_back({TransferKind::gradients, PassKind::backward, Carrier::copy_engine,
                                TransferStart::after_dispatch, inst, piece.receiver, home[e], gradient_bytes});
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
      plan.routes.push_back({s, e, c, home[e] == s ? Carrier::none : Carrier::ep_backend, -1, 0});
    }
  }
  plan.routes.insert(plan.routes.end(), dynamic_routes.begin(), dynamic_routes.end());
  for (int g = 0; g < n; ++g) {
    // An empty static group would be a kernel launch for nothing (all of a GPU's experts dynamic).
    if (!static_group[g].instances.empty() || (home_dynamic[g].instances.empty() && moved_in[g].instances.empty()))
      plan.gemm_order[g].push_back(std::move(static_group[g]));
    if (!home_dynamic[g].instances.empty()) plan.gemm_order[g].push_back(std::move(home_dynamic[g]));
    if (!moved_in[g].instances.empty()) plan.gemm_order[g].push_back(std::move(moved_in[g]));
  }
  return plan;
}

std::unique_ptr<Balancer> make_feplb(ConfigMap& params) {
  constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();
  FeplbParams p;
  p.scheduler.dynamic_experts_per_gpu =
      static_cast<int>(params.get_int_or("dynamic_experts_per_gpu", p.scheduler.dynamic_experts_per_gpu, 0, kMaxCount));
  p.scheduler.dynamic_slots_per_gpu =
      static_cast<int>(params.get_int_or("dynamic_slots_per_gpu", p.scheduler.dynamic_slots_per_gpu, 0, kMaxCount));
  const std::string granularity = params.get_choice_or("granularity", "expert", {"expert", "tokens"});
  p.scheduler.granularity = granularity == "expert" ? FeplbGranularity::expert : FeplbGranularity::tokens;
  // A gain of a whole GPU's mean load or more is the largest any move can have.
  p.scheduler.min_gain = params.get_double_or("min_gain", p.scheduler.min_gain, 0, 1);
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  p.gradient_dtype = parse_dtype(params.get_choice_or("gradient_dtype", to_string(p.gradient_dtype), dtype_names()));
  return std::make_unique<Feplb>(p);
}

}  // namespace epsim

#include "sim/balancers/deepseek_eplb.hpp"

#include <algorithm>
#include <limits>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/eplb_algorithm.hpp"
#include "sim/balancers/placement.hpp"

namespace epsim {

DeepseekEplb::DeepseekEplb(DeepseekEplbParams params) : params_(params) {
  if (params_.redundant_experts_per_gpu < 0 || params_.num_groups < 1 || params_.window < 1 || params_.period < 1)
    throw std::logic_error("deepseek_eplb: bad parameters");
}

Plan DeepseekEplb::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  if (context.gpus_per_node <= 0) throw std::logic_error("deepseek_eplb: gpus_per_node must be positive");
  // The EP group fills nodes in order: a group smaller than a node lies inside one node; a larger one
  // that is not a whole number of nodes leaves its last node partly filled, which the hierarchical
  // policy (equal GPUs per node) cannot use.
  const bool whole_nodes = n <= context.gpus_per_node || n % context.gpus_per_node == 0;
  const int nodes = n <= context.gpus_per_node ? 1 : n / context.gpus_per_node;
  if (experts % params_.num_groups != 0)
    throw CannotServe("num_groups " + std::to_string(params_.num_groups) + " must divide the " +
                      std::to_string(experts) + " experts");
  if (params_.policy == EplbPolicy::hierarchical && !whole_nodes)
    throw CannotServe("the hierarchical policy needs an EP group of whole nodes or one inside a node; EP " +
                      std::to_string(n) + " on " + std::to_string(context.gpus_per_node) +
                      "-GPU nodes fills its last node partly (use policy: global)");
  const int num_phy = experts + n * params_.redundant_experts_per_gpu;
  const int slots_per_gpu = num_phy / n;

  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, context.placement);

  LayerState& state = layers_[record.layer];
  // A period begins with every record (records schedule), or when the layer's trace step changes.
  const bool first = state.periods_seen == 0;
  const bool new_period = params_.schedule == EplbSchedule::records || first || record.step != state.step;
  if (new_period) {
    if (!first) {
      state.history.push_back(std::move(state.current));
      if (static_cast<std::int64_t>(state.history.size()) > params_.window) state.history.erase(state.history.begin());
    }
    state.current.assign(experts, 0);
    ++state.periods_seen;
    state.records_in_step = 0;
  }
  state.step = record.step;
  ++state.records_in_step;
  if (params_.schedule == EplbSchedule::steps) records_per_step_ = std::max(records_per_step_, state.records_in_step);
  const std::int64_t period_index = state.periods_seen - 1;

  const std::vector<int> old_phy2log = state.phy2log;
  bool replanned = false;
  if (new_period && period_index > 0 && period_index % params_.period == 0) {
    // The history holds the periods before this one: the plan was made ahead of time.
    std::vector<double> weight(experts, 0.0);
    for (const auto& loads : state.history)
      for (int e = 0; e < experts; ++e) weight[e] += static_cast<double>(loads[e]);
    const bool hierarchical = params_.policy == EplbPolicy::hierarchical ||
                              (params_.policy == EplbPolicy::auto_select && whole_nodes && params_.num_groups > 1 &&
                               params_.num_groups % nodes == 0);
    if (hierarchical && params_.num_groups % nodes != 0)
      throw CannotServe("the hierarchical policy needs num_groups (" + std::to_string(params_.num_groups) +
                        ") to be a multiple of the EP group's nodes (" + std::to_string(nodes) + ")");
    const EplbLayout layout = hierarchical
                                  ? rebalance_experts_hierarchical(weight, num_phy, params_.num_groups, nodes, n)
                                  : rebalance_experts_hierarchical(weight, num_phy, 1, 1, n);
    state.phy2log = layout.phy2log;
    state.steady = period_index >= params_.window;
    replanned = true;
  }
  last_plan_steady_ = state.steady;

  // This record's loads count towards its period's history for later plans.
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) state.current[e] += record.count(s, e, experts);

  Plan plan = start_plan("deepseek_eplb", record, n);
  plan.planner.site = PlannerSite::host_cpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = replanned ? us_to_ps(params_.planner_time_us) : 0;
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});

  // Instances: the static placement (instance e = expert e at home) or the P slots in slot order.
  // An expert's first copy on its home GPU is its static instance, every other copy a replica.
  std::vector<std::vector<int>> replicas(experts);
  std::vector<bool> home_taken(experts, false);
  auto add_instance = [&](int e, int gpu) {
    const int inst = static_cast<int>(plan.instances.size());
    const bool is_home = gpu == home[e] && !home_taken[e];
    if (is_home) home_taken[e] = true;
    plan.instances.push_back({e, gpu, is_home ? InstanceKind::static_expert : InstanceKind::replica});
    plan.gemm_order[gpu].front().instances.push_back(inst);
    replicas[e].push_back(inst);
  };
  if (state.phy2log.empty()) {
    for (int e = 0; e < experts; ++e) add_instance(e, home[e]);
  } else {
    for (int p = 0; p < num_phy; ++p) add_instance(state.phy2log[p], p / slots_per_gpu);
  }

  // Weights of every copy that is new on its GPU come from the home GPU (the owner of the master
  // weights); the home GPU itself always has them. The copies are synchronised before they serve:
  // the record's dispatch waits for them.
  if (replanned) {
    std::set<std::pair<int, int>> before;  // (expert, gpu) pairs of the previous placement
    if (old_phy2log.empty()) {
      for (int e = 0; e < experts; ++e) before.insert({e, home[e]});
    } else {
      for (int p = 0; p < num_phy; ++p) before.insert({old_phy2log[p], p / slots_per_gpu});
    }
    const std::int64_t weight_bytes = context.model->expert_weight_bytes();
    std::set<std::pair<int, int>> sent;
    for (int inst = 0; inst < static_cast<int>(plan.instances.size()); ++inst) {
      const ExpertInstance& i = plan.instances[inst];
      if (i.gpu == home[i.expert] || before.count({i.expert, i.gpu}) || !sent.insert({i.expert, i.gpu}).second)
        continue;
      plan.transfers.push_back({TransferKind::weights, PassKind::forward, Carrier::ep_backend,
                                TransferStart::before_dispatch, inst, home[i.expert], i.gpu, weight_bytes});
    }
  }

  // Even split per source rank; the remainder goes one token each to the replicas starting at
  // position (s mod R) in slot order, so remainders of different ranks land on different replicas.
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      const std::int64_t c = record.count(s, e, experts);
      if (c == 0) continue;
      const int r = static_cast<int>(replicas[e].size());
      const std::int64_t base = c / r;
      const std::int64_t rem = c % r;
      for (int j = 0; j < r; ++j) {
        const std::int64_t t = base + (((j - s % r) + r) % r < rem ? 1 : 0);
        if (t == 0) continue;
        const int inst = replicas[e][j];
        plan.routes.push_back({s, inst, t, plan.instances[inst].gpu == s ? Carrier::none : Carrier::ep_backend, -1, 0});
      }
    }
  }
  return plan;
}

int DeepseekEplb::warmup_periods() const {
  const std::int64_t periods = (static_cast<std::int64_t>(params_.window) + params_.period - 1) / params_.period;
  const std::int64_t first = static_cast<std::int64_t>(params_.period) * std::max<std::int64_t>(1, periods);
  return static_cast<int>(std::min<std::int64_t>(first, std::numeric_limits<int>::max()));
}

int DeepseekEplb::warmup_records() const {
  const std::int64_t per_period = params_.schedule == EplbSchedule::steps ? records_per_step_ : 1;
  return static_cast<int>(std::min<std::int64_t>(warmup_periods() * per_period, std::numeric_limits<int>::max()));
}

std::unique_ptr<Balancer> make_deepseek_eplb(ConfigMap& params) {
  // A billion steps or records bounds the schedule so that its arithmetic stays in range.
  constexpr std::int64_t kMaxCount = 1'000'000'000;
  DeepseekEplbParams p;
  p.redundant_experts_per_gpu =
      static_cast<int>(params.get_int_or("redundant_experts_per_gpu", p.redundant_experts_per_gpu, 0, 1 << 16));
  p.num_groups = static_cast<int>(params.get_int_or("num_groups", p.num_groups, 1, 1 << 16));
  const std::string policy = params.get_choice_or("policy", "auto", {"auto", "hierarchical", "global"});
  p.policy = policy == "hierarchical" ? EplbPolicy::hierarchical
             : policy == "global"     ? EplbPolicy::global
                                      : EplbPolicy::auto_select;
  const bool by_steps = params.has("rebalance_every_steps") || params.has("window_steps");
  const bool by_records = params.has("period") || params.has("window");
  if (by_steps && by_records) {
    const std::string key = params.has("period") ? "period" : "window";
    params.fail(key, key + " sets a schedule in records, rebalance_every_steps and window_steps one in steps: give "
                           "one or the other");
  }
  if (by_records) {
    p.schedule = EplbSchedule::records;
    p.window = static_cast<int>(params.get_int_or("window", 8, 1, kMaxCount));
    p.period = static_cast<int>(params.get_int_or("period", 8, 1, kMaxCount));
  } else {
    p.window = static_cast<int>(params.get_int_or("window_steps", p.window, 1, kMaxCount));
    p.period = static_cast<int>(params.get_int_or("rebalance_every_steps", p.period, 1, kMaxCount));
  }
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  return std::make_unique<DeepseekEplb>(p);
}

}  // namespace epsim

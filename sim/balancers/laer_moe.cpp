#include "sim/balancers/laer_moe.hpp"

#include <algorithm>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "sim/balancers/placement.hpp"

namespace epsim {

namespace {

/// Splits `tokens` over `weights` (copies per location) one weight unit at a time: every unit gets
/// tokens / W, and the tokens % W left over go one each to the units from position (rotation mod W)
/// on, so that different sources leave their remainders on different copies.
std::vector<std::int64_t> split_by_units(std::int64_t tokens, const std::vector<int>& weights, int rotation) {
  const int total = std::accumulate(weights.begin(), weights.end(), 0);
  std::vector<std::int64_t> out(weights.size(), 0);
  const std::int64_t base = tokens / total;
  const std::int64_t rem = tokens % total;
  int unit = 0;
  for (std::size_t i = 0; i < weights.size(); ++i) {
    for (int k = 0; k < weights[i]; ++k, ++unit)
      out[i] += base + ((unit - rotation % total + total) % total < rem ? 1 : 0);
  }
  return out;
}

/// The copies of expert e a source on `node` sends to: its own node's, or all when the node has none.
std::vector<std::pair<int, int>> targets(const std::vector<int>& copies_of_e, int node, int gpus_per_node) {
  std::vector<std::pair<int, int>> local, all;
  for (int g = 0; g < static_cast<int>(copies_of_e.size()); ++g) {
    if (copies_of_e[g] == 0) continue;
    all.push_back({g, copies_of_e[g]});
    if (g / gpus_per_node == node) local.push_back({g, copies_of_e[g]});
  }
  return local.empty() ? all : local;
}

}  // namespace

std::vector<int> laer_precise_replicas(const std::vector<double>& loads, int devices, int capacity, int nodes) {
  const int experts = static_cast<int>(loads.size());
  const std::int64_t total = static_cast<std::int64_t>(devices) * capacity;
  if (total < experts) throw std::invalid_argument("laer_moe: fewer expert slots than experts");
  const bool per_node = static_cast<std::int64_t>(nodes) * experts <= total;
  std::vector<int> replicas(experts, per_node ? nodes : 1);
  std::vector<bool> active(experts, true);
  std::int64_t used = static_cast<std::int64_t>(experts) * (per_node ? nodes : 1);
  while (used < total) {
    int best = -1;
    for (int e = 0; e < experts; ++e)
      if (active[e] && (best < 0 || loads[e] / replicas[e] > loads[best] / replicas[best])) best = e;
    if (best < 0) break;  // every expert is frozen: the leftover slots stay empty
    if (replicas[best] >= nodes) {
      if (used + nodes <= total) {
        replicas[best] += nodes;
        used += nodes;
      } else {
        active[best] = false;  // the source pops it for good
      }
    } else {
      ++replicas[best];
      ++used;
    }
  }
  return replicas;
}

LaerLayout laer_greedy_placement(const std::vector<int>& replicas, const std::vector<double>& loads, int devices,
                                 int gpus_per_node, int capacity) {
  const int experts = static_cast<int>(loads.size());
  const int nodes = std::max(1, (devices + gpus_per_node - 1) / gpus_per_node);
  struct Item {
    int expert;
    double load;
  };
  std::vector<Item> items;
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < replicas[e]; ++r) items.push_back({e, loads[e] / replicas[e]});
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) { return a.load > b.load; });
  LaerLayout copies(experts, std::vector<int>(devices, 0));
  std::vector<int> used(devices, 0);
  std::vector<double> device_load(devices, 0.0);
  for (const Item& item : items) {
    std::vector<int> per_node(nodes, 0);
    for (int g = 0; g < devices; ++g) per_node[g / gpus_per_node] += copies[item.expert][g];
    const int fewest = *std::min_element(per_node.begin(), per_node.end());
    int best = -1, best_any = -1;
    for (int g = 0; g < devices; ++g) {
      if (used[g] >= capacity) continue;
      if (best_any < 0 || device_load[g] < device_load[best_any]) best_any = g;
      if (per_node[g / gpus_per_node] == fewest && (best < 0 || device_load[g] < device_load[best])) best = g;
    }
    if (best < 0) best = best_any;
    if (best < 0) throw std::runtime_error("laer_moe: no more capacity");
    ++copies[item.expert][best];
    ++used[best];
    device_load[best] += item.load;
  }
  return copies;
}

double laer_layout_cost(const std::vector<std::vector<double>>& tokens, const LaerLayout& layout, int gpus_per_node,
                        const LaerCostModel& cost) {
  const int devices = static_cast<int>(tokens.size());
  const int experts = static_cast<int>(layout.size());
  double comm_sum = 0;
  std::vector<double> comp(devices, 0.0);
  for (int s = 0; s < devices; ++s) {
    for (int e = 0; e < experts; ++e) {
      const double t = tokens[s][e];
      if (t == 0) continue;
      const auto to = targets(layout[e], s / gpus_per_node, gpus_per_node);
      int units = 0;
      for (const auto& [g, w] : to) units += w;
      if (units == 0) continue;
      for (const auto& [g, w] : to) {
        const double share = t * w / units;
        const double bw = g == s ? 1e9 : (g / gpus_per_node == s / gpus_per_node ? cost.intra_GBps : cost.inter_GBps);
        comm_sum += cost.token_bytes * share * 1e-9 / bw;
        comp[g] += share * cost.comp_s_per_token;
      }
    }
  }
  const double max_comp = devices > 0 ? *std::max_element(comp.begin(), comp.end()) : 0.0;
  return 4 * comm_sum + (3 + (cost.checkpoint ? 1 : 0)) * max_comp;
}

LaerLayout laer_plan_layout(const std::vector<std::vector<double>>& tokens, int capacity, int gpus_per_node,
                            const LaerCostModel& cost) {
  const int devices = static_cast<int>(tokens.size());
  const int experts = devices > 0 ? static_cast<int>(tokens[0].size()) : 0;
  const int nodes = std::max(1, (devices + gpus_per_node - 1) / gpus_per_node);
  std::vector<double> loads(experts, 0.0);
  for (const auto& row : tokens)
    for (int e = 0; e < experts; ++e) loads[e] += row[e];
  std::vector<std::vector<int>> candidates;
  if ((static_cast<std::int64_t>(capacity) * devices) % experts == 0)
    candidates.push_back(
        std::vector<int>(experts, static_cast<int>(static_cast<std::int64_t>(capacity) * devices / experts)));
  candidates.push_back(laer_precise_replicas(loads, devices, capacity, nodes));
  LaerLayout best;
  double best_cost = std::numeric_limits<double>::max();
  for (const auto& replicas : candidates) {
    LaerLayout layout;
    try {
      layout = laer_greedy_placement(replicas, loads, devices, gpus_per_node, capacity);
    } catch (const std::runtime_error&) {
      continue;  // as in the source: an infeasible candidate is skipped
    }
    const double c = laer_layout_cost(tokens, layout, gpus_per_node, cost);
    if (c < best_cost) {
      best_cost = c;
      best = std::move(layout);
    }
  }
  if (best.empty()) throw std::runtime_error("laer_moe: no valid placement found");
  return best;
}

LaerMoe::LaerMoe(LaerMoeParams params) : params_(params) {
  if (params_.capacity_per_gpu < 0 || params_.window < 1 || params_.period < 1)
    throw std::logic_error("laer_moe: bad parameters");
}

Plan LaerMoe::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  const int gpn = context.gpus_per_node;
  if (gpn <= 0) throw std::logic_error("laer_moe: gpus_per_node must be positive");
  const int capacity = params_.capacity_per_gpu > 0 ? params_.capacity_per_gpu : experts / n + 1;
  if (static_cast<std::int64_t>(capacity) * n < experts)
    throw std::invalid_argument("laer_moe: capacity_per_gpu x GPUs must be at least the expert count");

  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, context.placement);
  LaerLayout static_layout(experts, std::vector<int>(n, 0));
  for (int e = 0; e < experts; ++e) static_layout[e][home[e]] = 1;

  LayerState& state = layers_[record.layer];
  const LaerLayout before = state.layout.empty() ? static_layout : state.layout;
  bool replanned = false;
  if (state.records_seen > 0 && state.records_seen % params_.period == 0) {
    std::vector<std::vector<double>> tokens(n, std::vector<double>(experts, 0.0));
    for (const auto& counts : state.history)
      for (int s = 0; s < n; ++s)
        for (int e = 0; e < experts; ++e)
          tokens[s][e] += static_cast<double>(counts[static_cast<std::size_t>(s) * experts + e]);
    LaerCostModel cost;
    cost.token_bytes = static_cast<double>(context.model->token_bytes());
    cost.comp_s_per_token = params_.comp_us_per_token > 0 ? params_.comp_us_per_token * 1e-6
                                                          : context.model->expert_flops_per_token() /
                                                                (context.hardware->gpu.bf16_peak_TFLOPs * 1e12);
    cost.intra_GBps = params_.intra_GBps > 0 ? params_.intra_GBps : context.hardware->nvlink.port_bw_GBps;
    cost.inter_GBps = params_.inter_GBps > 0 ? params_.inter_GBps : context.hardware->infiniband.nic_bw_GBps;
    cost.checkpoint = params_.checkpoint;
    state.layout = laer_plan_layout(tokens, capacity, gpn, cost);
    replanned = true;
  }
  std::vector<std::int64_t> counts(static_cast<std::size_t>(n) * experts);
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) counts[static_cast<std::size_t>(s) * experts + e] = record.count(s, e, experts);
  state.history.push_back(std::move(counts));
  if (static_cast<int>(state.history.size()) > params_.window) state.history.erase(state.history.begin());
  ++state.records_seen;
  const LaerLayout& layout = state.layout.empty() ? static_layout : state.layout;

  Plan plan = start_plan("laer_moe", record, n);
  plan.planner.site = PlannerSite::host_cpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = replanned ? us_to_ps(params_.planner_time_us) : 0;
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});

  // One instance per (GPU, expert) with copies, GPU by GPU; copies of one expert on one GPU are one
  // instance (same weights) that takes a proportional share of the tokens.
  std::vector<std::vector<int>> instance_of(experts, std::vector<int>(n, -1));
  std::vector<int> copies_total(experts, 0);
  for (int g = 0; g < n; ++g) {
    for (int e = 0; e < experts; ++e) {
      if (layout[e][g] == 0) continue;
      const int inst = static_cast<int>(plan.instances.size());
      instance_of[e][g] = inst;
      copies_total[e] += layout[e][g];
      plan.instances.push_back({e, g, g == home[e] ? InstanceKind::static_expert : InstanceKind::replica});
      plan.gemm_order[g].front().instances.push_back(inst);
    }
  }

  // FSEP traffic: a restored copy gathers its shards (bytes / N from every other GPU); a copy's
  // gradients are reduce-scattered to the shard owners.
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  auto shard = [&](int h) { return weight_bytes / n + (h < weight_bytes % n ? 1 : 0); };
  for (int inst = 0; inst < static_cast<int>(plan.instances.size()); ++inst) {
    const int e = plan.instances[inst].expert;
    const int g = plan.instances[inst].gpu;
    const bool gather = params_.traffic == LaerTraffic::always || (replanned && before[e][g] == 0);
    const bool reduce = params_.traffic == LaerTraffic::always || copies_total[e] > 1;
    for (int h = 0; h < n; ++h) {
      if (h == g || shard(h) == 0) continue;
      if (gather)
        plan.transfers.push_back({TransferKind::weights, PassKind::forward, inst, h, g, shard(h), Carrier::ep_backend});
      if (reduce)
        plan.transfers.push_back(
            {TransferKind::gradients, PassKind::backward, inst, g, h, shard(h), Carrier::ep_backend});
    }
  }

  // Routes: each source splits its tokens for e over the copies in its own node (by multiplicity),
  // or over all copies when its node has none.
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      const std::int64_t c = record.count(s, e, experts);
      if (c == 0) continue;
      const auto to = targets(layout[e], s / gpn, gpn);
      std::vector<int> weights;
      for (const auto& [g, w] : to) weights.push_back(w);
      const std::vector<std::int64_t> share = split_by_units(c, weights, s);
      for (std::size_t i = 0; i < to.size(); ++i) {
        if (share[i] == 0) continue;
        const int g = to[i].first;
        plan.routes.push_back({s, instance_of[e][g], share[i], g == s ? Carrier::none : Carrier::ep_backend});
      }
    }
  }
  return plan;
}

std::unique_ptr<Balancer> make_laer_moe(ConfigMap& params) {
  constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();
  LaerMoeParams p;
  p.capacity_per_gpu = static_cast<int>(params.get_int_or("capacity_per_gpu", p.capacity_per_gpu, 0, 1 << 16));
  p.window = static_cast<int>(params.get_int_or("window", p.window, 1, kMaxCount));
  p.period = static_cast<int>(params.get_int_or("period", p.period, 1, kMaxCount));
  p.traffic = params.get_choice_or("traffic", "changes", {"changes", "always"}) == "always" ? LaerTraffic::always
                                                                                            : LaerTraffic::changes;
  p.checkpoint = params.get_bool_or("checkpoint", p.checkpoint);
  p.comp_us_per_token = params.get_double_or("comp_us_per_token", p.comp_us_per_token, 0, 1e9);
  p.intra_GBps = params.get_double_or("intra_GBps", p.intra_GBps, 0, 1e6);
  p.inter_GBps = params.get_double_or("inter_GBps", p.inter_GBps, 0, 1e6);
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  return std::make_unique<LaerMoe>(p);
}

}  // namespace epsim

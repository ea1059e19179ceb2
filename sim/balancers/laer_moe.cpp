#include "sim/balancers/laer_moe.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "sim/balancers/placement.hpp"
#include "sim/hardware/dtype.hpp"

namespace epsim {

namespace {

/// Splits `tokens` over `weights` (copies per location) one weight unit at a time: every unit gets
/// tokens / W, and the tokens % W left over go one each to the units from position (rotation mod W)
/// on, so that different sources leave their remainders on different copies.
void split_by_units(std::int64_t tokens, const int* weights, std::size_t count, int rotation,
                    std::vector<std::int64_t>& out) {
  const int total = std::accumulate(weights, weights + count, 0);
  out.assign(count, 0);
  const std::int64_t base = tokens / total;
  const std::int64_t rem = tokens % total;
  int unit = 0;
  for (std::size_t i = 0; i < count; ++i) {
    for (int k = 0; k < weights[i]; ++k, ++unit)
      out[i] += base + ((unit - rotation % total + total) % total < rem ? 1 : 0);
  }
}

}  // namespace

std::vector<int> laer_precise_replicas(const std::vector<double>& loads, int devices, int capacity, int nodes) {
  const int experts = static_cast<int>(loads.size());
  const std::int64_t total = static_cast<std::int64_t>(devices) * capacity;
  if (total < experts) throw std::invalid_argument("laer_moe: fewer expert slots than experts");
  const bool per_node = static_cast<std::int64_t>(nodes) * experts <= total;
  std::vector<int> replicas(experts, per_node ? nodes : 1);
  std::int64_t used = static_cast<std::int64_t>(experts) * (per_node ? nodes : 1);
  // A max-heap on load / replicas, ties to the lowest expert index (the source's heap).
  auto lower = [&](int a, int b) {
    const double ra = loads[a] / replicas[a];
    const double rb = loads[b] / replicas[b];
    return ra < rb || (ra == rb && a > b);
  };
  std::vector<int> heap(experts);
  std::iota(heap.begin(), heap.end(), 0);
  std::make_heap(heap.begin(), heap.end(), lower);
  while (used < total && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    const int best = heap.back();
    heap.pop_back();
    if (replicas[best] >= nodes) {
      if (used + nodes > total) continue;  // the source pops it for good
      replicas[best] += nodes;
      used += nodes;
    } else {
      ++replicas[best];
      ++used;
    }
    heap.push_back(best);
    std::push_heap(heap.begin(), heap.end(), lower);
  }
  return replicas;  // with every expert frozen, the leftover slots stay empty
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
  std::vector<int> node_copies(static_cast<std::size_t>(experts) * nodes, 0);  // [expert][node]
  for (const Item& item : items) {
    const int* per_node = node_copies.data() + static_cast<std::size_t>(item.expert) * nodes;
    const int fewest = *std::min_element(per_node, per_node + nodes);
    int best = -1, best_any = -1;
    for (int g = 0; g < devices; ++g) {
      if (used[g] >= capacity) continue;
      if (best_any < 0 || device_load[g] < device_load[best_any]) best_any = g;
      if (per_node[g / gpus_per_node] == fewest && (best < 0 || device_load[g] < device_load[best])) best = g;
    }
    if (best < 0) best = best_any;
    if (best < 0) throw std::runtime_error("laer_moe: no more capacity");
    ++copies[item.expert][best];
    ++node_copies[static_cast<std::size_t>(item.expert) * nodes + best / gpus_per_node];
    ++used[best];
    device_load[best] += item.load;
  }
  return copies;
}

double laer_layout_cost(const std::vector<std::vector<double>>& tokens, const LaerLayout& layout, int gpus_per_node,
                        const LaerCostModel& cost) {
  // The routing rule makes a source's split depend only on its node and on the copies on its own GPU,
  // so the sum is taken per (node, expert) in O(N + copies) instead of per (source, expert, copy).
  const int devices = static_cast<int>(tokens.size());
  const int experts = static_cast<int>(layout.size());
  const int nodes = std::max(1, (devices + gpus_per_node - 1) / gpus_per_node);
  const double bytes = cost.token_bytes * 1e-9;
  double comm_sum = 0;
  std::vector<double> comp(devices, 0.0);
  std::vector<int> node_units(nodes);
  std::vector<double> node_tokens(nodes);
  for (int e = 0; e < experts; ++e) {
    const std::vector<int>& copies = layout[e];
    std::fill(node_units.begin(), node_units.end(), 0);
    std::fill(node_tokens.begin(), node_tokens.end(), 0.0);
    int all_units = 0;
    for (int g = 0; g < devices; ++g) {
      node_units[g / gpus_per_node] += copies[g];
      all_units += copies[g];
    }
    if (all_units == 0) continue;
    for (int s = 0; s < devices; ++s) {
      const double t = tokens[s][e];
      if (t == 0) continue;
      const int node = s / gpus_per_node;
      node_tokens[node] += t;
      const int units = node_units[node];
      if (units > 0) {
        // Shares w/units: the copies on s itself at 1e9 GB/s, the rest of the node at V_intra.
        const double own = copies[s];
        comm_sum += bytes * t * (own / 1e9 + (units - own) / cost.intra_GBps) / units;
      } else {
        comm_sum += bytes * t / cost.inter_GBps;  // every copy is in another node
      }
    }
    for (int node = 0; node < nodes; ++node) {
      const double t = node_tokens[node];
      if (t == 0) continue;
      const bool local = node_units[node] > 0;
      const int units = local ? node_units[node] : all_units;
      const int first = local ? node * gpus_per_node : 0;
      const int last = local ? std::min(devices, first + gpus_per_node) : devices;
      for (int g = first; g < last; ++g)
        if (copies[g] > 0) comp[g] += t * copies[g] / units * cost.comp_s_per_token;
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

int laer_default_capacity(int num_experts, int num_gpus) {
  return std::max(1, 2 * num_experts / std::max(1, num_gpus));
}

Plan LaerMoe::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  const int gpn = context.gpus_per_node;
  if (gpn <= 0) throw std::logic_error("laer_moe: gpus_per_node must be positive");
  const int capacity = params_.capacity_per_gpu > 0 ? params_.capacity_per_gpu : laer_default_capacity(experts, n);
  if (static_cast<std::int64_t>(capacity) * n < experts)
    throw std::invalid_argument("laer_moe: capacity_per_gpu x GPUs must be at least the expert count");

  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, context.placement);
  LayerState& state = layers_[record.layer];
  if (state.history_sum.empty()) state.history_sum.assign(static_cast<std::size_t>(n) * experts, 0);
  const bool had_layout = !state.layout.empty();
  const LaerLayout before = state.layout;
  bool replanned = false;
  if (state.records_seen > 0 && state.records_seen % params_.period == 0) {
    std::vector<std::vector<double>> tokens(n, std::vector<double>(experts, 0.0));
    for (int s = 0; s < n; ++s)
      for (int e = 0; e < experts; ++e)
        tokens[s][e] = static_cast<double>(state.history_sum[static_cast<std::size_t>(s) * experts + e]);
    LaerCostModel cost;
    cost.token_bytes = static_cast<double>(context.model->token_bytes());
    cost.comp_s_per_token = params_.comp_us_per_token > 0 ? params_.comp_us_per_token * 1e-6
                                                          : context.model->expert_flops_per_token() /
                                                                (context.hardware->gpu.bf16_peak_TFLOPs * 1e12);
    cost.intra_GBps = params_.intra_GBps > 0 ? params_.intra_GBps : context.hardware->nvlink.port_bw_GBps;
    cost.inter_GBps = params_.inter_GBps > 0 ? params_.inter_GBps : context.hardware->infiniband.nic_bw_GBps;
    cost.checkpoint = params_.checkpoint;
    state.layout = laer_plan_layout(tokens, capacity, gpn, cost);
    state.layout_from_full_window = state.records_seen >= params_.window;
    replanned = true;
  }
  last_plan_steady_ = !state.layout.empty() && state.layout_from_full_window;
  // The window's sum, kept up to date: add this record, drop the one that leaves the window.
  std::vector<std::uint32_t> counts(record.counts.begin(),
                                    record.counts.begin() + static_cast<std::ptrdiff_t>(n) * experts);
  for (std::size_t i = 0; i < counts.size(); ++i) state.history_sum[i] += counts[i];
  state.history.push_back(std::move(counts));
  if (static_cast<int>(state.history.size()) > params_.window) {
    const std::vector<std::uint32_t>& old = state.history.front();
    for (std::size_t i = 0; i < old.size(); ++i) state.history_sum[i] -= old[i];
    state.history.pop_front();
  }
  ++state.records_seen;

  // copies_at(e, g): copies of e on g under the layout in force (static: one at home).
  const bool dynamic = !state.layout.empty();
  auto copies_at = [&](int e, int g) { return dynamic ? state.layout[e][g] : (home[e] == g ? 1 : 0); };
  auto copies_before = [&](int e, int g) { return had_layout ? before[e][g] : (home[e] == g ? 1 : 0); };

  Plan plan = start_plan("laer_moe", record, n);
  plan.planner.site = PlannerSite::host_cpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = replanned ? us_to_ps(params_.planner_time_us) : 0;
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});

  // One instance per (GPU, expert) with copies, GPU by GPU; copies of one expert on one GPU are one
  // instance (same weights) that takes a proportional share of the tokens.
  std::vector<int> instance_of(static_cast<std::size_t>(experts) * n, -1);
  std::vector<int> copies_total(experts, 0);
  for (int g = 0; g < n; ++g) {
    for (int e = 0; e < experts; ++e) {
      const int c = copies_at(e, g);
      if (c == 0) continue;
      const int inst = static_cast<int>(plan.instances.size());
      instance_of[static_cast<std::size_t>(e) * n + g] = inst;
      copies_total[e] += c;
      plan.instances.push_back({e, g, g == home[e] ? InstanceKind::static_expert : InstanceKind::replica});
      plan.gemm_order[g].front().instances.push_back(inst);
    }
  }

  // FSEP traffic. Each GPU owns 1/N of every expert's parameters (the first bytes mod N GPUs one byte
  // more). An instance's weights are restored from the N - 1 other owners' shards, prefetched at the
  // layer's start; its weight gradients go back to the owners by reduce-scatter after its
  // weight-gradient GEMM, in the gradient precision. Per instance and GPU: bytes x (N - 1) / N.
  const std::int64_t params_per_expert =
      static_cast<std::int64_t>(context.model->matrices_per_expert()) * context.model->hidden_size *
      context.model->expert_ffn_size;
  const std::int64_t weight_bytes = params_per_expert * context.model->dtype_bytes;
  const std::int64_t grad_bytes =
      params_per_expert * (params_.grad_bytes_per_param > 0 ? params_.grad_bytes_per_param : context.model->dtype_bytes);
  auto shard = [n](std::int64_t bytes, int h) { return bytes / n + (h < bytes % n ? 1 : 0); };
  plan.transfers.reserve(plan.instances.size() * static_cast<std::size_t>(2 * (n - 1)));
  for (int inst = 0; inst < static_cast<int>(plan.instances.size()); ++inst) {
    const int e = plan.instances[inst].expert;
    const int g = plan.instances[inst].gpu;
    const bool gather = params_.traffic == LaerTraffic::always || (replanned && copies_before(e, g) == 0);
    const bool reduce = params_.traffic == LaerTraffic::always || copies_total[e] > 1;
    for (int h = 0; h < n; ++h) {
      if (h == g) continue;
      if (gather && shard(weight_bytes, h) > 0)
        plan.transfers.push_back({TransferKind::weights, PassKind::forward, inst, h, g, shard(weight_bytes, h),
                                  Carrier::ep_backend, TransferStart::prefetch});
      if (reduce && shard(grad_bytes, h) > 0)
        plan.transfers.push_back({TransferKind::gradients, PassKind::backward, inst, g, h, shard(grad_bytes, h),
                                  Carrier::ep_backend});
    }
  }

  // Routes: each source splits its tokens for e over the copies in its own node (by multiplicity),
  // or over all copies when its node has none. The targets depend only on (node, expert): listed
  // once, in `target_gpu` / `target_copies` from offset `target_first[node * E + e]`.
  const int nodes = (n + gpn - 1) / gpn;
  std::vector<int> target_first(static_cast<std::size_t>(nodes) * experts + 1, 0);
  std::vector<int> target_gpu, target_copies;
  for (int node = 0; node < nodes; ++node) {
    const int first = node * gpn;
    const int last = std::min(n, first + gpn);
    for (int e = 0; e < experts; ++e) {
      const std::size_t begin = target_gpu.size();
      for (int g = first; g < last; ++g)
        if (const int c = copies_at(e, g)) target_gpu.push_back(g), target_copies.push_back(c);
      if (target_gpu.size() == begin)
        for (int g = 0; g < n; ++g)
          if (const int c = copies_at(e, g)) target_gpu.push_back(g), target_copies.push_back(c);
      target_first[static_cast<std::size_t>(node) * experts + e + 1] = static_cast<int>(target_gpu.size());
    }
  }
  std::vector<std::int64_t> share;
  for (int s = 0; s < n; ++s) {
    const std::size_t row = static_cast<std::size_t>(s / gpn) * experts;
    for (int e = 0; e < experts; ++e) {
      const std::int64_t c = record.count(s, e, experts);
      if (c == 0) continue;
      const int begin = target_first[row + e];
      const std::size_t count = static_cast<std::size_t>(target_first[row + e + 1] - begin);
      split_by_units(c, target_copies.data() + begin, count, s, share);
      for (std::size_t i = 0; i < count; ++i) {
        if (share[i] == 0) continue;
        const int g = target_gpu[begin + i];
        plan.routes.push_back({s, instance_of[static_cast<std::size_t>(e) * n + g], share[i],
                               g == s ? Carrier::none : Carrier::ep_backend});
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
  p.traffic = params.get_choice_or("traffic", "always", {"always", "changes"}) == "changes" ? LaerTraffic::changes
                                                                                            : LaerTraffic::always;
  if (params.has("gradient_dtype"))
    p.grad_bytes_per_param = element_bytes(parse_dtype(params.get_choice("gradient_dtype", dtype_names())));
  p.checkpoint = params.get_bool_or("checkpoint", p.checkpoint);
  p.comp_us_per_token = params.get_double_or("comp_us_per_token", p.comp_us_per_token, 0, 1e9);
  p.intra_GBps = params.get_double_or("intra_GBps", p.intra_GBps, 0, 1e6);
  p.inter_GBps = params.get_double_or("inter_GBps", p.inter_GBps, 0, 1e6);
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  return std::make_unique<LaerMoe>(p);
}

}  // namespace epsim

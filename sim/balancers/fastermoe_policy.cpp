#include "sim/balancers/fastermoe_policy.hpp"

#include <algorithm>
#include <cassert>
#include <limits>
#include <numeric>

#include "sim/balancers/placement.hpp"
#include "sim/hardware/gemm_cost.hpp"

namespace epsim {

const char* to_string(ShadowPolicy policy) {
  switch (policy) {
    case ShadowPolicy::paper: return "paper";
    case ShadowPolicy::code: return "code";
    case ShadowPolicy::prototype: return "prototype";
    case ShadowPolicy::none: return "none";
  }
  return "?";
}

double shadow_net_bw_GBps(const BalancerContext& context) {
  const HardwareSpec& hw = *context.hardware;
  if (context.num_gpus > context.gpus_per_node)
    return hw.infiniband.nic_bw_GBps * hw.ep_backend.ib_efficiency;
  return hw.nvlink.port_bw_GBps * hw.ep_backend.nvlink_efficiency;
}

ShadowCosts shadow_costs(const TraceRecord& record, const BalancerContext& context) {
  assert(context.model != nullptr && context.hardware != nullptr);
  const ModelSpec& model = *context.model;
  const HardwareSpec& hw = *context.hardware;
  const int experts = model.num_experts;
  std::int64_t total = 0;
  for (int s = 0; s < context.num_gpus; ++s)
    for (int e = 0; e < experts; ++e) total += record.count(s, e, experts);
  // v1 uses one fixed GEMM rate (bw_mm); ours is the rate the cost curve gives an expert GEMM of the
  // typical (mean) size, so small micro-batches see the lower small-M efficiency.
  const GemmCost gemm(hw, model);
  const std::int64_t mean_load = (total + experts - 1) / experts;
  const double efficiency = gemm.efficiency(static_cast<double>(gemm.padded(mean_load)));
  const double flops_per_ps = hw.gpu.bf16_peak_TFLOPs * efficiency;  // 1 TFLOP/s = 1 FLOP per ps
  const double net_bytes_per_ps = GBps_to_bytes_per_ps(shadow_net_bw_GBps(context));
  assert(flops_per_ps > 0 && net_bytes_per_ps > 0);
  ShadowCosts costs;
  costs.comp_ps_per_token = model.expert_flops_per_token() / flops_per_ps;
  costs.feat_ps_per_token = static_cast<double>(model.token_bytes()) / net_bytes_per_ps;
  costs.model_ps_per_expert = static_cast<double>(model.expert_weight_bytes()) / net_bytes_per_ps;
  return costs;
}

std::vector<int> greedy_shadow(const std::vector<std::int64_t>& loads, const ShadowCosts& costs,
                               std::size_t max_shadows) {
  std::vector<int> order(loads.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return loads[a] > loads[b]; });
  auto load_at = [&](std::size_t rank) {
    return rank < order.size() ? static_cast<double>(loads[order[rank]]) : 0.0;
  };
  const double per_token_ps = 3.0 * costs.comp_ps_per_token + 4.0 * costs.feat_ps_per_token;
  double best_ps = per_token_ps * load_at(0);
  std::vector<int> shadowed;
  for (std::size_t k = 1; k <= std::min(max_shadows, order.size()); ++k) {
    const double lat_ps = per_token_ps * load_at(k) + static_cast<double>(k) * costs.model_ps_per_expert;
    if (!(lat_ps < best_ps)) break;
    best_ps = lat_ps;
    shadowed.push_back(order[k - 1]);
  }
  return shadowed;
}

std::vector<int> prototype_shadow_workers(const std::vector<std::int64_t>& load,
                                          const std::vector<std::vector<std::int64_t>>& returned,
                                          const ShadowCosts& costs, int experts_per_worker) {
  const std::size_t n = load.size();
  assert(returned.size() == n);
  if (n == 0) return {};
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return load[a] > load[b]; });
  const double busiest = static_cast<double>(*std::max_element(load.begin(), load.end()));
  const double base_ps = (3.0 * costs.comp_ps_per_token + 4.0 * costs.feat_ps_per_token) * busiest;
  const double shadow_ps = 2.0 * experts_per_worker * costs.model_ps_per_expert;
  std::vector<std::int64_t> now = load;
  double best_ps = std::numeric_limits<double>::infinity();
  std::size_t stop = 0;
  for (std::size_t i = 0; i < n; ++i) {
    stop = i;
    const int w = order[i];
    now[static_cast<std::size_t>(w)] = 0;
    for (std::size_t s = 0; s < n; ++s) now[s] += returned[static_cast<std::size_t>(w)][s];
    const double lat_ps = 3.0 * costs.comp_ps_per_token * static_cast<double>(*std::max_element(now.begin(), now.end())) +
                          static_cast<double>(i + 1) * shadow_ps;
    if (lat_ps < best_ps) best_ps = lat_ps;
    else if (lat_ps > best_ps) break;
  }
  std::vector<int> shadowed;
  if (base_ps > best_ps) shadowed.assign(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(stop));
  std::sort(shadowed.begin(), shadowed.end());
  return shadowed;
}

std::vector<int> shadowed_experts(ShadowPolicy policy, const TraceRecord& record,
                                  const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  if (policy == ShadowPolicy::none || n <= 1) return {};
  const ShadowCosts costs = shadow_costs(record, context);
  std::vector<int> shadowed;
  if (policy == ShadowPolicy::paper) {
    std::vector<std::int64_t> load(experts, 0);
    for (int s = 0; s < n; ++s)
      for (int e = 0; e < experts; ++e) load[e] += record.count(s, e, experts);
    shadowed = greedy_shadow(load, costs, load.size());
  } else if (policy == ShadowPolicy::prototype) {
    // Whole workers: the experts homed on each GPU under the experiment's placement.
    std::vector<std::int64_t> load(n, 0);
    std::vector<std::vector<std::int64_t>> returned(n, std::vector<std::int64_t>(n, 0));
    std::vector<int> home(experts);
    for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, context.placement);
    for (int s = 0; s < n; ++s) {
      for (int e = 0; e < experts; ++e) {
        const std::int64_t c = record.count(s, e, experts);
        load[home[e]] += c;
        returned[home[e]][s] += c;
      }
    }
    for (int w : prototype_shadow_workers(load, returned, costs, experts / n))
      for (int e = 0; e < experts; ++e)
        if (home[e] == w) shadowed.push_back(e);
  } else {
    // v1 literal: sum(1) of the [N, E] matrix is per sender; its index is then taken as an expert id.
    std::vector<std::int64_t> sender_total(n, 0);
    for (int s = 0; s < n; ++s)
      for (int e = 0; e < experts; ++e) sender_total[s] += record.count(s, e, experts);
    shadowed = greedy_shadow(sender_total, costs, sender_total.size() - 1);
    assert(n <= experts);  // so every sender index is also a valid expert id
  }
  std::sort(shadowed.begin(), shadowed.end());
  return shadowed;
}

}  // namespace epsim

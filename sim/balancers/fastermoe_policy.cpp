#include "sim/balancers/fastermoe_policy.hpp"

#include <algorithm>
#include <cassert>
#include <numeric>

#include "sim/hardware/gemm_cost.hpp"

namespace epsim {

const char* to_string(ShadowPolicy policy) {
  switch (policy) {
    case ShadowPolicy::paper: return "paper";
    case ShadowPolicy::code: return "code";
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

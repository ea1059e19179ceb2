#include "sim/replay/layer_metrics.hpp"

#include <algorithm>

#include "sim/replay/critical_path.hpp"

namespace epsim {

namespace {

struct Spread {
  double max = 0, mean = 0;
  int argmax = 0;
};

template <typename T>
Spread spread(const std::vector<T>& values) {
  Spread s;
  if (values.empty()) return s;
  double sum = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    const double v = static_cast<double>(values[i]);
    sum += v;
    if (v > s.max) {  // strict: the lowest-numbered GPU wins ties
      s.max = v;
      s.argmax = static_cast<int>(i);
    }
  }
  s.mean = sum / static_cast<double>(values.size());
  return s;
}

// The largest value's lead on the second largest (0 on a tie and for fewer than two values).
Time_ps lead_of_last(const std::vector<Time_ps>& values) {
  if (values.size() < 2) return 0;
  Time_ps first = std::max(values[0], values[1]), second = std::min(values[0], values[1]);
  for (std::size_t i = 2; i < values.size(); ++i) {
    if (values[i] > first) {
      second = first;
      first = values[i];
    } else if (values[i] > second) {
      second = values[i];
    }
  }
  return first - second;
}

// max/mean with an empty layer (mean 0) read as perfectly balanced.
double ratio(const Spread& s) { return s.mean > 0 ? s.max / s.mean : 1.0; }

double mean_of(const std::vector<double>& v) {
  double sum = 0;
  for (double x : v) sum += x;
  return v.empty() ? 0 : sum / static_cast<double>(v.size());
}
double max_of(const std::vector<double>& v) { return v.empty() ? 0 : *std::max_element(v.begin(), v.end()); }

std::vector<double> fractions(const std::vector<Time_ps>& busy, Time_ps total) {
  std::vector<double> out;
  for (Time_ps b : busy) out.push_back(total > 0 ? static_cast<double>(b) / static_cast<double>(total) : 0.0);
  return out;
}

}  // namespace

LayerMetrics compute_layer_metrics(const MetricsInput& in) {
  const TraceRecord& rec = *in.record;
  const Plan& plan = *in.plan;
  const LayerResult& r = *in.result;
  const int n = plan.num_gpus;
  LayerMetrics m;
  m.step = rec.step;
  m.micro_batch = rec.micro_batch;
  m.layer = rec.layer;
  m.layer_id = in.layer_id;

  const std::vector<std::int64_t> load = plan.tokens_per_gpu();
  const Spread tokens = spread(load);
  for (std::int64_t l : load) m.tokens_total += l;
  m.token_max = tokens.max;
  m.token_mean = tokens.mean;
  m.token_straggler_ratio = ratio(tokens);
  m.token_excess = m.token_straggler_ratio - 1.0;
  m.token_idle_fraction = tokens.max > 0 ? 1.0 - tokens.mean / tokens.max : 0.0;
  m.token_straggler_gpu = tokens.argmax;

  const Spread gemm = spread(r.routed_gemm_fwd_ps);
  m.gemm_max_us = gemm.max / kPsPerUs;
  m.gemm_mean_us = gemm.mean / kPsPerUs;
  m.gemm_straggler_ratio = ratio(gemm);
  m.gemm_straggler_us = (gemm.max - gemm.mean) / kPsPerUs;
  m.gemm_excess = m.gemm_straggler_ratio - 1.0;
  m.gemm_straggler_gpu = gemm.argmax;
  m.last_gpu = spread(r.gemm_finish_fwd_ps).argmax;
  m.last_gpu_lead_us = ps_to_us(lead_of_last(r.gemm_finish_fwd_ps));

  m.forward_us = ps_to_us(r.forward_ps);
  m.backward_us = ps_to_us(r.backward_ps);
  m.layer_time_us = ps_to_us(r.layer_ps());
  m.bound_layer_time_us = ps_to_us(in.bound->layer_ps());
  m.gap_to_bound_us = m.layer_time_us - m.bound_layer_time_us;
  m.bound_term = in.bound->forward.binding();
  m.warmup = in.warmup;

  // One path through both passes: the backward starts when the forward has ended.
  CriticalPath path = critical_path(r.timeline, Pass::forward, 0, r.forward_ps);
  m.crit_gpu = path.last_gpu;
  if (r.backward_ps > 0) {
    const CriticalPath back = critical_path(r.timeline, Pass::backward, r.forward_ps, r.layer_ps());
    for (std::size_t k = 0; k < kPathResources; ++k) path.time_ps[k] += back.time_ps[k];
    path.length_ps += back.length_ps;
  }
  m.crit_sm_share = path.share(PathResource::sm);
  m.crit_copy_engine_share = path.share(PathResource::copy_engine);
  m.crit_nvlink_share = path.share(PathResource::nvlink);
  m.crit_nic_share = path.share(PathResource::nic);
  m.crit_host_share = path.share(PathResource::host);
  m.crit_wait_share = path.share(PathResource::wait);
  m.crit_bound = to_string(path.bound());

  // Bounds on the token straggler ratio, from the counts alone (docs/metrics.md).
  const int experts = in.num_experts;
  std::vector<double> expert_load(experts, 0.0);
  const int nodes = (n + in.gpus_per_node - 1) / in.gpus_per_node;
  std::vector<double> node_load(nodes, 0.0);
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) expert_load[e] += rec.count(s, e, experts);
  for (int e = 0; e < experts; ++e) node_load[(*in.home_gpu)[e] / in.gpus_per_node] += expert_load[e];
  if (tokens.mean > 0) {
    double floor = 0;
    for (int node = 0; node < nodes; ++node) {
      const int gpus_here = std::min(in.gpus_per_node, n - node * in.gpus_per_node);
      floor = std::max(floor, node_load[node] / gpus_here / tokens.mean);
    }
    m.bound_nvlink_domain = floor;
    m.bound_unsplit_expert = std::max(1.0, max_of(expert_load) / tokens.mean);
  }

  m.ep_token_bytes = r.ep_token_bytes;
  m.ce_token_bytes = r.ce_token_bytes;
  m.internode_token_bytes = r.internode_token_bytes;
  m.weight_bytes = r.weight_bytes;
  m.gradient_bytes = r.gradient_bytes;
  m.planner_us = ps_to_us(plan.planner.duration_ps);

  const Time_ps total = r.layer_ps();
  const auto compute = fractions(r.compute_busy_ps, total);
  const auto ce = fractions(r.copy_engine_busy_ps, total);
  m.compute_util_mean = mean_of(compute);
  m.compute_util_max = max_of(compute);
  m.nvlink_out_util_mean = mean_of(r.nvlink_out_util);
  m.nvlink_out_util_max = max_of(r.nvlink_out_util);
  m.nic_out_util_mean = mean_of(r.nic_out_util);
  m.nic_out_util_max = max_of(r.nic_out_util);
  m.copy_engine_util_mean = mean_of(ce);
  m.copy_engine_util_max = max_of(ce);
  return m;
}

}  // namespace epsim

#include "sim/report/layer_metrics.hpp"

#include <cstdio>
#include <functional>

namespace epsim {

namespace {

std::string fmt_int(long long v) { return std::to_string(v); }
std::string fmt(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

using Column = std::pair<std::string, std::function<std::string(const LayerMetrics&)>>;

// One table drives both the header and the rows, so names and values cannot drift apart.
const std::vector<Column>& columns() {
  static const std::vector<Column> cols = {
      {"step", [](const LayerMetrics& m) { return fmt_int(m.step); }},
      {"micro_batch", [](const LayerMetrics& m) { return fmt_int(m.micro_batch); }},
      {"layer", [](const LayerMetrics& m) { return fmt_int(m.layer); }},
      {"layer_id", [](const LayerMetrics& m) { return fmt_int(m.layer_id); }},
      {"tokens_total", [](const LayerMetrics& m) { return fmt_int(m.tokens_total); }},
      {"token_max", [](const LayerMetrics& m) { return fmt(m.token_max); }},
      {"token_mean", [](const LayerMetrics& m) { return fmt(m.token_mean); }},
      {"token_straggler_ratio", [](const LayerMetrics& m) { return fmt(m.token_straggler_ratio); }},
      {"token_excess", [](const LayerMetrics& m) { return fmt(m.token_excess); }},
      {"token_idle_fraction", [](const LayerMetrics& m) { return fmt(m.token_idle_fraction); }},
      {"token_straggler_gpu", [](const LayerMetrics& m) { return fmt_int(m.token_straggler_gpu); }},
      {"gemm_max_us", [](const LayerMetrics& m) { return fmt(m.gemm_max_us); }},
      {"gemm_mean_us", [](const LayerMetrics& m) { return fmt(m.gemm_mean_us); }},
      {"gemm_straggler_ratio", [](const LayerMetrics& m) { return fmt(m.gemm_straggler_ratio); }},
      {"gemm_straggler_us", [](const LayerMetrics& m) { return fmt(m.gemm_straggler_us); }},
      {"gemm_excess", [](const LayerMetrics& m) { return fmt(m.gemm_excess); }},
      {"gemm_straggler_gpu", [](const LayerMetrics& m) { return fmt_int(m.gemm_straggler_gpu); }},
      {"last_gpu", [](const LayerMetrics& m) { return fmt_int(m.last_gpu); }},
      {"forward_us", [](const LayerMetrics& m) { return fmt(m.forward_us); }},
      {"backward_us", [](const LayerMetrics& m) { return fmt(m.backward_us); }},
      {"layer_time_us", [](const LayerMetrics& m) { return fmt(m.layer_time_us); }},
      {"balanced_layer_time_us", [](const LayerMetrics& m) { return fmt(m.balanced_layer_time_us); }},
      {"exposed_overhead_us", [](const LayerMetrics& m) { return fmt(m.exposed_overhead_us); }},
      {"bound_global_mean", [](const LayerMetrics& m) { return fmt(m.bound_global_mean); }},
      {"bound_nvlink_domain", [](const LayerMetrics& m) { return fmt(m.bound_nvlink_domain); }},
      {"bound_unsplit_expert", [](const LayerMetrics& m) { return fmt(m.bound_unsplit_expert); }},
      {"ep_token_bytes", [](const LayerMetrics& m) { return fmt(m.ep_token_bytes); }},
      {"ce_token_bytes", [](const LayerMetrics& m) { return fmt(m.ce_token_bytes); }},
      {"internode_token_bytes", [](const LayerMetrics& m) { return fmt(m.internode_token_bytes); }},
      {"weight_bytes", [](const LayerMetrics& m) { return fmt(m.weight_bytes); }},
      {"gradient_bytes", [](const LayerMetrics& m) { return fmt(m.gradient_bytes); }},
      {"planner_us", [](const LayerMetrics& m) { return fmt(m.planner_us); }},
      {"compute_util_mean", [](const LayerMetrics& m) { return fmt(m.compute_util_mean); }},
      {"compute_util_max", [](const LayerMetrics& m) { return fmt(m.compute_util_max); }},
      {"nvlink_out_util_mean", [](const LayerMetrics& m) { return fmt(m.nvlink_out_util_mean); }},
      {"nvlink_out_util_max", [](const LayerMetrics& m) { return fmt(m.nvlink_out_util_max); }},
      {"nic_out_util_mean", [](const LayerMetrics& m) { return fmt(m.nic_out_util_mean); }},
      {"nic_out_util_max", [](const LayerMetrics& m) { return fmt(m.nic_out_util_max); }},
      {"copy_engine_util_mean", [](const LayerMetrics& m) { return fmt(m.copy_engine_util_mean); }},
      {"copy_engine_util_max", [](const LayerMetrics& m) { return fmt(m.copy_engine_util_max); }},
  };
  return cols;
}

}  // namespace

const std::vector<std::string>& layer_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Column& c : columns()) out.push_back(c.first);
    return out;
  }();
  return names;
}

std::vector<std::string> layer_metric_values(const LayerMetrics& m) {
  std::vector<std::string> out;
  for (const Column& c : columns()) out.push_back(c.second(m));
  return out;
}

}  // namespace epsim

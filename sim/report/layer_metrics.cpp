#include "sim/report/layer_metrics.hpp"

#include <functional>

#include "sim/core/number_text.hpp"

namespace epsim {

namespace {

std::string fmt_int(long long v) { return std::to_string(v); }

using Column = std::pair<std::string, std::function<std::string(const LayerMetrics&)>>;

// One table drives both the header and the rows, so names and values cannot drift apart.
const std::vector<Column>& columns() {
  static const std::vector<Column> cols = {
      {"step", [](const LayerMetrics& m) { return fmt_int(m.step); }},
      {"micro_batch", [](const LayerMetrics& m) { return fmt_int(m.micro_batch); }},
      {"layer", [](const LayerMetrics& m) { return fmt_int(m.layer); }},
      {"layer_id", [](const LayerMetrics& m) { return fmt_int(m.layer_id); }},
      {"tokens_total", [](const LayerMetrics& m) { return fmt_int(m.tokens_total); }},
      {"token_max", [](const LayerMetrics& m) { return g9(m.token_max); }},
      {"token_mean", [](const LayerMetrics& m) { return g9(m.token_mean); }},
      {"token_straggler_ratio", [](const LayerMetrics& m) { return g9(m.token_straggler_ratio); }},
      {"token_excess", [](const LayerMetrics& m) { return g9(m.token_excess); }},
      {"token_idle_fraction", [](const LayerMetrics& m) { return g9(m.token_idle_fraction); }},
      {"token_straggler_gpu", [](const LayerMetrics& m) { return fmt_int(m.token_straggler_gpu); }},
      {"gemm_max_us", [](const LayerMetrics& m) { return g9(m.gemm_max_us); }},
      {"gemm_mean_us", [](const LayerMetrics& m) { return g9(m.gemm_mean_us); }},
      {"gemm_straggler_ratio", [](const LayerMetrics& m) { return g9(m.gemm_straggler_ratio); }},
      {"gemm_straggler_us", [](const LayerMetrics& m) { return g9(m.gemm_straggler_us); }},
      {"gemm_excess", [](const LayerMetrics& m) { return g9(m.gemm_excess); }},
      {"gemm_straggler_gpu", [](const LayerMetrics& m) { return fmt_int(m.gemm_straggler_gpu); }},
      {"last_gpu", [](const LayerMetrics& m) { return fmt_int(m.last_gpu); }},
      {"forward_us", [](const LayerMetrics& m) { return g9(m.forward_us); }},
      {"backward_us", [](const LayerMetrics& m) { return g9(m.backward_us); }},
      {"layer_time_us", [](const LayerMetrics& m) { return g9(m.layer_time_us); }},
      {"bound_layer_time_us", [](const LayerMetrics& m) { return g9(m.bound_layer_time_us); }},
      {"gap_to_bound_us", [](const LayerMetrics& m) { return g9(m.gap_to_bound_us); }},
      {"bound_term", [](const LayerMetrics& m) { return std::string(m.bound_term); }},
      {"warmup", [](const LayerMetrics& m) { return fmt_int(m.warmup ? 1 : 0); }},
      {"bound_global_mean", [](const LayerMetrics& m) { return g9(m.bound_global_mean); }},
      {"bound_nvlink_domain", [](const LayerMetrics& m) { return g9(m.bound_nvlink_domain); }},
      {"bound_unsplit_expert", [](const LayerMetrics& m) { return g9(m.bound_unsplit_expert); }},
      {"ep_token_bytes", [](const LayerMetrics& m) { return g9(m.ep_token_bytes); }},
      {"ce_token_bytes", [](const LayerMetrics& m) { return g9(m.ce_token_bytes); }},
      {"internode_token_bytes", [](const LayerMetrics& m) { return g9(m.internode_token_bytes); }},
      {"weight_bytes", [](const LayerMetrics& m) { return g9(m.weight_bytes); }},
      {"gradient_bytes", [](const LayerMetrics& m) { return g9(m.gradient_bytes); }},
      {"planner_us", [](const LayerMetrics& m) { return g9(m.planner_us); }},
      {"compute_util_mean", [](const LayerMetrics& m) { return g9(m.compute_util_mean); }},
      {"compute_util_max", [](const LayerMetrics& m) { return g9(m.compute_util_max); }},
      {"nvlink_out_util_mean", [](const LayerMetrics& m) { return g9(m.nvlink_out_util_mean); }},
      {"nvlink_out_util_max", [](const LayerMetrics& m) { return g9(m.nvlink_out_util_max); }},
      {"nic_out_util_mean", [](const LayerMetrics& m) { return g9(m.nic_out_util_mean); }},
      {"nic_out_util_max", [](const LayerMetrics& m) { return g9(m.nic_out_util_max); }},
      {"copy_engine_util_mean", [](const LayerMetrics& m) { return g9(m.copy_engine_util_mean); }},
      {"copy_engine_util_max", [](const LayerMetrics& m) { return g9(m.copy_engine_util_max); }},
      {"crit_gpu", [](const LayerMetrics& m) { return fmt_int(m.crit_gpu); }},
      {"crit_bound", [](const LayerMetrics& m) { return std::string(m.crit_bound); }},
      {"crit_sm_share", [](const LayerMetrics& m) { return g9(m.crit_sm_share); }},
      {"crit_copy_engine_share", [](const LayerMetrics& m) { return g9(m.crit_copy_engine_share); }},
      {"crit_nvlink_share", [](const LayerMetrics& m) { return g9(m.crit_nvlink_share); }},
      {"crit_nic_share", [](const LayerMetrics& m) { return g9(m.crit_nic_share); }},
      {"crit_host_share", [](const LayerMetrics& m) { return g9(m.crit_host_share); }},
      {"crit_wait_share", [](const LayerMetrics& m) { return g9(m.crit_wait_share); }},
      // (after the columns of earlier versions, which keep their places)
      {"last_gpu_lead_us", [](const LayerMetrics& m) { return g9(m.last_gpu_lead_us); }},
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

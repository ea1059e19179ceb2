// The metrics of one (step, micro-batch, layer), as defined in docs/metrics.md, computed by the replay
// from a layer's plan, its result and the oracle's bound. Their CSV form (column names and formatting) is
// the report's: sim/report/layer_metrics.hpp.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/balancers/oracle.hpp"
#include "sim/plan/plan.hpp"
#include "sim/replay/layer_result.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

struct LayerMetrics {
  std::uint32_t step = 0, micro_batch = 0, layer = 0, layer_id = 0;
  std::int64_t tokens_total = 0;
  double token_max = 0, token_mean = 0;
  double token_straggler_ratio = 1, token_excess = 0, token_idle_fraction = 0;
  int token_straggler_gpu = 0;
  double gemm_max_us = 0, gemm_mean_us = 0;
  double gemm_straggler_ratio = 1, gemm_excess = 0;
  double gemm_straggler_us = 0;  ///< max_g T_g - mean_g T_g: the GEMM straggler as an absolute time
  int gemm_straggler_gpu = 0;
  int last_gpu = 0;  ///< the GPU whose forward routed GEMMs end last
  /// How much later last_gpu's forward routed GEMMs end than the next latest GPU's: 0 on a tie (the
  /// lowest-numbered GPU is named) and with one GPU.
  double last_gpu_lead_us = 0;
  double forward_us = 0, backward_us = 0, layer_time_us = 0;
  double bound_layer_time_us = 0;  ///< the oracle: no plan for this work is faster
  double gap_to_bound_us = 0;      ///< layer_time_us - bound_layer_time_us, >= 0
  const char* bound_term = "compute";  ///< the forward bound's binding term: compute, egress or ingress
  bool warmup = false;             ///< planned before the balancer's steady state (its history filling)
  /// The critical path of both passes (forward's from the GPU that ends it, then backward's): the share
  /// of the layer time each resource holds it, and the resource with the largest share.
  double crit_sm_share = 0, crit_copy_engine_share = 0, crit_nvlink_share = 0, crit_nic_share = 0;
  double crit_host_share = 0, crit_wait_share = 0;
  const char* crit_bound = "waiting";
  int crit_gpu = 0;  ///< the GPU that ends the forward
  double bound_global_mean = 1, bound_nvlink_domain = 1, bound_unsplit_expert = 1;
  double ep_token_bytes = 0, ce_token_bytes = 0, weight_bytes = 0, gradient_bytes = 0;
  double internode_token_bytes = 0;  ///< of ep_token_bytes, those crossing between nodes
  double planner_us = 0;
  double compute_util_mean = 0, compute_util_max = 0;
  double nvlink_out_util_mean = 0, nvlink_out_util_max = 0;
  double nic_out_util_mean = 0, nic_out_util_max = 0;
  double copy_engine_util_mean = 0, copy_engine_util_max = 0;
};

/// Everything the metrics need besides the timeline.
struct MetricsInput {
  const TraceRecord* record = nullptr;   ///< counts as replayed (num_gpus x num_experts)
  std::uint32_t layer_id = 0;
  int num_experts = 0;
  int gpus_per_node = 0;
  const std::vector<int>* home_gpu = nullptr;  ///< per expert, under the base placement
  const Plan* plan = nullptr;
  const LayerResult* result = nullptr;
  const LayerBound* bound = nullptr;           ///< the oracle's bound for the same record
  bool warmup = false;
};

LayerMetrics compute_layer_metrics(const MetricsInput& in);

}  // namespace epsim

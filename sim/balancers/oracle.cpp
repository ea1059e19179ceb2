#include "sim/balancers/oracle.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include "sim/hardware/gemm_cost.hpp"

namespace epsim {

double PassBound::total_ps() const { return std::max({compute_ps, egress_ps, ingress_ps}); }

const char* PassBound::binding() const {
  if (compute_ps >= egress_ps && compute_ps >= ingress_ps) return "compute";
  return egress_ps >= ingress_ps ? "egress" : "ingress";
}

Time_ps LayerBound::layer_ps() const {
  return static_cast<Time_ps>(std::floor(forward.total_ps() + backward.total_ps()));
}

int hbm_expert_slots(const HardwareSpec& hw, const ModelSpec& model) {
  // hbm_overflow refuses a GPU holding e experts when
  //   (e * expert_weight_bytes + shared_weight_bytes) * moe_layers > capacity.
  const double per_layer = hw.gpu.hbm_capacity_GB * 1e9 / std::max(1, model.moe_layers);
  const double room = per_layer - static_cast<double>(model.shared_weight_bytes());
  const double expert = static_cast<double>(model.expert_weight_bytes());
  if (room < 0) return 0;
  if (expert <= 0) return model.num_experts;
  return static_cast<int>(std::min<double>(model.num_experts, std::floor(room / expert)));
}

namespace {

/// Bytes per ps of `GBps` (1 GB/s = 1e-3 bytes per ps).
double per_ps(double GBps) { return GBps * 1e-3; }

/// Bytes one token moves in a phase's number format, as SimContext::token_bytes counts them.
double phase_token_bytes(const ModelSpec& model, Dtype phase_dtype) {
  if (!model.precision.set) return static_cast<double>(model.token_bytes());
  return static_cast<double>(model.token_bytes(phase_dtype));
}

/// The least time of all routed-expert GEMM kernels of one pass together (one GEMM per assignment):
/// see the header for why each term is a floor.
double routed_gemm_floor_ps(const HardwareSpec& hw, const ModelSpec& model, double assignments, int experts_used) {
  if (assignments <= 0) return 0;
  const Dtype dtype = model.precision.gemm;
  double best_efficiency = 0;
  for (const auto& point : (dtype == Dtype::fp8 ? hw.gemm.fp8_efficiency : hw.gemm.efficiency))
    best_efficiency = std::max(best_efficiency, point.efficiency);
  const double flops_per_row = model.expert_flops_per_token();
  const double compute_ps = assignments * flops_per_row / (best_efficiency * gemm_peak_TFLOPs(hw, dtype) * 1e6) * 1e6;
  const double h = model.hidden_size;
  const double f = model.expert_ffn_size;
  const double m = model.matrices_per_expert();
  const double b = dtype == Dtype::fp8 ? 1.0 : model.dtype_bytes;
  const double hbm_bytes = experts_used * m * h * f * b + assignments * b * (2.0 * h + 2.0 * (m - 1.0) * f);
  const double memory_ps = gemm_memory_us(hw, hbm_bytes) * 1e6;
  return std::max(compute_ps, memory_ps);
}

}  // namespace

LayerBound oracle_bound(const TraceRecord& record, const HardwareSpec& hw, const ModelSpec& model, int num_gpus,
                        const std::vector<std::int64_t>& local_tokens, int top_k, bool backward) {
  const int n = num_gpus;
  const int experts = model.num_experts;
  LayerBound bound;
  bound.slots = hbm_expert_slots(hw, model);

  // Assignments, experts in use, and per rank the assignments that must leave it.
  double assignments = 0;
  std::vector<double> leave(static_cast<std::size_t>(n), 0);
  std::vector<bool> used(static_cast<std::size_t>(experts), false);
  std::vector<std::int64_t> row(static_cast<std::size_t>(experts));
  // How often each value occurs in a row whose counts are small (below), for the selection.
  std::vector<std::int32_t> of_value;
  for (int s = 0; s < n; ++s) {
    double total = 0;
    std::int64_t largest = 0;
    for (int e = 0; e < experts; ++e) {
      row[e] = record.count(s, e, experts);
      total += static_cast<double>(row[e]);
      largest = std::max(largest, row[e]);
      if (row[e] > 0) used[e] = true;
    }
    assignments += total;
    // The `keep` largest counts stay. Their sum of integers is exact in any order, so a selection
    // does, not a sort (a sort was 6% of an EP 256 run). Where no count exceeds a few times the
    // row's length (near-uniform routing at wide EP: tens of tokens per expert), counting how often
    // each value occurs selects in two short passes without moving the row (nth_element was 2% of an
    // EP 1,024 run): the values from the largest down, until `keep` counts are taken.
    const int keep = std::min(bound.slots, experts);
    double kept = 0;
    if (largest <= 4 * static_cast<std::int64_t>(experts)) {
      of_value.assign(static_cast<std::size_t>(largest) + 1, 0);
      for (int e = 0; e < experts; ++e) ++of_value[static_cast<std::size_t>(row[e])];
      std::int64_t left = keep;
      for (std::int64_t v = largest; v > 0 && left > 0; --v) {
        const std::int64_t take = std::min<std::int64_t>(left, of_value[static_cast<std::size_t>(v)]);
        kept += static_cast<double>(take * v);
        left -= take;
      }
    } else {
      std::nth_element(row.begin(), row.begin() + keep, row.end(), std::greater<>());
      for (int k = 0; k < keep; ++k) kept += static_cast<double>(row[k]);
    }
    leave[s] = total - kept;
  }
  const int experts_used = static_cast<int>(std::count(used.begin(), used.end(), true));

  // Shared experts: each rank's own tokens, on its own GPU.
  const GemmCost gemm(hw, model);
  std::vector<double> shared_ps(static_cast<std::size_t>(n), 0);
  for (int g = 0; g < n; ++g) {
    if (model.shared_experts == 0 || local_tokens[g] == 0) continue;
    const std::vector<std::int64_t> rows(model.shared_experts, local_tokens[g]);
    shared_ps[g] = static_cast<double>(gemm.grouped_time_ps(rows, model.shared_expert_ffn_size));
  }
  const double routed_ps = routed_gemm_floor_ps(hw, model, assignments, experts_used);

  // Line rates out of and into one GPU: its NVLink port when it has peers in its node, its NIC when
  // the GPUs span nodes.
  const int per_node = std::max(1, hw.gpus_per_node);
  const bool has_peers = std::min(n, per_node) > 1;
  const bool spans_nodes = n > per_node;
  const double link_rate = (has_peers ? per_ps(hw.nvlink.port_bw_GBps) : 0.0) +
                           (spans_nodes ? per_ps(hw.infiniband.nic_bw_GBps) : 0.0);
  // One copy serves up to top_k assignments, except when the backend sends one per assignment.
  const double per_copy = hw.ep_backend.token_copies == TokenCopies::per_expert ? 1.0 : std::max(1, top_k);

  const auto pass = [&](int kernels, Dtype out_dtype, Dtype in_dtype) {
    PassBound p;
    double shared_sum = 0, shared_max = 0;
    for (double t : shared_ps) {
      shared_sum += kernels * t;
      shared_max = std::max(shared_max, kernels * t);
    }
    p.compute_ps = std::max(shared_max, (shared_sum + kernels * routed_ps) / n);
    if (link_rate > 0) {
      const double out_bytes = phase_token_bytes(model, out_dtype);
      const double in_bytes = phase_token_bytes(model, in_dtype);
      for (int s = 0; s < n; ++s) {
        const double copies = leave[s] / per_copy;
        const double out_ps = copies * out_bytes / link_rate;
        const double in_ps = copies * in_bytes / link_rate;
        if (out_ps > p.egress_ps) p.egress_ps = out_ps, p.egress_gpu = s;
        if (in_ps > p.ingress_ps) p.ingress_ps = in_ps, p.ingress_gpu = s;
      }
    }
    return p;
  };
  const PrecisionSpec& precision = model.precision;
  bound.forward = pass(1, precision.dispatch, precision.combine);
  if (backward) bound.backward = pass(2, precision.grad_dispatch, precision.grad_combine);
  return bound;
}

}  // namespace epsim

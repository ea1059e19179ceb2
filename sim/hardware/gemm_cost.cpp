#include "sim/hardware/gemm_cost.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace epsim {

GemmCost::GemmCost(const HardwareSpec& hw, const ModelSpec& model) : hw_(hw), model_(model) {
  assert(!hw_.gemm.efficiency.empty());
  assert(hw_.gemm.row_alignment > 0);
}

std::int64_t GemmCost::padded(std::int64_t tokens) const {
  const std::int64_t a = hw_.gemm.row_alignment;
  return (tokens + a - 1) / a * a;
}

double GemmCost::efficiency(double padded_tokens) const {
  const auto& curve = hw_.gemm.efficiency;
  if (padded_tokens <= curve.front().tokens_per_expert) return curve.front().efficiency;
  if (padded_tokens >= curve.back().tokens_per_expert) return curve.back().efficiency;
  // Efficiency curves of GEMMs are smooth in log(M), not in M: interpolate there.
  const double x = std::log2(padded_tokens);
  for (std::size_t i = 1; i < curve.size(); ++i) {
    if (padded_tokens <= curve[i].tokens_per_expert) {
      const double x0 = std::log2(curve[i - 1].tokens_per_expert);
      const double x1 = std::log2(curve[i].tokens_per_expert);
      const double w = (x - x0) / (x1 - x0);
      return curve[i - 1].efficiency + w * (curve[i].efficiency - curve[i - 1].efficiency);
    }
  }
  return curve.back().efficiency;
}

GemmCost::Estimate GemmCost::estimate(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const {
  const double h = model_.hidden_size;
  const double f = ffn_size;
  const double m = model_.matrices_per_expert();
  const double b = model_.dtype_bytes;
  const double peak_flops_per_ps = hw_.gpu.bf16_peak_TFLOPs;  // 1 TFLOP/s = 1 FLOP per ps
  Estimate e;
  double hbm_bytes = 0;
  for (std::int64_t tokens : tokens_per_expert) {
    if (tokens <= 0) continue;
    const double rows = static_cast<double>(padded(tokens));
    // Forward, data-gradient and weight-gradient GEMMs each do 2*M*N*K per matrix.
    const double flops = 2.0 * m * h * f * rows;
    e.compute_ps += flops / (efficiency(rows) * peak_flops_per_ps);
    // Every pass streams the expert's weights (read, or written as gradients in wgrad) plus its
    // activations in and out: the floor that makes small-M expert GEMMs memory bound.
    const double weights = m * h * f * b;
    const double activations = static_cast<double>(tokens) * b * (2.0 * h + 2.0 * (m - 1.0) * f);
    hbm_bytes += weights + activations;
  }
  e.memory_ps = hbm_bytes / GBps_to_bytes_per_ps(hw_.gpu.hbm_GBps);
  return e;
}

Time_ps GemmCost::grouped_time_ps(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const {
  const Estimate e = estimate(tokens_per_expert, ffn_size);
  if (e.compute_ps <= 0) return 0;
  return us_to_ps(hw_.gemm.launch_us) + checked_ceil_ps(std::max(e.compute_ps, e.memory_ps), "a grouped GEMM time");
}

double GemmCost::hbm_fraction(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const {
  const Estimate e = estimate(tokens_per_expert, ffn_size);
  if (e.compute_ps <= 0) return 0;
  return e.memory_ps >= e.compute_ps ? 1.0 : e.memory_ps / e.compute_ps;
}

}  // namespace epsim

#include "sim/hardware/gemm_cost.hpp"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <stdexcept>

#include "sim/hardware/log2_curve.hpp"

namespace epsim {

namespace {

const std::vector<GemmEfficiencyPoint>& curve_of(const HardwareSpec& hw, Dtype dtype) {
  if (dtype != Dtype::fp8) return hw.gemm.efficiency;
  if (!(hw.gpu.fp8_peak_TFLOPs > 0) || hw.gemm.fp8_efficiency.empty())
    throw std::invalid_argument("an FP8 GEMM needs gpu.fp8_peak_TFLOPs and gemm.fp8_efficiency in hardware " +
                                (hw.source_file.empty() ? hw.name : hw.source_file));
  return hw.gemm.fp8_efficiency;
}

}  // namespace

double gemm_peak_TFLOPs(const HardwareSpec& hw, Dtype dtype) {
  curve_of(hw, dtype);  // refuses FP8 without its peak and curve
  return dtype == Dtype::fp8 ? hw.gpu.fp8_peak_TFLOPs : hw.gpu.bf16_peak_TFLOPs;
}

double gemm_efficiency(const HardwareSpec& hw, Dtype dtype, double padded_tokens) {
  const auto& curve = curve_of(hw, dtype);
  if (curve.empty()) throw std::invalid_argument("hardware " + hw.name + " has no GEMM efficiency curve");
  return gemm_efficiency_at(curve, padded_tokens);
}

double gemm_compute_us(const HardwareSpec& hw, Dtype dtype, double padded_rows, double flops) {
  // 1 TFLOP/s = 1e6 FLOP per us.
  return flops / (gemm_efficiency(hw, dtype, padded_rows) * gemm_peak_TFLOPs(hw, dtype) * 1e6);
}

double gemm_memory_us(const HardwareSpec& hw, double hbm_bytes) {
  return hbm_bytes / (hw.gpu.hbm_GBps * 1e3);  // 1 GB/s = 1e3 bytes per us
}

double gemm_roofline_us(const HardwareSpec& hw, Dtype dtype, double padded_rows, double flops, double hbm_bytes) {
  return hw.gemm.launch_us + std::max(gemm_compute_us(hw, dtype, padded_rows, flops), gemm_memory_us(hw, hbm_bytes));
}

GemmCost::GemmCost(const HardwareSpec& hw, const ModelSpec& model) : hw_(hw), model_(model) {
  assert(!hw_.gemm.efficiency.empty());
  assert(hw_.gemm.row_alignment > 0);
  gemm_peak_TFLOPs(hw_, model_.precision.gemm);  // an FP8 GEMM on hardware without FP8 figures is refused here
}

std::int64_t GemmCost::padded(std::int64_t tokens) const {
  const std::int64_t a = hw_.gemm.row_alignment;
  return (tokens + a - 1) / a * a;
}

double GemmCost::efficiency(double padded_tokens) const {
  return gemm_efficiency(hw_, model_.precision.gemm, padded_tokens);
}

GemmCost::Estimate GemmCost::estimate(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const {
  const double h = model_.hidden_size;
  const double f = ffn_size;
  const double m = model_.matrices_per_expert();
  const Dtype dtype = model_.precision.gemm;
  // FP8 GEMMs stream one byte per element; otherwise the model's own element size (which the GEMM dtype
  // of a loaded model defaults to).
  const double b = dtype == Dtype::fp8 ? 1.0 : model_.dtype_bytes;
  Estimate e;
  double hbm_bytes = 0;
  for (std::int64_t tokens : tokens_per_expert) {
    if (tokens <= 0) continue;
    const double rows = static_cast<double>(padded(tokens));
    // Forward, data-gradient and weight-gradient GEMMs each do 2*M*N*K per matrix.
    const double flops = 2.0 * m * h * f * rows;
    e.compute_ps += gemm_compute_us(hw_, dtype, rows, flops) * 1e6;
    // Every pass streams the expert's weights (read, or written as gradients in wgrad) plus its
    // activations in and out: the floor that makes small-M expert GEMMs memory bound.
    const double weights = m * h * f * b;
    const double activations = static_cast<double>(tokens) * b * (2.0 * h + 2.0 * (m - 1.0) * f);
    hbm_bytes += weights + activations;
  }
  e.memory_ps = gemm_memory_us(hw_, hbm_bytes) * 1e6;
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

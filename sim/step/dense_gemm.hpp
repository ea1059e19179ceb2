// One dense (not grouped) GEMM on the hardware's calibrated figures, for the non-MoE work of a step:
//   t = launches * gemm.launch_us + max( FLOPs / (eta_d(rows) * peak_d),  HBM bytes / hbm_GBps )
// FP8 inputs run against gpu.fp8_peak_TFLOPs and the gemm.fp8_efficiency curve, every other dtype
// against bf16_peak_TFLOPs and gemm.efficiency; eta_d is interpolated linearly in log2(rows) between
// the curve's points and clamped at both ends, as for the expert GEMMs (sim/hardware/gemm_cost.hpp).
// The curve is read at the GEMM's rows (tokens), not per expert: a dense GEMM over T tokens has the
// M dimension of a grouped GEMM whose expert got T rows.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "sim/hardware/dtype.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/log2_curve.hpp"

namespace epsim {

/// Efficiency of a GEMM with `rows` rows of `dtype` inputs. The experiment loader has made sure FP8
/// figures exist when FP8 is asked for; without them, or with an empty curve, the GEMM has no
/// efficiency (0 FLOP/s would be infinite time), so the BF16 curve stands in.
inline double dense_gemm_efficiency(const HardwareSpec& hw, Dtype dtype, double rows) {
  const bool fp8 = dtype == Dtype::fp8 && !hw.gemm.fp8_efficiency.empty();
  const std::vector<GemmEfficiencyPoint>& curve = fp8 ? hw.gemm.fp8_efficiency : hw.gemm.efficiency;
  return gemm_efficiency_at(curve, rows);
}

/// Peak TFLOP/s for `dtype` inputs (FP8 only where the hardware gives its peak and curve).
inline double dense_gemm_peak_TFLOPs(const HardwareSpec& hw, Dtype dtype) {
  const bool fp8 = dtype == Dtype::fp8 && hw.gpu.fp8_peak_TFLOPs > 0 && !hw.gemm.fp8_efficiency.empty();
  return fp8 ? hw.gpu.fp8_peak_TFLOPs : hw.gpu.bf16_peak_TFLOPs;
}

/// Time (us) to stream `bytes` through HBM.
inline double hbm_us(const HardwareSpec& hw, double bytes) { return bytes / (hw.gpu.hbm_GBps * 1e3); }

/// `launches` kernels doing `flops` over `rows` rows and streaming `bytes`, in us; nothing without rows.
inline double dense_gemm_us(const HardwareSpec& hw, Dtype dtype, int launches, double rows, double flops,
                            double bytes) {
  if (rows <= 0) return 0;
  // 1 TFLOP/s = 1e6 FLOP per us.
  const double compute_us = flops / (dense_gemm_efficiency(hw, dtype, rows) * dense_gemm_peak_TFLOPs(hw, dtype) * 1e6);
  return launches * hw.gemm.launch_us + std::max(compute_us, hbm_us(hw, bytes));
}

}  // namespace epsim

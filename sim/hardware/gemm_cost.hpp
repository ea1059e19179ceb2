// Grouped-GEMM time from a cost curve, never from a linear rate:
//   t = launch + max( sum_e flops(pad(M_e)) / (eta_d(pad(M_e)) * peak_d),  bytes / HBM )
// where pad rounds each expert's rows up to the alignment, d is the GEMM's input dtype
// (model.precision.gemm: FP8 runs against fp8_peak_TFLOPs with the fp8_efficiency curve, BF16, FP16 and
// FP32 against bf16_peak_TFLOPs with the efficiency curve), eta_d is that curve over rows per expert, and
// bytes are the weights of every expert with M_e > 0 plus the activations read and written, one byte per
// element for FP8, else the model's dtype_bytes. Experts with no tokens cost nothing. This is the time with every SM available;
// the SmPool stretches it while communication kernels hold SMs. The free functions below are the same
// roofline for one GEMM call; `epsim calibrate` fits its parameters through them.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"

namespace epsim {

/// Dense peak TFLOP/s for GEMM inputs of `dtype`. Throws std::invalid_argument for FP8 on hardware
/// without gpu.fp8_peak_TFLOPs or gemm.fp8_efficiency.
double gemm_peak_TFLOPs(const HardwareSpec& hw, Dtype dtype);
/// The efficiency curve of `dtype` (fp8_efficiency for FP8, efficiency otherwise), interpolated linearly
/// in log2(rows) between its points and clamped at both ends. Throws like gemm_peak_TFLOPs.
double gemm_efficiency(const HardwareSpec& hw, Dtype dtype, double padded_rows);
/// Compute time (us, launch excluded) of `flops` at `padded_rows` rows per group.
double gemm_compute_us(const HardwareSpec& hw, Dtype dtype, double padded_rows, double flops);
/// Time (us, launch excluded) to stream `hbm_bytes` at gpu.hbm_GBps.
double gemm_memory_us(const HardwareSpec& hw, double hbm_bytes);
/// One GEMM call with the same rows in every group: launch + max(compute, memory), in us.
double gemm_roofline_us(const HardwareSpec& hw, Dtype dtype, double padded_rows, double flops, double hbm_bytes);

class GemmCost {
 public:
  /// Throws std::invalid_argument when the model's GEMM dtype is FP8 and the hardware has no FP8 peak
  /// or FP8 efficiency curve.
  GemmCost(const HardwareSpec& hw, const ModelSpec& model);

  /// Time of one grouped GEMM over experts with `tokens_per_expert` rows each. `ffn_size` is the
  /// expert's intermediate size (routed or shared expert). The forward, data-gradient and
  /// weight-gradient GEMMs have the same FLOPs and HBM bytes in this model, so one function serves all.
  Time_ps grouped_time_ps(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const;
  /// Share of HBM bandwidth the same GEMM needs while it runs at full speed: 1 when it is memory bound,
  /// memory time / compute time when compute bound, 0 without tokens.
  double hbm_fraction(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const;
  /// Efficiency curve value for `padded_tokens` rows (of the model's GEMM dtype).
  double efficiency(double padded_tokens) const;
  std::int64_t padded(std::int64_t tokens) const;

 private:
  struct Estimate {
    double compute_ps = 0;
    double memory_ps = 0;
  };
  Estimate estimate(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const;

  const HardwareSpec& hw_;
  const ModelSpec& model_;
};

}  // namespace epsim

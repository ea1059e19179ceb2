// Grouped-GEMM time from a cost curve, never from a linear rate:
//   t = launch + max( sum_e flops(pad(M_e)) / (eta(pad(M_e)) * peak),  bytes / HBM )
// where pad rounds each expert's rows up to the alignment, eta is the efficiency curve over rows per
// expert, and bytes are the weights of every expert with M_e > 0 plus the activations read and
// written. Experts with no tokens cost nothing. This is the time with every SM available; the SmPool
// stretches it while communication kernels hold SMs.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"

namespace epsim {

class GemmCost {
 public:
  GemmCost(const HardwareSpec& hw, const ModelSpec& model);

  /// Time of one grouped GEMM over experts with `tokens_per_expert` rows each. `ffn_size` is the
  /// expert's intermediate size (routed or shared expert). The forward, data-gradient and
  /// weight-gradient GEMMs have the same FLOPs and HBM bytes in this model, so one function serves all.
  Time_ps grouped_time_ps(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const;
  /// Share of HBM bandwidth the same GEMM needs while it runs at full speed: 1 when it is memory bound,
  /// memory time / compute time when compute bound, 0 without tokens.
  double hbm_fraction(const std::vector<std::int64_t>& tokens_per_expert, int ffn_size) const;
  /// Efficiency curve value for `padded_tokens` rows.
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

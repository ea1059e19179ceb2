// A fitted number with how well it is known, and one point's residual against the fitted model: what
// `epsim calibrate` prints and writes beside every parameter and every measurement.
#pragma once

#include <string>
#include <vector>

namespace epsim {

struct FittedValue {
  double value = 0;
  double stderr_ = 0;  ///< NaN when the fit had no spare degree of freedom
  int points = 0;      ///< 0: not fitted (kept from the base hardware file)
  std::vector<std::string> files;  ///< measurement files the points came from
  std::string note;                ///< e.g. "memory bound: lower bound"
};

/// One measured point against the calibrated model.
struct PointResidual {
  std::string series;   ///< "grouped_gemm", "gemm", "copy", "all_to_all", "ep_comm", "gemm_with_copy"
  std::string setting;  ///< the point in words, e.g. "fp8 contiguous 4x8192x4096x7168"
  std::string where;    ///< file:line:col
  std::string source;
  double measured_us = 0;
  double model_us = 0;
  double residual() const { return (measured_us - model_us) / measured_us; }  ///< relative
};

}  // namespace epsim

// Measurement files generated from known hardware parameters, for the calibration tests: the fit must
// give the parameters back (exactly without noise, within tolerance with a small deterministic noise).
#pragma once

#include <string>

#include "hw/calibration/measurements.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim::test {

/// The parameters the synthetic measurements are generated from.
struct CalibrationTruth {
  double ce_alpha_us = 2.5, ce_beta_GBps = 390;
  double local_alpha_us = 2.0, local_beta_GBps = 1100;
  double h2d_alpha_us = 3.0, h2d_beta_GBps = 55.4;
  double d2h_alpha_us = 2.8, d2h_beta_GBps = 55.2;
  double a2a_latency_us = 8.0, a2a_bw_GBps = 320;
  double hbm_traffic_factor = 1.6;
  HardwareSpec hw;  ///< peaks, hbm, launch, row alignment, both efficiency curves, the EP backend
  CalibrationTruth();
};

/// A kind: measurements YAML text. `noise` (e.g. 0.003) scales a fixed +-1 pattern of relative errors
/// (draw 0), or independent errors of the same size, another set for each other draw.
std::string synthetic_measurements_yaml(const CalibrationTruth& truth, double noise, int draw = 0);

/// A `gemm` series (GemmCallPoint) timed by the fitted model itself (predict_gemm_call_us on truth.hw):
/// FP8 and BF16, dense, contiguous and masked layouts, DeepSeek-V3-like shapes. `file` names it.
Measurements synthetic_gemm_calls(const CalibrationTruth& truth, double noise, const std::string& file);

/// An `ep_comm` series timed by predict_ep_point_us on truth.hw: NVLink points (EP 8 on one node) over
/// an SM sweep that crosses from SM bound to link bound and over token counts, both kernels; RDMA
/// points (EP 16, two nodes) when `with_rdma`. Draw 0 puts a fixed pattern of errors on the times;
/// each other draw, independent errors of the same size (a measurement repeated).
Measurements synthetic_ep_comm(const CalibrationTruth& truth, double noise, bool with_rdma, const std::string& file,
                               int draw = 0);

}  // namespace epsim::test

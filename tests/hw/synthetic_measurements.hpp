// Measurement files generated from known hardware parameters, for the calibration tests: the fit must
// give the parameters back (exactly without noise, within tolerance with a small deterministic noise).
#pragma once

#include <string>

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
  HardwareSpec hw;  ///< peak, hbm, launch, row alignment and the efficiency curve of the GEMMs
  CalibrationTruth();
};

/// A kind: measurements YAML text. `noise` (e.g. 0.003) scales a fixed +-1 pattern of relative errors.
std::string synthetic_measurements_yaml(const CalibrationTruth& truth, double noise);

}  // namespace epsim::test

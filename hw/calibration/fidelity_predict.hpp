// What the simulator predicts for one measured point, on a given hardware model. Each kind goes
// through the model a replay uses:
//   grouped GEMM                  GemmCost (the replay's grouped-GEMM time), the point's dtype
//   GEMM call                     predict_gemm_call_us: the same roofline (gemm_roofline_us) for one call
//   copy ce_peer                  a Copy Engine copy between two GPUs of one node (SimContext)
//   copy d2h                      a PCIe device-to-host copy (SimContext)
//   copy h2d                      pcie.latency_us + bytes / pcie.h2d_GBps (the engine has no H2D task)
//   copy ce_local, sm_copy        no key in the hardware model: only the fit's alpha + bytes / beta
//   all-to-all                    AllToAllV on `ranks` GPUs, every pair bytes_per_pair; the last rank's end
//   dispatch / combine            the EP benchmark driver (fidelity_ep_bench.hpp)
#pragma once

#include <string>

#include "hw/calibration/calibration_fit.hpp"
#include "hw/calibration/ep_bench_traffic.hpp"
#include "hw/calibration/fidelity_point.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

struct FidelityPrediction {
  double us = 0;
  bool ok = false;
  std::string note;  ///< why there is no number (ok false)
};

/// Predicts `point` (a point of `file`) on `hw`. `cal` is the fit `hw` was calibrated with, used for
/// the copy kinds the hardware file has no key for; nullptr for a preset as shipped. `traffic` is the
/// point's drawn traffic (ep_comm points only; drawn here when nullptr).
FidelityPrediction predict_point(const FidelityPoint& point, const Measurements& file, const HardwareSpec& hw,
                                 const Calibration* cal, const EpBenchTraffic* traffic = nullptr);

}  // namespace epsim

// Fitting the EP backend's dispatch/combine model to `ep_comm` points (DeepEP and its kin):
//   t = fixed_kernel + bottleneck_bytes / min(link_GBps * efficiency, sms * sm_GBps)
// where bottleneck_bytes is the busiest rank's NVLink send/receive bytes (ep within one node) or its
// RDMA node bytes (ep across nodes), drawn by ep_bench_traffic; link_GBps is the base file's
// nvlink.port_bw_GBps or infiniband.nic_bw_GBps; sms is the point's, else the base's comm_sms. NVLink
// points are fitted first (nvlink_efficiency, sm_GBps, dispatch/combine fixed costs), then RDMA points
// (ib_efficiency; sm_GBps and the fixed costs too where the NVLink points did not determine them), with
// Levenberg-Marquardt on relative residuals.
#pragma once

#include <string>
#include <vector>

#include "hw/calibration/fitted_value.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

/// One ep_comm point in the model's terms.
struct EpObservation {
  const EpCommPoint* point = nullptr;
  bool internode = false;
  double bottleneck_bytes = 0;
  int sms = 0;  ///< the point's, else the base's comm_sms
  double measured_us = 0;
  std::string setting, where, source, file;
};

/// Draws the point's traffic (seed 1) and works out its bottleneck (measured_us left 0). Throws
/// InputError at the point when it cannot be drawn.
EpObservation ep_geometry(const EpCommPoint& p, const HardwareSpec& base);
/// ep_geometry with the point's time (ep_point_time_us) and its words; throws InputError at the point when
/// it has no time.
EpObservation observe_ep(const EpCommPoint& p, const std::string& file, const std::string& default_source,
                         const HardwareSpec& base);

struct EpCommFit {
  bool internode = false;
  FittedValue efficiency;         ///< of nvlink.port_bw_GBps or infiniband.nic_bw_GBps
  FittedValue sm_GBps;            ///< points == 0: not determined here (no point SM bound)
  FittedValue dispatch_fixed_us;  ///< points == 0: not determined here (one size only)
  FittedValue combine_fixed_us;
  double rel_rms = 0;
  int points = 0;
};

/// The model's time for one observation with the given parameters (sm_GBps 0: the SMs never limit).
double ep_model_us(const EpObservation& o, const HardwareSpec& hw, double efficiency, double sm_GBps,
                   double dispatch_fixed_us, double combine_fixed_us);

/// Fits one group (every observation internode, or none). Parameters not determined by the points
/// start from and stay at `start`'s values (ep_backend keys).
EpCommFit fit_ep_comm(const std::vector<EpObservation>& obs, const HardwareSpec& start, bool fit_sm, bool fit_dispatch_fixed,
                      bool fit_combine_fixed,
                      std::vector<std::string>& warnings);

}  // namespace epsim

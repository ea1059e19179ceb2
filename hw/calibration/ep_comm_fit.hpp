// Fitting the EP backend's dispatch/combine model to `ep_comm` points (DeepEP and its kin):
//   t = fixed_kernel + bottleneck_bytes / min(link_GBps * efficiency, sms * sm_GBps)
// (plus the link latency, and the bytes divided by the ep_backend.message_efficiency curve at the
// message size, as the engine charges them) where bottleneck_bytes is the busiest rank's NVLink send/receive bytes (ep within one node) or its
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
  /// The busiest rank's mean payload per peer (per destination rank inside a node, per destination
  /// node across nodes): the message size the engine's message_efficiency curve is read at.
  double message_bytes = 0;
  /// Per rank, the larger of the bytes it sends and receives on each resource of the engine's replay
  /// (the hops of fidelity_ep_bench.hpp: NVLink hops, forwarding included; InfiniBand hops; every hop
  /// also crosses the sender's and the receiver's SMs). The model's time is the mean over ranks of
  /// each rank's slowest resource, the statistic the replay and the measurement report.
  std::vector<double> nvlink_bytes, rdma_bytes, sm_nvlink_bytes, sm_rdma_bytes;
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

/// The model's time for one observation with the given parameters (sm_GBps 0: the SMs never limit):
///   fixed + latency + mean over ranks of max(NVLink bytes / (nvlink * nvlink_efficiency),
///       RDMA bytes / (nic * ib_efficiency), (SM NVLink bytes + SM RDMA bytes * nvlink_eff / ib_eff) /
///       (sms * sm_GBps)) / curve(message_bytes)
/// (`efficiency` stands for nvlink_efficiency in an NVLink point and ib_efficiency in an RDMA point,
/// the other taken from `hw`), with the latency (nvlink.latency_us, or infiniband.latency_us across nodes) and the size curve
/// (ep_backend.message_efficiency) of `hw`, as the engine's replay charges them per message.
double ep_model_us(const EpObservation& o, const HardwareSpec& hw, double efficiency, double sm_GBps,
                   double dispatch_fixed_us, double combine_fixed_us);

/// Fits one group (every observation internode, or none). Parameters not determined by the points
/// start from and stay at `start`'s values (ep_backend keys).
EpCommFit fit_ep_comm(const std::vector<EpObservation>& obs, const HardwareSpec& start, bool fit_sm, bool fit_dispatch_fixed,
                      bool fit_combine_fixed,
                      std::vector<std::string>& warnings);

}  // namespace epsim

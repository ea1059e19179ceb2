// Fitting the hardware model's parameters to measurements (docs/calibration.md). Every model is the
// one the simulator uses, written so that the fit is linear in its parameters:
//   copy (per kind)   t = alpha + bytes / beta
//   all-to-all        t = latency + bytes_sent_per_rank / bw,  bytes_sent_per_rank = (ranks - 1) * bytes_per_pair
//   GEMM              t = launch + max(FLOPs / (eta_d(R) * peak_d), bytes / hbm), R = rows per group (padded
//                     where the layout pads), d = FP8 or BF16: gemm_fit.hpp (start linear, then joint LM)
//   EP dispatch/combine  t = fixed + bottleneck bytes / min(link * eff, sms * sm_GBps): ep_comm_fit.hpp
//   CE contention     a GEMM needing HBM share f runs at min(1, (1 - p) / f), p = copy_GBps * factor / hbm
// Every fitted number carries its standard error, the number of points and the files they came from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hw/calibration/ep_comm_fit.hpp"
#include "hw/calibration/fitted_value.hpp"
#include "hw/calibration/gemm_fit.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

struct CopyFit {
  CopyKind kind = CopyKind::ce_peer;
  FittedValue alpha_us;
  FittedValue beta_GBps;
  double rel_rms = 0;
};

struct AllToAllFit {
  bool intra_node = true;  ///< ranks <= the base hardware's gpus_per_node
  FittedValue latency_us;
  FittedValue bw_GBps;  ///< bytes each rank sends to the others per second
  double rel_rms = 0;
};

struct ContentionFit {
  FittedValue hbm_traffic_factor;
  int points_without_slowdown = 0;  ///< compute-bound GEMMs that did not slow down: no information
  int points_copy_on_sms = 0;       ///< rows whose copy was a kernel (copy_on_sms): SM sharing, left out
  double rel_rms = 0;               ///< of the predicted GEMM-with-copy times
};

struct Calibration {
  std::vector<CopyFit> copies;  ///< one per copy kind measured
  std::optional<AllToAllFit> all_to_all_intra;
  std::optional<AllToAllFit> all_to_all_inter;
  std::optional<GemmFit> gemm;
  std::optional<ContentionFit> contention;
  std::optional<EpCommFit> ep_nvlink;  ///< ep_comm points within one node
  std::optional<EpCommFit> ep_rdma;    ///< ep_comm points across nodes
  /// Every point against the calibrated model (apply_calibration's hardware through the predict_*
  /// functions below), in file order, then series order grouped_gemm, gemm, copy, all_to_all, ep_comm.
  std::vector<PointResidual> residuals;
  std::vector<std::string> warnings;
  std::vector<Measurements> sources;

  const CopyFit* copy(CopyKind kind) const;
};

struct FitOptions {
  /// A GEMM point counts as on the HBM floor when t - launch <= bytes / hbm * (1 + this).
  double memory_bound_tolerance = 0.02;
  /// GEMM-with-copy points slowed down by less than this fraction carry no information on the factor.
  double min_slowdown = 0.02;
  /// A copy kind or an all-to-all side measured at one size only (a published large-transfer rate): true
  /// takes its fixed cost from the base file (copy_engine.fixed_cost_us, pcie.latency_us, 0 for ce_local
  /// and sm_copy; nvlink.latency_us, infiniband.latency_us) and fits the bandwidth alone, with a warning;
  /// false refuses the series (InputError at its first point).
  bool one_size_fixed_from_base = false;
};

/// FLOPs and HBM bytes of one grouped GEMM pass as sim/hardware/gemm_cost.cpp counts them, with
/// rows padded to `row_alignment`.
double gemm_flops(const GemmShape& s, int row_alignment);
double gemm_hbm_bytes(const GemmShape& s);
std::int64_t padded_rows(std::int64_t tokens, int row_alignment);

/// Fits everything the measurements determine. `base` supplies what is not fitted but needed
/// (bf16 peak, row alignment, gpus per node, and hbm / launch when no grouped_gemm series exists).
/// Throws InputError (naming a file and point) when a series cannot determine its parameters.
Calibration fit_measurements(const std::vector<Measurements>& sources, const HardwareSpec& base,
                             const FitOptions& options = {});

/// `base` with every fitted parameter replaced.
HardwareSpec apply_calibration(const HardwareSpec& base, const Calibration& cal);

// One point's time (us) predicted by a hardware model, with exactly the functions the fits use and the
// simulator runs (gemm_roofline_us of sim/hardware/gemm_cost.hpp; the EP model of ep_comm_fit.hpp).
// They throw std::invalid_argument where the hardware lacks what the point needs (an FP8 GEMM on
// hardware without FP8 figures), and InputError where an EP point cannot be drawn.
double predict_gemm_point_us(const GemmPoint& point, const HardwareSpec& hw);
double predict_gemm_call_us(const GemmCallPoint& point, const HardwareSpec& hw);
/// ce_peer from copy_engine, h2d / d2h from pcie; ce_local and sm_copy have no key in the hardware model
/// and come from `cal`'s fit of their kind (std::invalid_argument when it has none).
double predict_copy_point_us(const CopyPoint& point, const HardwareSpec& hw, const Calibration& cal);
/// From `cal`'s all-to-all fit of the point's side (intra- or inter-node by hw.gpus_per_node).
double predict_all_to_all_us(const AllToAllPoint& point, const HardwareSpec& hw, const Calibration& cal);
/// The closed form of ep_comm_fit.hpp on the point's drawn traffic (seed 1), with hw.ep_backend's keys.
double predict_ep_point_us(const EpCommPoint& point, const HardwareSpec& hw);

}  // namespace epsim

// Fitting the hardware model's parameters to measurements (docs/calibration.md). Every model is the
// one the simulator uses, written so that the fit is linear in its parameters:
//   copy (per kind)   t = alpha + bytes / beta
//   all-to-all        t = latency + bytes_sent_per_rank / bw,  bytes_sent_per_rank = (ranks - 1) * bytes_per_pair
//   grouped GEMM      t = launch + max(FLOPs / (eta(R) * peak), bytes / hbm), R = rows padded per expert:
//                     launch and hbm from the smallest-R points (memory bound), then eta(R) per measured R
//   CE contention     a GEMM needing HBM share f runs at min(1, (1 - p) / f), p = copy_GBps * factor / hbm
// Every fitted number carries its standard error, the number of points and the files they came from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hw/calibration/measurements.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

struct FittedValue {
  double value = 0;
  double stderr_ = 0;  ///< NaN when the fit had no spare degree of freedom
  int points = 0;
  std::vector<std::string> files;  ///< measurement files the points came from
  std::string note;                ///< e.g. "memory bound: lower bound"
};

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

struct EfficiencyFit {
  double padded_rows = 0;
  FittedValue efficiency;
  bool memory_bound = false;  ///< every point at these rows sat on the HBM floor: a lower bound
};

struct GemmFit {
  FittedValue launch_us;  ///< points == 0 when kept from the base file (too few distinct sizes)
  FittedValue hbm_GBps;
  double memory_rel_rms = 0;
  std::vector<EfficiencyFit> efficiency;  ///< increasing padded_rows
  double rel_rms = 0;  ///< relative RMS of the whole model over every grouped_gemm point
};

struct ContentionFit {
  FittedValue hbm_traffic_factor;
  int points_without_slowdown = 0;  ///< compute-bound GEMMs that did not slow down: no information
  double rel_rms = 0;               ///< of the predicted GEMM-with-copy times
};

struct Calibration {
  std::vector<CopyFit> copies;  ///< one per copy kind measured
  std::optional<AllToAllFit> all_to_all_intra;
  std::optional<AllToAllFit> all_to_all_inter;
  std::optional<GemmFit> gemm;
  std::optional<ContentionFit> contention;
  std::vector<std::string> warnings;
  std::vector<Measurements> sources;

  const CopyFit* copy(CopyKind kind) const;
};

struct FitOptions {
  /// A GEMM point counts as on the HBM floor when t - launch <= bytes / hbm * (1 + this).
  double memory_bound_tolerance = 0.02;
  /// GEMM-with-copy points slowed down by less than this fraction carry no information on the factor.
  double min_slowdown = 0.02;
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

}  // namespace epsim

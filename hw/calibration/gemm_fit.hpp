// Fitting the GEMM roofline of sim/hardware/gemm_cost.hpp to GEMM timings of any shape and dtype:
//   t = launch + max(FLOPs / (eta_d(R) * peak_d), bytes / hbm)
// with launch, hbm shared by every dtype and one efficiency knot eta_d(R) per dtype class (FP8; BF16,
// FP16 and FP32 share the BF16 curve) and per measured rows-per-group R. Both the expert-FFN series
// (`grouped_gemm`, GemmPoint) and the per-call series (`gemm`, GemmCallPoint) feed it. The start comes
// from the linear fits (launch and hbm at the smallest rows, then each knot through the origin); a
// Levenberg-Marquardt pass then fits every free parameter jointly on the relative residuals.
#pragma once

#include <string>
#include <vector>

#include "hw/calibration/fitted_value.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

/// One GEMM timing in the roofline's terms.
struct GemmObservation {
  bool fp8 = false;      ///< FP8 inputs (fp8 curve and peak); else the BF16 curve and peak
  double rows = 0;       ///< rows per group the efficiency is read at (padded where the layout pads)
  double flops = 0;      ///< with padding rows
  double hbm_bytes = 0;
  double measured_us = 0;
  std::string series, setting, where, source, file;
};

/// FLOPs, HBM bytes and rows of a GemmCallPoint: FLOPs 2 * groups * M * N * K with M padded to
/// `row_alignment` in the contiguous layout only; bytes groups * (N * K + M * K) * element + groups * M * N * 2
/// (BF16 output).
double gemm_call_rows(const GemmCallPoint& p, int row_alignment);
double gemm_call_flops(const GemmCallPoint& p, int row_alignment);
double gemm_call_hbm_bytes(const GemmCallPoint& p);

GemmObservation observe_gemm(const GemmPoint& p, const std::string& file, const std::string& default_source,
                             int row_alignment);
GemmObservation observe_gemm(const GemmCallPoint& p, const std::string& file, const std::string& default_source,
                             int row_alignment);

struct EfficiencyFit {
  double padded_rows = 0;
  FittedValue efficiency;
  bool memory_bound = false;  ///< every point at these rows sat on the HBM floor: a lower bound
};

struct GemmFit {
  FittedValue launch_us;  ///< points == 0 when kept from the base file (too few distinct sizes)
  FittedValue hbm_GBps;
  double memory_rel_rms = 0;              ///< of the start line at the smallest rows
  std::vector<EfficiencyFit> efficiency;      ///< BF16 class, increasing padded_rows
  std::vector<EfficiencyFit> fp8_efficiency;  ///< FP8, increasing padded_rows
  double rel_rms = 0;  ///< relative RMS of the whole model over every GEMM point
  int points = 0;
};

/// Throws InputError at a point's place when the points cannot determine the model (one size only and
/// a time below the base launch; FP8 points without the base's gpu.fp8_peak_TFLOPs).
GemmFit fit_gemm(const std::vector<GemmObservation>& obs, const HardwareSpec& base, double memory_bound_tolerance,
                 std::vector<std::string>& warnings);

}  // namespace epsim

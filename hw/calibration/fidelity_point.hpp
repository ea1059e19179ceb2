// The rows of the fidelity report: every point of a measurement set, flattened into one list with its
// kind, the setting in words, the measured time and where it came from. A point is addressed by
// (file, series, index) so that a leave-one-out fit can drop exactly it.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "hw/calibration/measurements.hpp"

namespace epsim {

/// The kinds the report groups its tables and error summaries by.
enum class FidelityKind { gemm, dispatch, combine, copy, all_to_all };
const char* to_string(FidelityKind kind);
/// Heading of a kind's table ("GEMM", "Dispatch", ...).
const char* kind_title(FidelityKind kind);

/// The series of a Measurements a point lives in.
enum class FidelitySeries { grouped_gemm, gemm, copy, all_to_all, ep_comm };

struct FidelityPoint {
  FidelityKind kind = FidelityKind::gemm;
  FidelitySeries series = FidelitySeries::gemm;
  std::size_t file = 0;   ///< index in the measurement set
  std::size_t index = 0;  ///< index in its series
  std::string hardware;   ///< preset name (models/NAME.yaml)
  std::string setting;    ///< in words, e.g. "DeepEP V1 dispatch FP8, EP16 (2 nodes), 4096 tok, 20 SMs, h800"
  double measured_us = 0;
  std::string source;     ///< the point's source, else its file header's
  std::string where;      ///< file:line:col
};

/// Every point of `sources` in file order, then series order (grouped_gemm, gemm, copy, all_to_all,
/// ep_comm), then row order. A file's header.hardware names its preset; `default_hardware` serves a
/// file that names none. EP points get their measured time from their drawn traffic
/// (ep_point_time_us), which throws InputError for a point that cannot be drawn.
std::vector<FidelityPoint> fidelity_points(const std::vector<Measurements>& sources,
                                           const std::string& default_hardware);

/// `file` without the point (series, index): the input of its leave-one-out fit.
Measurements without_point(const Measurements& file, FidelitySeries series, std::size_t index);
/// Points in `file`'s series `series`.
std::size_t series_size(const Measurements& file, FidelitySeries series);

}  // namespace epsim

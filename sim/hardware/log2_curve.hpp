// Every curve of a hardware file (GEMM efficiency over rows per expert, message efficiency over bytes)
// is smooth in log(x), not in x: it is read linearly in log2(x) between its points and clamped at both
// ends. One rule for the engine, the fits and the step model, so that what is fitted is what runs.
#pragma once

#include <cmath>
#include <vector>

#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

/// The curve's efficiency at `x`; `empty_value` for a curve without points.
template <typename Point>
double log2_curve_at(const std::vector<Point>& curve, double Point::*x_of, double x, double empty_value) {
  if (curve.empty()) return empty_value;
  if (x <= curve.front().*x_of) return curve.front().efficiency;
  if (x >= curve.back().*x_of) return curve.back().efficiency;
  for (std::size_t i = 1; i < curve.size(); ++i) {
    if (x <= curve[i].*x_of) {
      const double x0 = std::log2(curve[i - 1].*x_of), x1 = std::log2(curve[i].*x_of);
      const double w = (std::log2(x) - x0) / (x1 - x0);
      return curve[i - 1].efficiency + w * (curve[i].efficiency - curve[i - 1].efficiency);
    }
  }
  return curve.back().efficiency;
}

/// ep_backend.message_efficiency at `bytes` (1 without points).
inline double message_efficiency_at(const std::vector<MessageEfficiencyPoint>& curve, double bytes) {
  return log2_curve_at(curve, &MessageEfficiencyPoint::bytes, bytes, 1.0);
}

/// A GEMM efficiency curve at `rows` (1 without points).
inline double gemm_efficiency_at(const std::vector<GemmEfficiencyPoint>& curve, double rows) {
  return log2_curve_at(curve, &GemmEfficiencyPoint::tokens_per_expert, rows, 1.0);
}

}  // namespace epsim

#include "hw/calibration/fidelity_summary.hpp"

#include <algorithm>
#include <cmath>

namespace epsim {

const FidelityPrediction& column(const FidelityRow& row, FidelityColumn c) {
  switch (c) {
    case FidelityColumn::preset: return row.preset;
    case FidelityColumn::fitted: return row.fitted;
    case FidelityColumn::loo: return row.loo;
  }
  return row.preset;
}

ErrorStats error_stats(const std::vector<FidelityRow>& rows, FidelityKind kind, FidelityColumn c) {
  ErrorStats s;
  std::vector<double> errors;
  for (const FidelityRow& r : rows) {
    if (r.point.kind != kind) continue;
    ++s.rows;
    const FidelityPrediction& p = column(r, c);
    if (p.ok) errors.push_back(std::fabs(relative_error(p, r.point.measured_us)));
  }
  s.predicted = static_cast<int>(errors.size());
  if (errors.empty()) return s;
  std::sort(errors.begin(), errors.end());
  const std::size_t n = errors.size();
  s.median = n % 2 == 1 ? errors[n / 2] : 0.5 * (errors[n / 2 - 1] + errors[n / 2]);
  s.max = errors.back();
  return s;
}

}  // namespace epsim

// Median and maximum |relative error| of one kind of row and one prediction column, held against the
// targets of docs/fidelity.md (median <= 5%, max <= 15%).
#pragma once

#include <vector>

#include "hw/calibration/fidelity_table.hpp"

namespace epsim {

constexpr double kTargetMedianError = 0.05;
constexpr double kTargetMaxError = 0.15;

enum class FidelityColumn { preset, fitted, loo };

struct ErrorStats {
  int rows = 0;       ///< rows of the kind
  int predicted = 0;  ///< of them, with a number in the column
  double median = 0;  ///< of |error| over the predicted rows (mean of the middle two for an even count)
  double max = 0;
  bool meets_target() const { return predicted > 0 && median <= kTargetMedianError && max <= kTargetMaxError; }
};

const FidelityPrediction& column(const FidelityRow& row, FidelityColumn c);
ErrorStats error_stats(const std::vector<FidelityRow>& rows, FidelityKind kind, FidelityColumn c);

}  // namespace epsim

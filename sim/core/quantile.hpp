// The q-quantile that every table of epsim reports (p50, p95): linear interpolation between the two
// nearest ranks at q x (n - 1) of the sorted values, numpy's default, so that a figure in metrics
// summaries, comparisons and sweeps means the same thing everywhere.
#pragma once

#include <vector>

namespace epsim {

/// The q-quantile (0 <= q <= 1) of `sorted`, which must be sorted ascending and not empty.
double quantile_sorted(const std::vector<double>& sorted, double q);

/// The q-quantile of `values` (any order). Throws std::invalid_argument when `values` is empty.
double quantile_of(std::vector<double> values, double q);

}  // namespace epsim

#include "sim/core/quantile.hpp"

#include <algorithm>
#include <cstddef>
#include <stdexcept>

namespace epsim {

double quantile_sorted(const std::vector<double>& sorted, double q) {
  const double at = q * static_cast<double>(sorted.size() - 1);
  const std::size_t lo = static_cast<std::size_t>(at);
  const std::size_t hi = std::min(lo + 1, sorted.size() - 1);
  return sorted[lo] + (at - static_cast<double>(lo)) * (sorted[hi] - sorted[lo]);
}

double quantile_of(std::vector<double> values, double q) {
  if (values.empty()) throw std::invalid_argument("quantile_of: no values");
  std::sort(values.begin(), values.end());
  return quantile_sorted(values, q);
}

}  // namespace epsim

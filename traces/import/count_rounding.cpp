#include "traces/import/count_rounding.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace epsim {

std::vector<std::uint64_t> round_loads(const std::vector<double>& loads, std::uint32_t top_k) {
  std::vector<std::uint64_t> out(loads.size());
  double sum = 0;
  std::uint64_t floors = 0;
  for (std::size_t e = 0; e < loads.size(); ++e) {
    sum += loads[e];
    out[e] = static_cast<std::uint64_t>(std::floor(loads[e]));
    floors += out[e];
  }
  const double k = static_cast<double>(top_k);
  const std::uint64_t target = static_cast<std::uint64_t>(std::floor(sum / k + 0.5)) * top_k;
  std::vector<std::size_t> order(loads.size());
  std::iota(order.begin(), order.end(), 0);
  // Largest fractional part first; equal parts: lower expert id first.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return loads[a] - std::floor(loads[a]) > loads[b] - std::floor(loads[b]);
  });
  if (target >= floors) {
    std::uint64_t missing = target - floors;
    // At most one unit per load in a round; more rounds only when the floors lack whole multiples of top_k.
    for (std::size_t i = 0; missing > 0; i = (i + 1) % order.size(), --missing) ++out[order[i]];
  } else {
    // The floors exceed the target (the sum was just above a multiple of top_k): take units back from
    // the smallest fractional parts first, never below zero.
    std::uint64_t excess = floors - target;
    for (std::size_t i = order.size(); excess > 0;) {
      i = i == 0 ? order.size() - 1 : i - 1;
      if (out[order[i]] > 0) {
        --out[order[i]];
        --excess;
      }
    }
  }
  return out;
}

bool spread_load(std::uint64_t load, std::uint32_t expert, std::uint32_t ranks, std::uint32_t experts,
                 std::vector<std::uint32_t>& counts) {
  const std::uint64_t base = load / ranks, rest = load % ranks;
  for (std::uint32_t s = 0; s < ranks; ++s) {
    const std::uint64_t shift = (static_cast<std::uint64_t>(s) + ranks - expert % ranks) % ranks;
    const std::uint64_t cell =
        counts[static_cast<std::size_t>(s) * experts + expert] + base + (shift < rest ? 1 : 0);
    if (cell > 0xffffffffull) return false;
    counts[static_cast<std::size_t>(s) * experts + expert] = static_cast<std::uint32_t>(cell);
  }
  return true;
}

}  // namespace epsim

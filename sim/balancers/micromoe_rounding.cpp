#include "sim/balancers/micromoe_rounding.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace epsim {

std::vector<std::int64_t> micromoe_round_shares(std::vector<double> share, std::int64_t count) {
  const std::size_t k = share.size();
  double sum = 0;
  for (double& s : share) sum += (s = std::max(s, 0.0));
  // The simplex meets the equality to ~1e-9; rescale so that the shares add up to count exactly.
  for (double& s : share) s = sum > 0 ? s * static_cast<double>(count) / sum : 0.0;
  std::vector<std::int64_t> out(k);
  std::int64_t given = 0;
  for (std::size_t r = 0; r < k; ++r) {
    out[r] = std::min(count, static_cast<std::int64_t>(std::floor(share[r] + 1e-9)));
    given += out[r];
  }
  for (std::size_t r = k; r-- > 0 && given > count;) {  // only by rounding noise
    const std::int64_t cut = std::min(out[r], given - count);
    out[r] -= cut;
    given -= cut;
  }
  // Fractions on a 1e-6 grid, so that ties the simplex leaves as 0.4999999999 vs 0.5 stay ties.
  std::vector<std::int64_t> frac(k);
  for (std::size_t r = 0; r < k; ++r) frac[r] = std::llround((share[r] - static_cast<double>(out[r])) * 1e6);
  std::vector<std::size_t> order(k);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return frac[a] > frac[b]; });
  for (std::size_t i = 0; given < count; i = (i + 1) % k, ++given) ++out[order[i]];
  return out;
}

}  // namespace epsim

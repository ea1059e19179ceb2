// Whole tokens from MicroMoE's LP shares (`solver: lp`): a (source, expert) pair's count split
// over the expert's instances as the simplex left it, in fractions of a token.
#pragma once

#include <cstdint>
#include <vector>

namespace epsim {

/// Whole tokens from the LP's shares of `count`: negative shares (simplex noise) count as 0, the
/// shares are rescaled to add up to `count`, each is rounded down (a share within 1e-9 below a whole
/// number is that number), and the tokens left go one each to the largest fractional parts, on a 1e-6
/// grid, ties to the lower instance. The result adds up to `count` exactly.
std::vector<std::int64_t> micromoe_round_shares(std::vector<double> share, std::int64_t count);

}  // namespace epsim

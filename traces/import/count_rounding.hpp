// The two rules that turn aggregated expert loads into a trace's integer count matrix without
// sampling (docs/trace-format.md, section 3.5):
//  - rounding: a row of fractional loads (averages) becomes integers by the largest-remainder rule:
//    the target total is the multiple of top_k nearest to the row's sum (ties upwards), every load is
//    rounded down, and the units still missing go one each to the loads with the largest fractional
//    parts (ties: lower expert id first). The total moves by less than top_k / 2 and no load moves by
//    a whole unit or more, except where a multiple of top_k is missing from the floors.
//  - spreading: a load c_e of expert e, counted over all source ranks, is split over R ranks exactly:
//    every rank gets floor(c_e / R), and the c_e mod R remaining units go to ranks e, e+1, ... (mod R),
//    so remainders do not pile up on rank 0 and per-expert totals are kept.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epsim {

/// Rounds `loads` (non-negative, finite) to integers summing to the multiple of `top_k` nearest to
/// their sum. Returns the integers.
std::vector<std::uint64_t> round_loads(const std::vector<double>& loads, std::uint32_t top_k);

/// Adds `load` units of expert `expert` to `counts` (row-major ranks x experts) by the spreading rule.
/// Returns false when a cell would pass 2^32 - 1.
bool spread_load(std::uint64_t load, std::uint32_t expert, std::uint32_t ranks, std::uint32_t experts,
                 std::vector<std::uint32_t>& counts);

}  // namespace epsim

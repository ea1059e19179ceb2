// The traffic of `epsim-hw bench ep_comm`: how many token rows each rank sends to each rank in an EP
// dispatch, drawn on the host by the rule of hw/calibration/ep_bench_traffic.hpp (DeepEP's benchmarks):
// experts placed contiguously (rank r holds experts [r * E / ep, (r + 1) * E / ep)), every token picks
// top_k distinct experts uniformly, and is sent once to each rank holding any of them, its own rank
// included (those rows never cross a link). The combine moves the same rows back. CPU-only, tested
// without a GPU; the counts become the send and receive sizes of an NCCL all-to-all-v.
#pragma once

#include <cstdint>
#include <vector>

namespace epsim::hw {

/// rows[src][dst]: token rows rank src sends to rank dst in the dispatch.
using PairRows = std::vector<std::vector<std::int64_t>>;

/// The rank that holds `expert` of `experts` placed contiguously over `ep` ranks.
int expert_rank(int expert, int experts, int ep);

/// Counts the rows of given routes: routes[src][t] lists the experts token t of rank src goes to.
/// Throws std::invalid_argument on an expert outside [0, experts) or experts not a multiple of ep.
PairRows pair_rows(int ep, int experts, const std::vector<std::vector<std::vector<int>>>& routes);

/// Draws uniform routing for `tokens` tokens on each of `ep` ranks (top_k distinct experts each, from a
/// std::mt19937_64 seeded with `seed`, the same on every platform) and counts its rows. Throws
/// std::invalid_argument when top_k is not in [1, experts] or experts is not a positive multiple of ep.
PairRows uniform_pair_rows(int ep, std::int64_t tokens, int top_k, int experts, std::uint64_t seed);

/// Rows rank r receives in the dispatch, its own included (what DeepEP's "nvlink" rate counts).
std::vector<std::int64_t> received_rows(const PairRows& rows);

}  // namespace epsim::hw

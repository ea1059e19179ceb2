// The traffic of one published dispatch/combine benchmark (an EpCommPoint), drawn the way the
// benchmark draws it, so that a published rate can be turned into bytes and a time, and the same
// traffic can be run through the engine. DeepEP-family kernels send a token once to each destination
// rank that holds any of its top-k experts (not once per expert), and across nodes once to each
// destination node (to the GPU with the sender's local index, which forwards it over NVLink).
// Experts are placed contiguously: rank r holds experts [r * E / ep, (r + 1) * E / ep).
#pragma once

#include <cstdint>
#include <vector>

#include "hw/calibration/measurements.hpp"

namespace epsim {

struct EpBenchTraffic {
  int ep = 0;
  int gpus_per_node = 0;
  double token_bytes = 0;  ///< activation_bytes(point.dtype, hidden, 128)
  /// [src][dst] payload bytes of the dispatch (a combine moves the same bytes from dst back to src);
  /// the diagonal holds the rows a rank keeps for itself (never on a link).
  std::vector<std::vector<double>> rank_bytes;
  /// [src][node] bytes src sends over RDMA to `node` (each token once per node); 0 for its own node.
  std::vector<std::vector<double>> node_bytes;
  /// Per rank: the bytes behind the published rate under the point's `counted` rule.
  std::vector<double> counted_bytes;
  /// Mean of counted_bytes over ranks (what a benchmark that averages over ranks divides by time).
  double mean_counted_bytes = 0;
};

/// Draws the point's routing with a deterministic generator seeded by `seed` (uniform: top-k distinct
/// experts uniformly; group_limited: max_nodes distinct nodes uniformly, then top-k experts uniformly
/// inside them; balanced: every rank receives tokens * min(ep, top_k) / ep rows from each rank, spread
/// evenly). Throws InputError at point.where when the point cannot be drawn (top_k above the experts it
/// may reach, experts not divisible by ep, ep not a multiple of gpus_per_node when ep > gpus_per_node).
EpBenchTraffic ep_bench_traffic(const EpCommPoint& point, std::uint64_t seed = 1);

/// The point's time: median_us when published, else mean_counted_bytes / published_GBps.
double ep_point_time_us(const EpCommPoint& point, const EpBenchTraffic& traffic);

/// Bytes on the busiest NVLink port: over ranks, the larger of the bytes a rank sends to and receives
/// from the other ranks (the diagonal never crosses a link). A combine has the same figure (reversed).
double busiest_nvlink_bytes(const EpBenchTraffic& traffic);
/// Bytes on the busiest NIC: over ranks, the larger of its RDMA node bytes sent and of those it
/// receives (rail forwarding: from the ranks with its local index on the other nodes). 0 on one node.
double busiest_rdma_bytes(const EpBenchTraffic& traffic);
/// True when the point spans more than one node (ep > gpus_per_node): RDMA sets its time.
bool ep_point_internode(const EpCommPoint& point);

}  // namespace epsim

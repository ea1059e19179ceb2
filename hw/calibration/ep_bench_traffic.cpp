#include "hw/calibration/ep_bench_traffic.hpp"

#include <algorithm>
#include <numeric>
#include <string>

#include "sim/core/input_error.hpp"
#include "sim/hardware/dtype.hpp"
#include "traces/synth/rng.hpp"

namespace epsim {
namespace {

/// An InputError at a point's "file:line:col".
[[noreturn]] void point_error(const std::string& where, const std::string& message) {
  const std::size_t col = where.rfind(':');
  const std::size_t line = col == std::string::npos || col == 0 ? std::string::npos : where.rfind(':', col - 1);
  if (line == std::string::npos) throw InputError(where, "", message);
  throw InputError(where.substr(0, line), where.substr(line + 1), message);
}

/// Ranks per node in the run: the whole EP group when it fits in one NVLink domain.
int ranks_per_node(const EpCommPoint& p) { return p.gpus_per_node > 0 ? std::min(p.gpus_per_node, p.ep) : p.ep; }

/// Chooses `k` distinct values of perm[0, n) uniformly (a partial Fisher-Yates shuffle: any starting
/// order of `perm` gives a uniform choice, so it is never restored), left in perm[0, k).
void choose(std::vector<int>& perm, int n, int k, Xoshiro256ss& rng) {
  for (int j = 0; j < k; ++j) {
    const int r = j + static_cast<int>(rng.below(static_cast<std::uint64_t>(n - j)));
    std::swap(perm[j], perm[r]);
  }
}

void check_point(const EpCommPoint& p) {
  const std::string at = std::string(to_string(p.kernel)) + " point: ";
  if (p.ep < 1) point_error(p.where, at + "ep must be >= 1");
  if (p.top_k < 1 || p.hidden < 1 || p.tokens < 0 || p.experts < 1)
    point_error(p.where, at + "top_k, hidden and experts must be >= 1 and tokens >= 0");
  if (p.ep > ranks_per_node(p) && p.ep % ranks_per_node(p) != 0)
    point_error(p.where, at + "ep " + std::to_string(p.ep) + " is not a multiple of gpus_per_node " +
                             std::to_string(p.gpus_per_node));
  if (p.routing != BenchRouting::balanced && p.experts % p.ep != 0)
    point_error(p.where, at + "experts " + std::to_string(p.experts) + " are not divisible by ep " + std::to_string(p.ep) +
                             " (contiguous placement needs equal experts per rank)");
}

}  // namespace

EpBenchTraffic ep_bench_traffic(const EpCommPoint& point, std::uint64_t seed) {
  check_point(point);
  const int ep = point.ep;
  const int per_node = ranks_per_node(point);
  const int nodes = ep / per_node;
  EpBenchTraffic t;
  t.ep = ep;
  t.gpus_per_node = per_node;
  t.token_bytes = static_cast<double>(activation_bytes(point.dtype, point.hidden, 128));
  t.rank_bytes.assign(ep, std::vector<double>(ep, 0.0));
  t.node_bytes.assign(ep, std::vector<double>(nodes, 0.0));
  const double tb = t.token_bytes;
  const double tokens = static_cast<double>(point.tokens);
  const int fanout = std::min(ep, point.top_k);  // ranks a token reaches under the balanced router

  if (point.routing == BenchRouting::balanced) {
    // Token i of a rank goes to the `fanout` consecutive ranks from a start that runs evenly over all
    // ranks: every rank receives tokens * fanout / ep rows from each rank.
    for (int s = 0; s < ep; ++s) {
      for (int d = 0; d < ep; ++d) t.rank_bytes[s][d] = tokens * fanout / ep * tb;
      for (int start = 0; start < ep; ++start) {
        std::vector<bool> reached(nodes, false);
        for (int j = 0; j < fanout; ++j) reached[((start + j) % ep) / per_node] = true;
        for (int n = 0; n < nodes; ++n)
          if (reached[n] && n != s / per_node) t.node_bytes[s][n] += tokens / ep * tb;
      }
    }
  } else {
    const int experts_per_rank = point.experts / ep;
    const int experts_per_node = experts_per_rank * per_node;
    int max_nodes = nodes;
    if (point.routing == BenchRouting::group_limited && point.max_nodes > 0) max_nodes = std::min(point.max_nodes, nodes);
    if (point.top_k > max_nodes * experts_per_node)
      point_error(point.where, std::string(to_string(point.kernel)) + " point: top_k " + std::to_string(point.top_k) +
                                   " exceeds the " + std::to_string(max_nodes * experts_per_node) +
                                   " experts a token may reach");
    Xoshiro256ss rng(mix_seed(seed, {static_cast<std::uint64_t>(ep), static_cast<std::uint64_t>(point.experts),
                                     static_cast<std::uint64_t>(point.top_k)}));
    std::vector<int> node_perm(nodes), expert_perm(max_nodes * experts_per_node);
    std::iota(node_perm.begin(), node_perm.end(), 0);
    std::iota(expert_perm.begin(), expert_perm.end(), 0);
    std::vector<char> rank_hit(ep), node_hit(nodes);
    for (int s = 0; s < ep; ++s) {
      for (std::int64_t i = 0; i < point.tokens; ++i) {
        // The nodes the token may reach (all of them unless group-limited), then top-k experts inside.
        if (max_nodes < nodes) choose(node_perm, nodes, max_nodes, rng);
        choose(expert_perm, max_nodes * experts_per_node, point.top_k, rng);
        std::fill(rank_hit.begin(), rank_hit.end(), 0);
        std::fill(node_hit.begin(), node_hit.end(), 0);
        for (int j = 0; j < point.top_k; ++j) {
          const int slot = expert_perm[j];
          const int node = max_nodes < nodes ? node_perm[slot / experts_per_node] : slot / experts_per_node;
          const int rank = node * per_node + (slot % experts_per_node) / experts_per_rank;
          rank_hit[rank] = 1;
          node_hit[node] = 1;
        }
        for (int d = 0; d < ep; ++d)
          if (rank_hit[d]) t.rank_bytes[s][d] += tb;
        for (int n = 0; n < nodes; ++n)
          if (node_hit[n] && n != s / per_node) t.node_bytes[s][n] += tb;
      }
    }
  }

  t.counted_bytes.assign(ep, 0.0);
  for (int r = 0; r < ep; ++r) {
    switch (point.counted) {
      case CountedBandwidth::nvlink:
        for (int s = 0; s < ep; ++s) t.counted_bytes[r] += t.rank_bytes[s][r];
        break;
      case CountedBandwidth::rdma:
        for (int n = 0; n < nodes; ++n) t.counted_bytes[r] += t.node_bytes[r][n];
        break;
      case CountedBandwidth::algorithm:
        t.counted_bytes[r] = tokens * fanout * tb;
        break;
    }
  }
  t.mean_counted_bytes = std::accumulate(t.counted_bytes.begin(), t.counted_bytes.end(), 0.0) / ep;
  return t;
}

double ep_point_time_us(const EpCommPoint& point, const EpBenchTraffic& traffic) {
  if (point.median_us > 0) return point.median_us;
  if (!(point.published_GBps > 0))
    point_error(point.where, std::string(to_string(point.kernel)) + " point: neither median_us nor a published rate");
  if (!(traffic.mean_counted_bytes > 0))
    point_error(point.where, std::string(to_string(point.kernel)) +
                                 " point: no bytes behind the published rate under its counted rule (" +
                                 to_string(point.counted) + ")");
  return traffic.mean_counted_bytes / (point.published_GBps * 1e3);  // 1 GB/s = 1e3 bytes per us
}

double busiest_nvlink_bytes(const EpBenchTraffic& traffic) {
  double busiest = 0;
  for (int r = 0; r < traffic.ep; ++r) {
    double sent = 0, received = 0;
    for (int o = 0; o < traffic.ep; ++o) {
      if (o == r) continue;
      sent += traffic.rank_bytes[r][o];
      received += traffic.rank_bytes[o][r];
    }
    busiest = std::max({busiest, sent, received});
  }
  return busiest;
}

double busiest_rdma_bytes(const EpBenchTraffic& traffic) {
  const int per_node = traffic.gpus_per_node;
  double busiest = 0;
  for (int r = 0; r < traffic.ep; ++r) {
    double sent = 0, received = 0;
    for (double b : traffic.node_bytes[r]) sent += b;
    for (int s = r % per_node; s < traffic.ep; s += per_node)
      if (s / per_node != r / per_node) received += traffic.node_bytes[s][r / per_node];
    busiest = std::max({busiest, sent, received});
  }
  return busiest;
}

bool ep_point_internode(const EpCommPoint& point) { return point.ep > ranks_per_node(point); }

}  // namespace epsim

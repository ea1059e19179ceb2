// What one all-to-all-v moves: an amount per (source GPU, destination GPU) pair, and with per-node
// token copies, per (rank, node) amounts that cross RDMA once. The amounts are bytes, or tokens that
// an exchange scales by its bytes per token (exchange_shape.hpp). A payload of few pairs may list
// them instead of filling a matrix.
#pragma once

#include <utility>
#include <vector>

namespace epsim {

struct ExchangePayload {
  /// One pair's amount, for a payload given as a list.
  struct Pair {
    int from = 0;
    int to = 0;
    double amount = 0;
  };
  /// gpu_bytes[a][b]: payload from GPU a to GPU b (the diagonal never leaves the GPU).
  std::vector<std::vector<double>> gpu_bytes;
  /// In place of the matrices (both left empty), a payload of few pairs as lists: the pairs, each once,
  /// in (from, to) order, which is the order a walk of the matrix meets them. A gradient reduce moves
  /// one column of n x n, and each of FasterMoE's pipelined stages one group's pairs: at EP 1,024 a
  /// matrix is 8 MB of pages to fill and a million pairs to walk for each.
  std::vector<Pair> pairs;
  /// With pairs: node_bytes as (rank, node) pairs in that order, each once.
  std::vector<Pair> node_pairs;
  /// With pairs: per_node token copies, as a node_bytes matrix (even of zeros) says.
  bool per_node = false;
  /// node_bytes[r][m]: per_node token copies, the bytes between rank r and node m (m not r's node)
  /// that cross RDMA once, between r and its rail peer in m. Empty: every pair travels on its own.
  std::vector<std::vector<double>> node_bytes;
  /// Combine direction: node bytes flow from node m's rail peer to rank r (dispatch: from r to m).
  bool to_sources = false;

  ExchangePayload() = default;
  ExchangePayload(std::vector<std::vector<double>> gpu) : gpu_bytes(std::move(gpu)) {}  // NOLINT: a plain matrix is a payload

  /// Appends a pair's amount to a list built in (from, to) order: a pair met again right after itself
  /// adds to its amount, in the order met, as a matrix filled amount by amount would hold it.
  static void append(std::vector<Pair>& pairs, int from, int to, double amount) {
    if (!pairs.empty() && pairs.back().from == from && pairs.back().to == to) pairs.back().amount += amount;
    else pairs.push_back({from, to, amount});
  }
};

}  // namespace epsim

// What one all-to-all-v moves: an amount per (source GPU, destination GPU) pair, and with per-node
// token copies, per (rank, node) amounts that cross RDMA once. The amounts are bytes, or tokens that
// an exchange scales by its bytes per token (exchange_shape.hpp).
#pragma once

#include <utility>
#include <vector>

namespace epsim {

struct ExchangePayload {
  /// gpu_bytes[a][b]: payload from GPU a to GPU b (the diagonal never leaves the GPU).
  std::vector<std::vector<double>> gpu_bytes;
  /// node_bytes[r][m]: per_node token copies, the bytes between rank r and node m (m not r's node)
  /// that cross RDMA once, between r and its rail peer in m. Empty: every pair travels on its own.
  std::vector<std::vector<double>> node_bytes;
  /// Combine direction: node bytes flow from node m's rail peer to rank r (dispatch: from r to m).
  bool to_sources = false;

  ExchangePayload() = default;
  ExchangePayload(std::vector<std::vector<double>> gpu) : gpu_bytes(std::move(gpu)) {}  // NOLINT: a plain matrix is a payload
};

}  // namespace epsim

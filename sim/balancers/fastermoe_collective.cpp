#include "sim/balancers/fastermoe_collective.hpp"

#include <algorithm>
#include <cassert>

namespace epsim {

const char* to_string(ShadowCollective collective) {
  switch (collective) {
    case ShadowCollective::ring: return "ring";
    case ShadowCollective::tree: return "tree";
    case ShadowCollective::star: return "star";
  }
  return "?";
}

int nccl_btree_parent(int rank, int nranks) {
  assert(rank >= 0 && rank < nranks);
  if (rank == 0) return -1;
  int bit = 1;
  while (bit < nranks && (bit & rank) == 0) bit <<= 1;
  // The lowest set bit cleared and the next one set; past the end, just the lowest bit cleared.
  const int up = (rank ^ bit) | (bit << 1);
  return up < nranks ? up : rank ^ bit;
}

int nccl_dtree_parent(int rank, int nranks) {
  assert(rank >= 0 && rank < nranks);
  if (nranks % 2 == 1) {
    const int parent = nccl_btree_parent((rank - 1 + nranks) % nranks, nranks);
    return parent < 0 ? -1 : (parent + 1) % nranks;
  }
  const int parent = nccl_btree_parent(nranks - 1 - rank, nranks);
  return parent < 0 ? -1 : nranks - 1 - parent;
}

namespace {

/// A tree given by each node's parent, its edges oriented away from node 0 (the owner's node):
/// (from, to) pairs in breadth-first order from node 0, children by ascending index.
std::vector<std::pair<int, int>> edges_away_from_zero(const std::vector<int>& parent) {
  const int m = static_cast<int>(parent.size());
  std::vector<std::vector<int>> adjacent(m);
  for (int v = 0; v < m; ++v) {
    if (parent[v] < 0) continue;
    adjacent[v].push_back(parent[v]);
    adjacent[parent[v]].push_back(v);
  }
  for (auto& list : adjacent) std::sort(list.begin(), list.end());
  std::vector<std::pair<int, int>> edges;
  std::vector<bool> seen(m, false);
  std::vector<int> queue{0};
  seen[0] = true;
  for (std::size_t head = 0; head < queue.size(); ++head) {
    const int v = queue[head];
    for (int w : adjacent[v]) {
      if (seen[w]) continue;
      seen[w] = true;
      edges.emplace_back(v, w);
      queue.push_back(w);
    }
  }
  return edges;
}

}  // namespace

std::vector<CollectiveEdge> broadcast_edges(ShadowCollective collective, int root, int num_gpus, int gpus_per_node,
                                            std::int64_t bytes) {
  assert(num_gpus >= 1 && root >= 0 && root < num_gpus && gpus_per_node >= 1);
  std::vector<CollectiveEdge> edges;
  if (num_gpus == 1) return edges;
  switch (collective) {
    case ShadowCollective::star:
      for (int g = 0; g < num_gpus; ++g)
        if (g != root) edges.push_back({root, g, bytes});
      return edges;
    case ShadowCollective::ring:
      // The chain owner -> owner + 1 -> ... -> owner - 1 of the ring 0 -> 1 -> ... -> n - 1 -> 0.
      for (int k = 0; k + 1 < num_gpus; ++k)
        edges.push_back({(root + k) % num_gpus, (root + k + 1) % num_gpus, bytes});
      return edges;
    case ShadowCollective::tree: break;
  }
  const int per_node = std::min(gpus_per_node, num_gpus);
  const int nodes = (num_gpus + per_node - 1) / per_node;
  const int root_node = root / per_node;
  const int root_local = root % per_node;
  // Node m's head: the owner in its own node, else the GPU of the owner's local index (the node's
  // last GPU when a short last node has none).
  auto node_first = [&](int node) { return node * per_node; };
  auto node_size = [&](int node) { return std::min(per_node, num_gpus - node_first(node)); };
  auto head = [&](int node) { return node_first(node) + std::min(root_local, node_size(node) - 1); };
  // Between nodes, numbered from the owner's (relative rank r is node (root_node + r) mod nodes): the
  // two trees, half the bytes each (the odd byte on the first).
  if (nodes > 1) {
    const std::int64_t first_half = bytes - bytes / 2;
    const std::int64_t second_half = bytes / 2;
    std::vector<int> first(nodes), second(nodes);
    for (int r = 0; r < nodes; ++r) {
      first[r] = nccl_btree_parent(r, nodes);
      second[r] = nccl_dtree_parent(r, nodes);
    }
    auto gpu_of = [&](int relative) { return head((root_node + relative) % nodes); };
    for (const auto& [from, to] : edges_away_from_zero(first)) edges.push_back({gpu_of(from), gpu_of(to), first_half});
    for (const auto& [from, to] : edges_away_from_zero(second))
      if (second_half > 0) edges.push_back({gpu_of(from), gpu_of(to), second_half});
  }
  // Inside each node: the chain from its head through the node's other GPUs, in ring order.
  for (int node = 0; node < nodes; ++node) {
    const int size = node_size(node);
    const int start = head(node) - node_first(node);
    for (int k = 0; k + 1 < size; ++k)
      edges.push_back({node_first(node) + (start + k) % size, node_first(node) + (start + k + 1) % size, bytes});
  }
  return edges;
}

}  // namespace epsim

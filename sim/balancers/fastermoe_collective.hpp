// How FasterMoE's shadow weights reach every GPU and how their gradients return, as the point-to-point
// transfers of one collective. FastMoE v1 calls ncclBcast for each shadowed expert's weights and
// ncclReduce for its gradients (cuda/fastermoe/smart_schedule.{h,cpp}). NCCL runs both as a pipelined
// ring: the message is cut into chunks and each GPU forwards a chunk to its ring successor while it
// receives the next, so every link of the chain root -> r1 -> ... -> r(n-1) carries the whole message
// once, all links at the same time. (NCCL's tree algorithm exists for all-reduce only; broadcast and
// reduce are ring-only in NCCL.)
//
// In the Plan, EP-backend transfers of one pass form one collective whose point-to-point pieces move
// concurrently, so a pipelined ring is exactly its chain of transfers, each of the full size. What the
// chain leaves out is the pipeline's fill: the last GPU starts receiving (n - 1) chunks after the first
// (NCCL's chunks are a few hundred KB to a few MB against expert weights of tens to hundreds of MB).
// A reduce is the same chain in reverse (r(n-1) -> ... -> r1 -> root), each GPU adding its own
// gradients to the partial sum before passing it on.
//
// Three shapes are offered:
//   ring: NCCL's ring. Ranks in EP order, which puts the GPUs of a node next to each other, so the
//         ring crosses each node boundary once (and back from the last node to the first). The
//         broadcast chain starts at the owner and follows the ring: owner, owner + 1, ..., owner - 1.
//   tree: NCCL's double binary tree (as its all-reduce builds it: ncclGetBtree / ncclGetDtree over the
//         nodes) approximated by its edges. Inside each node a chain from the node's head GPU (the owner
//         in the owner's node, the GPU of the owner's local index elsewhere) through the node's other
//         GPUs; between nodes two binary trees over the node heads, nodes numbered from the owner's,
//         each carrying half the bytes, their edges oriented away from the owner's node.
//   star: the owner sends the whole message to every other GPU itself (and receives every GPU's
//         gradients itself): what a naive point-to-point broadcast does.
#pragma once

#include <cstdint>
#include <vector>

namespace epsim {

enum class ShadowCollective { ring, tree, star };

const char* to_string(ShadowCollective collective);

/// One point-to-point piece of a broadcast: `bytes` from `src` to `dst`.
struct CollectiveEdge {
  int src = 0;
  int dst = 0;
  std::int64_t bytes = 0;
};

/// The edges of a broadcast of `bytes` from `root` to every GPU of an EP group of `num_gpus` GPUs,
/// `gpus_per_node` to a node (GPU g on node g / gpus_per_node). Every GPU but the root is the
/// destination of at least one edge; no edge leads back to the root. A reduce to `root` is the same
/// edges reversed. Deterministic: the same arguments give the same edges in the same order.
std::vector<CollectiveEdge> broadcast_edges(ShadowCollective collective, int root, int num_gpus, int gpus_per_node,
                                            std::int64_t bytes);

/// NCCL's binary tree over `nranks` ranks (ncclGetBtree): the parent of `rank`, -1 for rank 0.
int nccl_btree_parent(int rank, int nranks);

/// The second tree of NCCL's double binary tree (ncclGetDtree): the first tree mirrored (an even
/// number of ranks: r -> nranks - 1 - r) or shifted by one (odd: r -> r - 1). The parent of `rank`,
/// -1 for that tree's root.
int nccl_dtree_parent(int rank, int nranks);

}  // namespace epsim

// A C++ port of DeepSeek's EPLB (`deepseek-ai/EPLB: eplb.py`, MIT licence): rebalance_experts and its
// building blocks, one MoE layer at a time (the Python vectorises over layers, but every layer is
// independent). Pure functions, no state, no simulator types.
//
// Tie rule (torch's sort is not stable, so the Python leaves ties to the library): every sort is a
// stable descending sort by weight (equal weights keep index order), every argmax takes the lowest
// index, and balanced_packing's "lightest pack" takes the lowest pack index among equals. Under this
// rule the README example (2 layers, 12 experts, 16 replicas, 4 groups, 2 nodes, 8 GPUs) gives the
// published phy2log exactly (tests/sim/deepseek_eplb_test.cpp).
#pragma once

#include <vector>

namespace epsim {

/// balanced_packing: n items to `num_packs` packs of exactly n/num_packs items each, by LPT (heaviest
/// first, each to the lightest pack that still has room).
struct PackResult {
  std::vector<int> pack_index;    ///< per item, its pack
  std::vector<int> rank_in_pack;  ///< per item, its position in the pack (0, 1, ...)
};
/// Requires weight.size() % num_packs == 0 (throws std::invalid_argument).
PackResult balanced_packing(const std::vector<double>& weight, int num_packs);

/// replicate_experts: `num_phy` >= weight.size() physical experts; physical i < num_log is logical i,
/// each further one goes to argmax_e weight[e] / logcnt[e] (Jefferson/D'Hondt apportionment).
struct ReplicateResult {
  std::vector<int> phy2log;  ///< [num_phy] logical expert of each physical expert
  std::vector<int> rank;     ///< [num_phy] replica rank of each physical expert (0 = first copy)
  std::vector<int> logcnt;   ///< [num_log] replicas of each logical expert
};
ReplicateResult replicate_experts(const std::vector<double>& weight, int num_phy);

/// One layer's placement: physical slot p lives on GPU p / (num_phy / num_gpus).
struct EplbLayout {
  std::vector<int> phy2log;               ///< [P] logical expert of each physical slot
  std::vector<int> phyrank;               ///< [P] replica rank of each slot
  std::vector<std::vector<int>> log2phy;  ///< [E][maxlogcnt] slots of each expert, padded with -1
  std::vector<int> logcnt;                ///< [E] replicas of each expert
};

/// rebalance_experts_hierarchical: pack expert groups onto nodes, replicate inside each node, pack
/// the node's physical experts onto its GPUs. Preconditions (std::invalid_argument otherwise):
/// E % num_groups == 0, num_groups % num_nodes == 0, num_gpus % num_nodes == 0,
/// num_phy % num_gpus == 0, num_phy >= E. log2phy is filled too.
EplbLayout rebalance_experts_hierarchical(const std::vector<double>& weight, int num_phy, int num_groups, int num_nodes,
                                          int num_gpus);

/// rebalance_experts: the hierarchical policy when num_groups % num_nodes == 0, else the global one
/// (the hierarchical policy with one group and one node), exactly as eplb.py decides.
EplbLayout rebalance_experts(const std::vector<double>& weight, int num_replicas, int num_groups, int num_nodes,
                             int num_gpus);

/// The same over layers: weight[L][E] -> one layout per layer.
std::vector<EplbLayout> rebalance_experts(const std::vector<std::vector<double>>& weight, int num_replicas,
                                          int num_groups, int num_nodes, int num_gpus);

}  // namespace epsim

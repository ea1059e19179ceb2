#include "sim/balancers/eplb_algorithm.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace epsim {

namespace {

void require(bool ok, const char* what) {
  if (!ok) throw std::invalid_argument(std::string("eplb: ") + what);
}

std::vector<int> inverse(const std::vector<int>& perm) {
  std::vector<int> inv(perm.size());
  for (std::size_t i = 0; i < perm.size(); ++i) inv[perm[i]] = static_cast<int>(i);
  return inv;
}

}  // namespace

PackResult balanced_packing(const std::vector<double>& weight, int num_packs) {
  const int n = static_cast<int>(weight.size());
  require(num_packs > 0 && n % num_packs == 0, "balanced_packing needs the item count to be a multiple of packs");
  const int per_pack = n / num_packs;
  PackResult out;
  out.pack_index.assign(n, -1);
  out.rank_in_pack.assign(n, -1);
  if (per_pack == 1) {
    std::iota(out.pack_index.begin(), out.pack_index.end(), 0);
    std::fill(out.rank_in_pack.begin(), out.rank_in_pack.end(), 0);
    return out;
  }
  std::vector<int> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return weight[a] > weight[b]; });
  std::vector<double> pack_weight(num_packs, 0.0);
  std::vector<int> pack_items(num_packs, 0);
  for (int item : order) {
    int best = -1;
    for (int p = 0; p < num_packs; ++p)
      if (pack_items[p] < per_pack && (best < 0 || pack_weight[p] < pack_weight[best])) best = p;
    out.pack_index[item] = best;
    out.rank_in_pack[item] = pack_items[best];
    pack_weight[best] += weight[item];
    ++pack_items[best];
  }
  return out;
}

ReplicateResult replicate_experts(const std::vector<double>& weight, int num_phy) {
  const int num_log = static_cast<int>(weight.size());
  require(num_log > 0 && num_phy >= num_log, "replicate_experts needs at least one slot per expert");
  ReplicateResult out;
  out.phy2log.resize(num_phy);
  out.rank.assign(num_phy, 0);
  out.logcnt.assign(num_log, 1);
  std::iota(out.phy2log.begin(), out.phy2log.begin() + num_log, 0);
  for (int i = num_log; i < num_phy; ++i) {
    int best = 0;
    double best_load = weight[0] / out.logcnt[0];
    for (int e = 1; e < num_log; ++e) {
      const double load = weight[e] / out.logcnt[e];
      if (load > best_load) {
        best = e;
        best_load = load;
      }
    }
    out.phy2log[i] = best;
    out.rank[i] = out.logcnt[best];
    ++out.logcnt[best];
  }
  return out;
}

EplbLayout rebalance_experts_hierarchical(const std::vector<double>& weight, int num_phy, int num_groups, int num_nodes,
                                          int num_gpus) {
  const int num_log = static_cast<int>(weight.size());
  require(num_groups > 0 && num_nodes > 0 && num_gpus > 0, "groups, nodes and GPUs must be positive");
  require(num_log % num_groups == 0, "the expert count must be a multiple of num_groups");
  require(num_groups % num_nodes == 0, "num_groups must be a multiple of num_nodes");
  require(num_gpus % num_nodes == 0, "num_gpus must be a multiple of num_nodes");
  require(num_phy % num_gpus == 0, "the physical expert count must be a multiple of num_gpus");
  require(num_phy >= num_log, "fewer physical than logical experts");
  const int group_size = num_log / num_groups;
  const int groups_per_node = num_groups / num_nodes;
  const int phy_per_gpu = num_phy / num_gpus;
  const int log_per_node = num_log / num_nodes;
  const int phy_per_node = num_phy / num_nodes;
  const int gpus_per_node = num_gpus / num_nodes;

  // Step 1: pack groups onto nodes; "mlog" numbers the experts node by node.
  std::vector<double> tokens_per_group(num_groups, 0.0);
  for (int e = 0; e < num_log; ++e) tokens_per_group[e / group_size] += weight[e];
  const PackResult groups = balanced_packing(tokens_per_group, num_nodes);
  std::vector<int> log2mlog(num_log);
  for (int e = 0; e < num_log; ++e) {
    const int g = e / group_size;
    log2mlog[e] = (groups.pack_index[g] * groups_per_node + groups.rank_in_pack[g]) * group_size + e % group_size;
  }
  const std::vector<int> mlog2log = inverse(log2mlog);

  EplbLayout out;
  out.phy2log.assign(num_phy, -1);
  out.phyrank.assign(num_phy, -1);
  std::vector<int> mlogcnt(num_log, 0);
  for (int node = 0; node < num_nodes; ++node) {
    // Step 2: replicate inside the node.
    std::vector<double> tokens_per_mlog(log_per_node);
    for (int i = 0; i < log_per_node; ++i) tokens_per_mlog[i] = weight[mlog2log[node * log_per_node + i]];
    const ReplicateResult rep = replicate_experts(tokens_per_mlog, phy_per_node);
    for (int i = 0; i < log_per_node; ++i) mlogcnt[node * log_per_node + i] = rep.logcnt[i];
    // Step 3: pack the node's physical experts onto its GPUs, by per-replica load.
    std::vector<double> tokens_per_phy(phy_per_node);
    for (int j = 0; j < phy_per_node; ++j)
      tokens_per_phy[j] = tokens_per_mlog[rep.phy2log[j]] / rep.logcnt[rep.phy2log[j]];
    const PackResult packs = balanced_packing(tokens_per_phy, gpus_per_node);
    std::vector<int> phy2pphy(phy_per_node);
    for (int j = 0; j < phy_per_node; ++j) phy2pphy[j] = packs.pack_index[j] * phy_per_gpu + packs.rank_in_pack[j];
    const std::vector<int> pphy2phy = inverse(phy2pphy);
    for (int k = 0; k < phy_per_node; ++k) {
      const int phy = pphy2phy[k];
      out.phy2log[node * phy_per_node + k] = mlog2log[rep.phy2log[phy] + node * log_per_node];
      out.phyrank[node * phy_per_node + k] = rep.rank[phy];
    }
  }
  out.logcnt.resize(num_log);
  for (int e = 0; e < num_log; ++e) out.logcnt[e] = mlogcnt[log2mlog[e]];
  const int maxcnt = *std::max_element(out.logcnt.begin(), out.logcnt.end());
  out.log2phy.assign(num_log, std::vector<int>(maxcnt, -1));
  for (int p = 0; p < num_phy; ++p) out.log2phy[out.phy2log[p]][out.phyrank[p]] = p;
  return out;
}

EplbLayout rebalance_experts(const std::vector<double>& weight, int num_replicas, int num_groups, int num_nodes,
                             int num_gpus) {
  require(num_nodes > 0, "num_nodes must be positive");
  if (num_groups % num_nodes == 0)
    return rebalance_experts_hierarchical(weight, num_replicas, num_groups, num_nodes, num_gpus);
  return rebalance_experts_hierarchical(weight, num_replicas, 1, 1, num_gpus);
}

std::vector<EplbLayout> rebalance_experts(const std::vector<std::vector<double>>& weight, int num_replicas,
                                          int num_groups, int num_nodes, int num_gpus) {
  std::vector<EplbLayout> out;
  out.reserve(weight.size());
  for (const auto& layer : weight)
    out.push_back(rebalance_experts(layer, num_replicas, num_groups, num_nodes, num_gpus));
  return out;
}

}  // namespace epsim

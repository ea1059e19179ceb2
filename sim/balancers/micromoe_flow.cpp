#include "sim/balancers/micromoe_flow.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace epsim {

namespace {

/// Dinic's max-flow on a fixed graph whose capacities may be raised between runs; the flow found so
/// far is kept, so a run after raising capacities only adds what the increase allows.
class MaxFlow {
 public:
  explicit MaxFlow(int nodes) : first_(nodes, -1), last_(nodes, -1), level_(nodes), next_edge_(nodes) {}

  /// Adds u -> v with capacity `cap` and its reverse; returns the forward edge's index. Edges out of a
  /// node are tried in the order they were added.
  int add_edge(int u, int v, std::int64_t cap) {
    const int id = append(u, v, cap);
    append(v, u, 0);
    return id;
  }
  void set_capacity(int edge, std::int64_t cap) { cap_[edge] = cap; }
  std::int64_t flow(int edge) const { return flow_[edge]; }
  void add_flow(int edge, std::int64_t f) {
    flow_[edge] += f;
    flow_[edge ^ 1] -= f;
  }
  std::vector<std::int64_t> flows() const { return flow_; }
  void restore(const std::vector<std::int64_t>& flows) { flow_ = flows; }

  /// Augments from s to t until no path is left; returns the flow added.
  std::int64_t augment(int s, int t) {
    std::int64_t added = 0;
    while (levels(s, t)) {
      next_edge_ = first_;
      while (const std::int64_t f = push(s, t, std::numeric_limits<std::int64_t>::max())) added += f;
    }
    return added;
  }

 private:
  /// A directed edge at the end of `from`'s list (kept in insertion order).
  int append(int from, int dest, std::int64_t cap) {
    const int e = static_cast<int>(to_.size());
    to_.push_back(dest);
    cap_.push_back(cap);
    flow_.push_back(0);
    link_.push_back(-1);
    if (first_[from] < 0)
      first_[from] = e;
    else
      link_[last_[from]] = e;
    last_[from] = e;
    return e;
  }
  bool levels(int s, int t) {
    std::fill(level_.begin(), level_.end(), -1);
    queue_.clear();
    queue_.push_back(s);
    level_[s] = 0;
    for (std::size_t head = 0; head < queue_.size(); ++head) {
      const int u = queue_[head];
      for (int e = first_[u]; e >= 0; e = link_[e])
        if (cap_[e] - flow_[e] > 0 && level_[to_[e]] < 0) {
          level_[to_[e]] = level_[u] + 1;
          queue_.push_back(to_[e]);
        }
    }
    return level_[t] >= 0;
  }
  std::int64_t push(int u, int t, std::int64_t limit) {
    if (u == t) return limit;
    for (int& e = next_edge_[u]; e >= 0; e = link_[e]) {
      const int v = to_[e];
      const std::int64_t room = cap_[e] - flow_[e];
      if (room <= 0 || level_[v] != level_[u] + 1) continue;
      if (const std::int64_t f = push(v, t, std::min(limit, room))) {
        add_flow(e, f);
        return f;
      }
    }
    return 0;
  }

  std::vector<int> first_, last_, link_, to_;
  std::vector<std::int64_t> cap_, flow_;
  std::vector<int> level_, next_edge_, queue_;
};

/// A feasible max load, usually close to the optimum: experts in decreasing load, each poured over
/// its GPUs so as to raise the lowest of them first (water-filling), in whole tokens.
std::int64_t water_filling_bound(const std::vector<std::int64_t>& loads, const std::vector<std::vector<int>>& gpus_of,
                                 int num_gpus) {
  std::vector<int> order(loads.size());
  for (std::size_t e = 0; e < order.size(); ++e) order[e] = static_cast<int>(e);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return loads[a] > loads[b]; });
  std::vector<std::int64_t> gpu_load(num_gpus, 0);
  std::vector<std::int64_t> level;
  for (int e : order) {
    std::int64_t left = loads[e];
    if (left == 0) continue;
    level.clear();
    for (int g : gpus_of[e]) level.push_back(gpu_load[g]);
    std::sort(level.begin(), level.end());
    // The water line w: fill the k lowest GPUs up to the next one's load while tokens last.
    std::size_t k = 1;
    std::int64_t w = level[0];
    while (left > 0) {
      const auto width = static_cast<std::int64_t>(k);
      if (k == level.size() || (level[k] - w) * width >= left) {
        w += (left + width - 1) / width;  // the line stops here (rounded up to whole tokens)
        break;
      }
      left -= (level[k] - w) * width;
      w = level[k];
      ++k;
    }
    // Pour: every GPU of e below w rises to w, until the expert's tokens run out.
    left = loads[e];
    for (int g : gpus_of[e]) {
      const std::int64_t take = std::min(left, std::max<std::int64_t>(0, w - gpu_load[g]));
      gpu_load[g] += take;
      left -= take;
    }
  }
  return *std::max_element(gpu_load.begin(), gpu_load.end());
}

}  // namespace

ReplicaBalance micromoe_balance_over_replicas(const std::vector<std::int64_t>& loads,
                                              const std::vector<std::vector<int>>& gpus_of, int num_gpus) {
  const int experts = static_cast<int>(loads.size());
  if (static_cast<int>(gpus_of.size()) != experts || num_gpus <= 0)
    throw std::logic_error("micromoe: one GPU list per expert and at least one GPU are needed");
  // Node ids: source 0, experts 1..E, GPUs E+1..E+N, sink E+N+1.
  const int source = 0;
  const int sink = experts + num_gpus + 1;
  MaxFlow net(sink + 1);
  std::int64_t total = 0;
  std::vector<std::int64_t> pinned(num_gpus, 0);  // load of experts with one instance
  std::vector<std::int64_t> home_load(num_gpus, 0);
  std::vector<std::vector<int>> edge(experts);
  for (int e = 0; e < experts; ++e) {
    if (gpus_of[e].empty() || loads[e] < 0) throw std::logic_error("micromoe: every expert needs an instance");
    total += loads[e];
    home_load[gpus_of[e].front()] += loads[e];
    if (gpus_of[e].size() == 1) pinned[gpus_of[e].front()] += loads[e];
    net.add_edge(source, 1 + e, loads[e]);
    for (int g : gpus_of[e]) edge[e].push_back(net.add_edge(1 + e, 1 + experts + g, loads[e]));
  }
  std::vector<int> sink_edge(num_gpus);
  for (int g = 0; g < num_gpus; ++g) sink_edge[g] = net.add_edge(1 + experts + g, sink, 0);

  // The optimum lies in [lo, hi]: no GPU below the mean or its pinned load; every expert at home is feasible.
  std::int64_t lo = (total + num_gpus - 1) / num_gpus;
  lo = std::max(lo, *std::max_element(pinned.begin(), pinned.end()));
  std::int64_t hi = std::max(lo, std::min(*std::max_element(home_load.begin(), home_load.end()),
                                          water_filling_bound(loads, gpus_of, num_gpus)));
  auto raise_to = [&](std::int64_t z) {
    for (int g = 0; g < num_gpus; ++g) net.set_capacity(sink_edge[g], z);
  };
  // `carried` is the flow of the largest bound known to be too small; each step starts from it.
  std::vector<std::int64_t> below = net.flows();
  std::int64_t carried = 0;
  while (lo < hi) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    net.restore(below);
    raise_to(mid);
    const std::int64_t flow = carried + net.augment(source, sink);
    if (flow == total) {
      hi = mid;
    } else {
      // Raising every GPU's bound by d adds at most N d tokens: the missing ones need d >= deficit / N.
      lo = std::max(mid + 1, mid + (total - flow + num_gpus - 1) / num_gpus);
      below = net.flows();
      carried = flow;
    }
  }
  net.restore(below);
  raise_to(hi);
  if (carried + net.augment(source, sink) != total) throw std::logic_error("micromoe: the flow lost tokens");

  ReplicaBalance result;
  result.max_load = hi;
  result.per_instance.resize(experts);
  std::vector<std::int64_t> gpu_load(num_gpus, 0);
  for (int e = 0; e < experts; ++e) {
    for (int id : edge[e]) result.per_instance[e].push_back(net.flow(id));
    for (std::size_t r = 0; r < gpus_of[e].size(); ++r) gpu_load[gpus_of[e][r]] += result.per_instance[e][r];
  }
  // Tokens a replica took that its home can take back without passing the optimum stay home.
  for (int e = 0; e < experts; ++e) {
    const int home = gpus_of[e].front();
    for (std::size_t r = 1; r < gpus_of[e].size(); ++r) {
      const std::int64_t back = std::min(result.per_instance[e][r], result.max_load - gpu_load[home]);
      if (back <= 0) continue;
      result.per_instance[e][r] -= back;
      result.per_instance[e][0] += back;
      gpu_load[gpus_of[e][r]] -= back;
      gpu_load[home] += back;
    }
  }
  return result;
}

void micromoe_split_by_source(const std::vector<std::int64_t>& counts, const std::vector<int>& gpus,
                              std::vector<std::int64_t>& totals, int gpus_per_node, std::int64_t* split,
                              std::size_t stride) {
  const int sources = static_cast<int>(counts.size());
  const std::size_t k = gpus.size();
  for (int s = 0; s < sources; ++s) std::fill_n(split + static_cast<std::size_t>(s) * stride, k, 0);
  std::vector<std::int64_t> left = counts;
  const auto give = [&](int s, std::size_t r) {
    const std::int64_t take = std::min(left[s], totals[r]);
    split[static_cast<std::size_t>(s) * stride + r] += take;
    left[s] -= take;
    totals[r] -= take;
  };
  // Sources [from, to) in order, each over `list`'s instances in order. An instance a source passes
  // is left empty (or the source is), so the instances before the first non-empty one stay empty
  // and every source starts there: one step per source plus one per instance, the same takes as
  // trying every instance for every source.
  std::vector<std::size_t> list;
  const auto fill = [&](int from, int to) {
    std::size_t i = 0;
    for (int s = from; s < to; ++s) {
      while (left[s] > 0) {
        while (i < list.size() && totals[list[i]] == 0) ++i;
        if (i == list.size()) return;
        give(s, list[i]);
      }
    }
  };
  // Level 0, the source's own GPU: instances are on distinct GPUs, so each source has at most one
  // and each instance one source.
  for (std::size_t r = 0; r < k; ++r)
    if (gpus[r] < sources && left[gpus[r]] > 0 && totals[r] > 0) give(gpus[r], r);
  // Level 1, the source's node: the sources of one node take only from its instances, so each node
  // is filled on its own, its sources in order.
  for (std::size_t r = 0; r < k; ++r) {
    const int node = gpus[r] / gpus_per_node;
    bool seen = false;
    for (std::size_t q = 0; q < r && !seen; ++q) seen = gpus[q] / gpus_per_node == node;
    if (seen) continue;
    list.clear();
    for (std::size_t q = r; q < k; ++q)
      if (gpus[q] / gpus_per_node == node) list.push_back(q);
    fill(node * gpus_per_node, std::min(sources, (node + 1) * gpus_per_node));
  }
  // Level 2: every source, every instance.
  list.resize(k);
  for (std::size_t r = 0; r < k; ++r) list[r] = r;
  fill(0, sources);
  for (std::int64_t l : left)
    if (l != 0) throw std::logic_error("micromoe: instance totals do not cover the counts");
}

}  // namespace epsim

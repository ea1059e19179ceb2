#include "sim/balancers/laer_moe.hpp"

#include <algorithm>
#include <deque>
#include <limits>
#include <numeric>
#include <stdexcept>
#include <string>

#include "sim/balancers/placement.hpp"
#include "sim/hardware/dtype.hpp"

namespace epsim {

namespace {

// plan() runs for every record replayed, and re-plans on every one by default, so the layout search
// works on flat arrays (a layout is copies[e * devices + g], the counts expert by expert) and only
// the public wrappers below convert to and from LaerLayout. Every floating-point sum is taken in the
// order of the source's loops, so costs are the same to the last bit.

int node_count(int devices, int gpus_per_node) { return std::max(1, (devices + gpus_per_node - 1) / gpus_per_node); }

/// laer_greedy_placement into `copies` (flat); false when capacity runs out.
bool greedy_placement(const std::vector<int>& replicas, const std::vector<double>& loads, int devices,
                      int gpus_per_node, int capacity, std::vector<int>& copies) {
  const int experts = static_cast<int>(loads.size());
  const int nodes = node_count(devices, gpus_per_node);
  // Every replica of an expert carries the same load, so sorting the experts (load / replicas
  // descending, ties by index) and expanding each into its replicas gives the source's stable sort of
  // the replicas.
  std::vector<int> order;
  order.reserve(experts);
  for (int e = 0; e < experts; ++e)
    if (replicas[e] > 0) order.push_back(e);
  std::vector<double> item_load(experts, 0.0);
  for (int e : order) item_load[e] = loads[e] / replicas[e];
  std::sort(order.begin(), order.end(), [&](int a, int b) {
    return item_load[a] > item_load[b] || (item_load[a] == item_load[b] && a < b);
  });
  copies.assign(static_cast<std::size_t>(experts) * devices, 0);
  std::vector<int> used(devices, 0);
  std::vector<double> device_load(devices, 0.0);
  std::vector<int> node_copies(static_cast<std::size_t>(experts) * nodes, 0);  // [expert][node]
  // node_best[k]: node k's GPU with a free slot and the least load (the lowest index among equals),
  // -1 when the node is full. The source scans every GPU for every replica; the first least-loaded GPU
  // overall is the first node minimum that no earlier node's minimum beats, so comparing the nodes'
  // minima in order picks the same GPU, and only the node that received a replica needs a new minimum.
  std::vector<int> node_best(nodes, -1);
  auto refresh = [&](int k) {
    int b = -1;
    for (int g = k * gpus_per_node, last = std::min(devices, g + gpus_per_node); g < last; ++g)
      if (used[g] < capacity && (b < 0 || device_load[g] < device_load[b])) b = g;
    node_best[k] = b;
  };
  for (int k = 0; k < nodes; ++k) refresh(k);
  for (int e : order) {
    int* per_node = node_copies.data() + static_cast<std::size_t>(e) * nodes;
    const double load = item_load[e];
    for (int r = 0; r < replicas[e]; ++r) {
      const int fewest = *std::min_element(per_node, per_node + nodes);
      int best = -1, best_any = -1;
      for (int k = 0; k < nodes; ++k) {
        const int g = node_best[k];
        if (g < 0) continue;
        if (best_any < 0 || device_load[g] < device_load[best_any]) best_any = g;
        if (per_node[k] == fewest && (best < 0 || device_load[g] < device_load[best])) best = g;
      }
      if (best < 0) best = best_any;
      if (best < 0) return false;
      ++copies[static_cast<std::size_t>(e) * devices + best];
      ++per_node[best / gpus_per_node];
      ++used[best];
      device_load[best] += load;
      refresh(best / gpus_per_node);
    }
  }
  return true;
}

/// laer_layout_cost on the counts expert by expert (`tokens[e * devices + s]`) and a flat layout.
double layout_cost(const double* tokens, const int* layout, int devices, int experts, int gpus_per_node,
                   const LaerCostModel& cost) {
  // The routing rule makes a source's split depend only on its node and on the copies on its own GPU,
  // so the sum is taken per (node, expert) in O(N + copies) instead of per (source, expert, copy).
  const int nodes = node_count(devices, gpus_per_node);
  const double bytes = cost.token_bytes * 1e-9;
  double comm_sum = 0;
  std::vector<double> comp(devices, 0.0);
  std::vector<int> node_units(nodes);
  std::vector<double> node_tokens(nodes);
  // The GPUs holding copies of the expert, ascending, and where each node's holders begin among
  // them: an expert has a few copies among many GPUs, and the computation below visits only these.
  std::vector<int> holders;
  holders.reserve(devices);
  std::vector<int> node_first(nodes + 1);
  std::vector<double> inter_terms(static_cast<std::size_t>(std::max(gpus_per_node, 1)));
  for (int e = 0; e < experts; ++e) {
    const int* copies = layout + static_cast<std::size_t>(e) * devices;
    const double* row = tokens + static_cast<std::size_t>(e) * devices;
    int all_units = 0;
    holders.clear();
    for (int node = 0; node < nodes; ++node) {
      int units = 0;
      node_first[node] = static_cast<int>(holders.size());
      for (int g = node * gpus_per_node, last = std::min(devices, g + gpus_per_node); g < last; ++g) {
        units += copies[g];
        if (copies[g] > 0) holders.push_back(g);
      }
      node_units[node] = units;
      all_units += units;
    }
    node_first[nodes] = static_cast<int>(holders.size());
    if (all_units == 0) continue;
    for (int node = 0; node < nodes; ++node) {
      const int units = node_units[node];
      const int first_s = node * gpus_per_node;
      const int last_s = std::min(devices, first_s + gpus_per_node);
      if (units == 0) {
        // Every copy is in another node: the node's terms are worked out side by side first, so
        // that their divisions, one per source, run two at a time (the line that divided and added
        // took 38% of this function's samples at EP 64), then added in order. A source without
        // tokens adds zero to both sums, which leaves them as they are: they start at zero and no
        // term is negative.
        double* const term = inter_terms.data();
        for (int s = first_s; s < last_s; ++s) term[s - first_s] = bytes * row[s] / cost.inter_GBps;
        double node_sum = 0;
        for (int s = first_s; s < last_s; ++s) {
          node_sum += row[s];
          comm_sum += term[s - first_s];
        }
        node_tokens[node] = node_sum;
        continue;
      }
      // A source without a copy of its own: its share is units / V_intra (the exact value of the
      // general term below with own = 0, computed once per node).
      const double none_here = (units - 0.0) / cost.intra_GBps;
      double node_sum = 0;
      for (int s = first_s; s < last_s; ++s) {
        const double t = row[s];
        if (t == 0) continue;
        node_sum += t;
        // Shares w/units: the copies on s itself at 1e9 GB/s, the rest of the node at V_intra.
        const double own = copies[s];
        comm_sum += own == 0 ? bytes * t * none_here / units
                             : bytes * t * (own / 1e9 + (units - own) / cost.intra_GBps) / units;
      }
      node_tokens[node] = node_sum;
    }
    for (int node = 0; node < nodes; ++node) {
      const double t = node_tokens[node];
      if (t == 0) continue;
      const bool local = node_units[node] > 0;
      const int units = local ? node_units[node] : all_units;
      // Each GPU's sum takes its terms in the same order as a loop over every GPU would.
      const int first = local ? node_first[node] : 0;
      const int last = local ? node_first[node + 1] : node_first[nodes];
      for (int i = first; i < last; ++i) {
        const int g = holders[i];
        comp[g] += t * copies[g] / units * cost.comp_s_per_token;
      }
    }
  }
  const double max_comp = devices > 0 ? *std::max_element(comp.begin(), comp.end()) : 0.0;
  return 4 * comm_sum + (3 + (cost.checkpoint ? 1 : 0)) * max_comp;
}

/// laer_plan_layout on the counts expert by expert; the winner goes to `best` (flat).
void plan_layout(const double* tokens, int devices, int experts, int capacity, int gpus_per_node,
                 const LaerCostModel& cost, std::vector<int>& best) {
  const int nodes = node_count(devices, gpus_per_node);
  std::vector<double> loads(experts, 0.0);
  for (int e = 0; e < experts; ++e) {
    const double* row = tokens + static_cast<std::size_t>(e) * devices;
    double sum = 0;
    for (int s = 0; s < devices; ++s) sum += row[s];
    loads[e] = sum;
  }
  std::vector<std::vector<int>> candidates;
  if ((static_cast<std::int64_t>(capacity) * devices) % experts == 0)
    candidates.push_back(
        std::vector<int>(experts, static_cast<int>(static_cast<std::int64_t>(capacity) * devices / experts)));
  candidates.push_back(laer_precise_replicas(loads, devices, capacity, nodes));
  best.clear();
  std::vector<int> layout;
  double best_cost = std::numeric_limits<double>::max();
  for (const auto& replicas : candidates) {
    // As in the source, an infeasible candidate is skipped.
    if (!greedy_placement(replicas, loads, devices, gpus_per_node, capacity, layout)) continue;
    const double c = layout_cost(tokens, layout.data(), devices, experts, gpus_per_node, cost);
    if (c < best_cost) {
      best_cost = c;
      best.swap(layout);
    }
  }
  if (best.empty()) throw std::runtime_error("laer_moe: no valid placement found");
}

/// tokens[s][e] expert by expert: [e * devices + s].
std::vector<double> by_expert(const std::vector<std::vector<double>>& tokens, int experts) {
  const int devices = static_cast<int>(tokens.size());
  std::vector<double> out(static_cast<std::size_t>(experts) * devices);
  for (int s = 0; s < devices; ++s)
    for (int e = 0; e < experts; ++e) out[static_cast<std::size_t>(e) * devices + s] = tokens[s][e];
  return out;
}

LaerLayout to_layout(const std::vector<int>& flat, int experts, int devices) {
  LaerLayout layout(experts);
  for (int e = 0; e < experts; ++e)
    layout[e].assign(flat.begin() + static_cast<std::ptrdiff_t>(e) * devices,
                     flat.begin() + static_cast<std::ptrdiff_t>(e + 1) * devices);
  return layout;
}

}  // namespace

std::vector<int> laer_precise_replicas(const std::vector<double>& loads, int devices, int capacity, int nodes) {
  const int experts = static_cast<int>(loads.size());
  const std::int64_t total = static_cast<std::int64_t>(devices) * capacity;
  if (total < experts) throw std::invalid_argument("laer_moe: fewer expert slots than experts");
  const bool per_node = static_cast<std::int64_t>(nodes) * experts <= total;
  std::vector<int> replicas(experts, per_node ? nodes : 1);
  std::int64_t used = static_cast<std::int64_t>(experts) * (per_node ? nodes : 1);
  // A max-heap on load / replicas, ties to the lowest expert index (the source's heap).
  auto lower = [&](int a, int b) {
    const double ra = loads[a] / replicas[a];
    const double rb = loads[b] / replicas[b];
    return ra < rb || (ra == rb && a > b);
  };
  std::vector<int> heap(experts);
  std::iota(heap.begin(), heap.end(), 0);
  std::make_heap(heap.begin(), heap.end(), lower);
  while (used < total && !heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), lower);
    const int best = heap.back();
    heap.pop_back();
    if (replicas[best] >= nodes) {
      if (used + nodes > total) continue;  // the source pops it for good
      replicas[best] += nodes;
      used += nodes;
    } else {
      ++replicas[best];
      ++used;
    }
    heap.push_back(best);
    std::push_heap(heap.begin(), heap.end(), lower);
  }
  return replicas;  // with every expert frozen, the leftover slots stay empty
}

LaerLayout laer_greedy_placement(const std::vector<int>& replicas, const std::vector<double>& loads, int devices,
                                 int gpus_per_node, int capacity) {
  std::vector<int> copies;
  if (!greedy_placement(replicas, loads, devices, gpus_per_node, capacity, copies))
    throw std::runtime_error("laer_moe: no more capacity");
  return to_layout(copies, static_cast<int>(loads.size()), devices);
}

double laer_layout_cost(const std::vector<std::vector<double>>& tokens, const LaerLayout& layout, int gpus_per_node,
                        const LaerCostModel& cost) {
  const int devices = static_cast<int>(tokens.size());
  const int experts = static_cast<int>(layout.size());
  std::vector<int> flat;
  flat.reserve(static_cast<std::size_t>(experts) * devices);
  for (const std::vector<int>& row : layout) flat.insert(flat.end(), row.begin(), row.begin() + devices);
  return layout_cost(by_expert(tokens, experts).data(), flat.data(), devices, experts, gpus_per_node, cost);
}

LaerLayout laer_plan_layout(const std::vector<std::vector<double>>& tokens, int capacity, int gpus_per_node,
                            const LaerCostModel& cost) {
  const int devices = static_cast<int>(tokens.size());
  const int experts = devices > 0 ? static_cast<int>(tokens[0].size()) : 0;
  std::vector<int> best;
  plan_layout(by_expert(tokens, experts).data(), devices, experts, capacity, gpus_per_node, cost, best);
  return to_layout(best, experts, devices);
}

LaerMoe::LaerMoe(LaerMoeParams params) : params_(params) {
  if (params_.capacity_per_gpu < 0 || params_.window < 1 || params_.period < 1)
    throw std::logic_error("laer_moe: bad parameters");
}

int laer_default_capacity(int num_experts, int num_gpus) {
  return std::max(1, 2 * num_experts / std::max(1, num_gpus));
}

Plan LaerMoe::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  const int gpn = context.gpus_per_node;
  if (gpn <= 0) throw std::logic_error("laer_moe: gpus_per_node must be positive");
  const int capacity = params_.capacity_per_gpu > 0 ? params_.capacity_per_gpu : laer_default_capacity(experts, n);
  if (static_cast<std::int64_t>(capacity) * n < experts)
    throw std::invalid_argument("laer_moe: capacity_per_gpu x GPUs must be at least the expert count");
  const std::size_t cells = static_cast<std::size_t>(n) * experts;

  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) home[e] = home_gpu(e, experts, n, context.placement);
  LayerState& state = layers_[record.layer];
  if (state.history_sum.empty()) state.history_sum.assign(cells, 0);
  const bool had_layout = !state.layout.empty();
  bool replanned = false;
  if (state.records_seen > 0 && state.records_seen % params_.period == 0) {
    // Expert by expert, eight sources at a time: each pass writes one cache line of tokens_ per
    // expert while the eight sources' rows of the sum stay in the first-level cache.
    tokens_.resize(cells);
    for (int s0 = 0; s0 < n; s0 += 8) {
      const int s1 = std::min(n, s0 + 8);
      for (int e = 0; e < experts; ++e)
        for (int s = s0; s < s1; ++s)
          tokens_[static_cast<std::size_t>(e) * n + s] =
              static_cast<double>(state.history_sum[static_cast<std::size_t>(s) * experts + e]);
    }
    LaerCostModel cost;
    cost.token_bytes = static_cast<double>(context.model->token_bytes());
    cost.comp_s_per_token = params_.comp_us_per_token > 0 ? params_.comp_us_per_token * 1e-6
                                                          : context.model->expert_flops_per_token() /
                                                                (context.hardware->gpu.bf16_peak_TFLOPs * 1e12);
    cost.intra_GBps = params_.intra_GBps > 0 ? params_.intra_GBps : context.hardware->nvlink.port_bw_GBps;
    cost.inter_GBps = params_.inter_GBps > 0 ? params_.inter_GBps : context.hardware->infiniband.nic_bw_GBps;
    cost.checkpoint = params_.checkpoint;
    std::vector<int> layout;
    plan_layout(tokens_.data(), n, experts, capacity, gpn, cost, layout);
    layout_before_.swap(state.layout);  // the layout replaced, for the gathers of `changes`
    state.layout.swap(layout);
    state.layout_from_full_window = state.records_seen >= params_.window;
    replanned = true;
  }
  last_plan_steady_ = !state.layout.empty() && state.layout_from_full_window;
  // The window's sum, kept up to date: drop the record that leaves the window, add this one (in the
  // buffer of the one dropped).
  std::vector<std::uint32_t> counts;
  if (static_cast<int>(state.history.size()) >= params_.window) {
    counts.swap(state.history.front());
    for (std::size_t i = 0; i < counts.size(); ++i) state.history_sum[i] -= counts[i];
    state.history.pop_front();
  }
  counts.assign(record.counts.begin(), record.counts.begin() + static_cast<std::ptrdiff_t>(cells));
  for (std::size_t i = 0; i < cells; ++i) state.history_sum[i] += counts[i];
  state.history.push_back(std::move(counts));
  ++state.records_seen;

  // copies_at(e, g): copies of e on g under the layout in force (static: one at home).
  const bool dynamic = !state.layout.empty();
  const int* layout = state.layout.data();
  auto copies_at = [&](int e, int g) {
    return dynamic ? layout[static_cast<std::size_t>(e) * n + g] : (home[e] == g ? 1 : 0);
  };
  auto copies_before = [&](int e, int g) {
    return had_layout ? layout_before_[static_cast<std::size_t>(e) * n + g] : (home[e] == g ? 1 : 0);
  };

  Plan plan = start_plan("laer_moe", record, n);
  plan.planner.site = PlannerSite::host_cpu;
  plan.planner.start = PlannerStart::before_dispatch;
  plan.planner.duration_ps = replanned ? us_to_ps(params_.planner_time_us) : 0;
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});

  // The GPUs holding each expert, ascending (holder_gpu_ from holder_first_[e]), read expert by
  // expert as the layout is laid out. The instances and the routes' targets below are built from
  // them: read GPU by GPU, the layout's cells were a stride of N apart.
  holder_first_.assign(static_cast<std::size_t>(experts) + 1, 0);
  holder_gpu_.clear();
  for (int e = 0; e < experts; ++e) {
    for (int g = 0; g < n; ++g)
      if (copies_at(e, g) != 0) holder_gpu_.push_back(g);
    holder_first_[static_cast<std::size_t>(e) + 1] = static_cast<int>(holder_gpu_.size());
  }

  // One instance per (GPU, expert) with copies, GPU by GPU; copies of one expert on one GPU are one
  // instance (same weights) that takes a proportional share of the tokens. GPU g's instances are
  // numbered from gpu_first_[g] on, in expert order: the experts in order hand out each GPU's next.
  gpu_first_.assign(static_cast<std::size_t>(n) + 1, 0);
  for (const int g : holder_gpu_) ++gpu_first_[static_cast<std::size_t>(g) + 1];
  for (int g = 0; g < n; ++g) gpu_first_[g + 1] += gpu_first_[g];
  gpu_next_.assign(gpu_first_.begin(), gpu_first_.end() - 1);
  plan.instances.resize(holder_gpu_.size());
  instance_of_.assign(cells, -1);
  std::vector<int> copies_total(experts, 0);
  for (int e = 0; e < experts; ++e) {
    for (int h = holder_first_[e]; h < holder_first_[static_cast<std::size_t>(e) + 1]; ++h) {
      const int g = holder_gpu_[h];
      const int inst = gpu_next_[g]++;
      instance_of_[static_cast<std::size_t>(e) * n + g] = inst;
      copies_total[e] += copies_at(e, g);
      plan.instances[inst] = {e, g, g == home[e] ? InstanceKind::static_expert : InstanceKind::replica};
    }
  }
  for (int g = 0; g < n; ++g) {
    std::vector<int>& group = plan.gemm_order[g].front().instances;
    group.resize(static_cast<std::size_t>(gpu_first_[g + 1] - gpu_first_[g]));
    std::iota(group.begin(), group.end(), gpu_first_[g]);
  }
  const int instances = static_cast<int>(plan.instances.size());

  // FSEP traffic. Each GPU owns 1/N of every expert's parameters (the first bytes mod N GPUs one byte
  // more). An instance's weights are restored from the N - 1 other owners' shards, prefetched at the
  // layer's start; its weight gradients go back to the owners by reduce-scatter after its
  // weight-gradient GEMM, in the gradient precision. Per instance and GPU: bytes x (N - 1) / N.
  // There are 2 (N - 1) per instance (32,256 at EP 64), the bulk of the plan's bytes: they are counted
  // first and written in place, as appending them one by one costs several times more.
  const std::int64_t params_per_expert =
      static_cast<std::int64_t>(context.model->matrices_per_expert()) * context.model->hidden_size *
      context.model->expert_ffn_size;
  const std::int64_t weight_bytes = params_per_expert * context.model->dtype_bytes;
  const std::int64_t grad_bytes =
      params_per_expert * (params_.grad_bytes_per_param > 0 ? params_.grad_bytes_per_param : context.model->dtype_bytes);
  weight_shard_.resize(n);
  grad_shard_.resize(n);
  int weight_shards = 0, grad_shards = 0;  // shards with bytes, over all GPUs
  for (int h = 0; h < n; ++h) {
    weight_shard_[h] = weight_bytes / n + (h < weight_bytes % n ? 1 : 0);
    grad_shard_[h] = grad_bytes / n + (h < grad_bytes % n ? 1 : 0);
    weight_shards += weight_shard_[h] > 0 ? 1 : 0;
    grad_shards += grad_shard_[h] > 0 ? 1 : 0;
  }
  const bool always = params_.traffic == LaerTraffic::always;
  auto gathers = [&](int e, int g) { return always || (replanned && copies_before(e, g) == 0); };
  auto reduces = [&](int e) { return always || copies_total[e] > 1; };
  std::size_t transfers = 0;
  for (const ExpertInstance& i : plan.instances) {
    if (gathers(i.expert, i.gpu)) transfers += static_cast<std::size_t>(weight_shards - (weight_shard_[i.gpu] > 0));
    if (reduces(i.expert)) transfers += static_cast<std::size_t>(grad_shards - (grad_shard_[i.gpu] > 0));
  }
  plan.transfers.resize(transfers);
  // The shards' sizes are read through locals: a transfer's store could write anything as far as the
  // compiler knows, the members' data pointers included, which it would otherwise load again for
  // every transfer. An instance's two decisions are taken once, outside its loop over the owners.
  Transfer* transfer = plan.transfers.data();
  const std::int64_t* const weight_shard = weight_shard_.data();
  const std::int64_t* const grad_shard = grad_shard_.data();
  for (int inst = 0; inst < instances; ++inst) {
    const int e = plan.instances[inst].expert;
    const int g = plan.instances[inst].gpu;
    const bool gather = gathers(e, g);
    const bool reduce = reduces(e);
    const auto put_weights = [&](int h) __attribute__((always_inline)) {
      if (weight_shard[h] > 0)
        *transfer++ = {TransferKind::weights, PassKind::forward, Carrier::ep_backend, TransferStart::prefetch, inst, h,
                       g, weight_shard[h]};
    };
    const auto put_grads = [&](int h) __attribute__((always_inline)) {
      if (grad_shard[h] > 0)
        *transfer++ = {TransferKind::gradients, PassKind::backward, Carrier::ep_backend, TransferStart::after_dispatch,
                       inst, g, h, grad_shard[h]};
    };
    // Owner by owner, the instance's own GPU left out; for each owner its weights before its
    // gradients.
    const auto owners = [&](auto put) __attribute__((always_inline)) {
      for (int h = 0; h < g; ++h) put(h);
      for (int h = g + 1; h < n; ++h) put(h);
    };
    if (gather && reduce) {
      owners([&](int h) __attribute__((always_inline)) {
        put_weights(h);
        put_grads(h);
      });
    } else if (gather) {
      owners(put_weights);
    } else if (reduce) {
      owners(put_grads);
    }
  }

  // Routes: each source splits its tokens for e over the copies in its own node (by multiplicity),
  // or over all copies when its node has none. The targets depend only on (node, expert): listed
  // once, in `target_gpu_` / `target_copies_` from offset `target_first_[node * E + e]`, with their
  // copies' sum in `target_units`.
  // They are found among the holders of e (above): most (node, expert) pairs have no copy in the
  // node, and each of them would otherwise scan every GPU.
  const int nodes = (n + gpn - 1) / gpn;
  target_first_.assign(static_cast<std::size_t>(nodes) * experts + 1, 0);
  target_gpu_.clear();
  target_copies_.clear();
  std::vector<int> target_units(static_cast<std::size_t>(nodes) * experts, 0);
  // Each expert's holders in a node are a run of its ascending list, the node's GPUs [first_gpu,
  // end_gpu): the nodes in order walk each list once, from where the last node's run ended
  // (holder_next_[e]), rather than testing every holder at every node.
  holder_next_.assign(holder_first_.begin(), holder_first_.end() - 1);
  for (int node = 0; node < nodes; ++node) {
    const int end_gpu = (node + 1) * gpn;
    for (int e = 0; e < experts; ++e) {
      const int* first = holder_gpu_.data() + holder_first_[e];
      const int* last = holder_gpu_.data() + holder_first_[static_cast<std::size_t>(e) + 1];
      const std::size_t begin = target_gpu_.size();
      int units = 0;
      const auto take = [&](int g) {
        const int c = copies_at(e, g);
        target_gpu_.push_back(g);
        target_copies_.push_back(c);
        units += c;
      };
      const int* g = holder_gpu_.data() + holder_next_[e];
      for (; g != last && *g < end_gpu; ++g) take(*g);
      holder_next_[e] = static_cast<int>(g - holder_gpu_.data());
      if (target_gpu_.size() == begin)
        for (const int* g = first; g != last; ++g) take(*g);
      target_first_[static_cast<std::size_t>(node) * experts + e + 1] = static_cast<int>(target_gpu_.size());
      target_units[static_cast<std::size_t>(node) * experts + e] = units;
    }
  }
  // At most one route per (source, target) pair with tokens: the vector is sized for that, written in
  // place and cut to the routes written.
  std::size_t most_routes = 0;
  for (int s = 0; s < n; ++s) {
    const std::size_t row = static_cast<std::size_t>(s / gpn) * experts;
    const std::uint32_t* c = record.counts.data() + static_cast<std::size_t>(s) * experts;
    for (int e = 0; e < experts; ++e)
      if (c[e] != 0) most_routes += static_cast<std::size_t>(target_first_[row + e + 1] - target_first_[row + e]);
  }
  plan.routes.resize(most_routes);
  TokenRoute* route = plan.routes.data();
  for (int s = 0; s < n; ++s) {
    const std::size_t row = static_cast<std::size_t>(s / gpn) * experts;
    const std::uint32_t* counts_row = record.counts.data() + static_cast<std::size_t>(s) * experts;
    for (int e = 0; e < experts; ++e) {
      const std::uint32_t c = counts_row[e];
      if (c == 0) continue;
      // Every copy unit gets c / W tokens, and the c % W left over go one each to the units from
      // position s mod W on, so that different sources leave their remainders on different copies.
      // (Counts and W fit in 32 bits, whose division is the faster one.)
      const int begin = target_first_[row + e];
      const int end = target_first_[row + e + 1];
      const auto total = static_cast<std::uint32_t>(target_units[row + e]);
      const std::int64_t base = c / total;
      const std::int64_t rem = c % total;
      // A target's units are the next target_copies_[i] of the W: counted from the rotation, they
      // take up places [from, to), which wrap round W at most once, and the places below rem get a
      // token more: counted in closed form rather than unit by unit (most targets have one unit,
      // and the loop per unit cost more than its work).
      const int units = static_cast<int>(total);
      const int extra = static_cast<int>(rem);
      const int rotation = static_cast<int>(static_cast<std::uint32_t>(s) % total);
      int from = rotation == 0 ? 0 : units - rotation;  // unit 0's place from the rotation
      for (int i = begin; i < end; ++i) {
        const int copies = target_copies_[i];
        const int to = from + copies;  // below 2 W: from < W and copies <= W
        const int below_rem = (to <= units ? std::min(to, extra) : extra + std::min(to - units, extra)) -
                              std::min(from, extra);
        from = to >= units ? to - units : to;
        const std::int64_t share = base * copies + below_rem;
        if (share == 0) continue;
        const int g = target_gpu_[i];
        route->src_rank = s;
        route->instance = instance_of_[static_cast<std::size_t>(e) * n + g];
        route->tokens = share;
        route->carrier = g == s ? Carrier::none : Carrier::ep_backend;
        route->via_gpu = -1;
        route->stage = 0;
        ++route;
      }
    }
  }
  plan.routes.resize(static_cast<std::size_t>(route - plan.routes.data()));
  return plan;
}

std::unique_ptr<Balancer> make_laer_moe(ConfigMap& params) {
  constexpr std::int64_t kMaxCount = std::numeric_limits<int>::max();
  LaerMoeParams p;
  p.capacity_per_gpu = static_cast<int>(params.get_int_or("capacity_per_gpu", p.capacity_per_gpu, 0, 1 << 16));
  p.window = static_cast<int>(params.get_int_or("window", p.window, 1, kMaxCount));
  p.period = static_cast<int>(params.get_int_or("period", p.period, 1, kMaxCount));
  p.traffic = params.get_choice_or("traffic", "always", {"always", "changes"}) == "changes" ? LaerTraffic::changes
                                                                                            : LaerTraffic::always;
  if (params.has("gradient_dtype"))
    p.grad_bytes_per_param = element_bytes(parse_dtype(params.get_choice("gradient_dtype", dtype_names())));
  p.checkpoint = params.get_bool_or("checkpoint", p.checkpoint);
  p.comp_us_per_token = params.get_double_or("comp_us_per_token", p.comp_us_per_token, 0, 1e9);
  p.intra_GBps = params.get_double_or("intra_GBps", p.intra_GBps, 0, 1e6);
  p.inter_GBps = params.get_double_or("inter_GBps", p.inter_GBps, 0, 1e6);
  // An hour bounds the value so that the conversion to picoseconds cannot overflow.
  p.planner_time_us = params.get_double_or("planner_time_us", p.planner_time_us, 0, 3.6e9);
  return std::make_unique<LaerMoe>(p);
}

}  // namespace epsim

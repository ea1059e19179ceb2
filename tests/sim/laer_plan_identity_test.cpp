// LAER-MoE's planner and plan checked against their definitions, written out the plain way, on many
// random inputs: the greedy placement replica by replica over every GPU, the cost model in the
// source's loop order (so bit for bit), and whole plans field by field (instances GPU by GPU, FSEP's
// shard gathers and reduce-scatters, routes split by copy units from a rotating remainder) over
// records of two layers with LAER-MoE's window and period. The balancer computes the same things with
// flat arrays, per-node minima and in-place writes; these pin every field so that a faster version
// cannot change one unnoticed.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "sim/balancers/laer_moe.hpp"
#include "sim/balancers/placement.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

/// get_greedy_placement as the source writes it: every replica (load / replicas, stable-sorted
/// descending) scans every GPU for the least-loaded one with a free slot in a node with the fewest
/// copies of its expert, else the least-loaded with a free slot anywhere.
LaerLayout reference_placement(const std::vector<int>& replicas, const std::vector<double>& loads, int devices,
                               int gpn, int capacity) {
  const int experts = static_cast<int>(loads.size());
  const int nodes = std::max(1, (devices + gpn - 1) / gpn);
  std::vector<std::pair<int, double>> items;
  for (int e = 0; e < experts; ++e)
    for (int r = 0; r < replicas[e]; ++r) items.push_back({e, loads[e] / replicas[e]});
  std::stable_sort(items.begin(), items.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  LaerLayout copies(experts, std::vector<int>(devices, 0));
  std::vector<int> used(devices, 0);
  std::vector<double> device_load(devices, 0.0);
  std::vector<std::vector<int>> node_copies(experts, std::vector<int>(nodes, 0));
  for (const auto& [e, load] : items) {
    const int fewest = *std::min_element(node_copies[e].begin(), node_copies[e].end());
    int best = -1, best_any = -1;
    for (int g = 0; g < devices; ++g) {
      if (used[g] >= capacity) continue;
      if (best_any < 0 || device_load[g] < device_load[best_any]) best_any = g;
      if (node_copies[e][g / gpn] == fewest && (best < 0 || device_load[g] < device_load[best])) best = g;
    }
    if (best < 0) best = best_any;
    if (best < 0) throw std::runtime_error("no more capacity");
    ++copies[e][best];
    ++node_copies[e][best / gpn];
    ++used[best];
    device_load[best] += load;
  }
  return copies;
}

/// The cost model in the source's order of summation: expert by expert, source by source.
double reference_cost(const std::vector<std::vector<double>>& tokens, const LaerLayout& layout, int gpn,
                      const LaerCostModel& cost) {
  const int devices = static_cast<int>(tokens.size());
  const int experts = static_cast<int>(layout.size());
  const int nodes = std::max(1, (devices + gpn - 1) / gpn);
  const double bytes = cost.token_bytes * 1e-9;
  double comm_sum = 0;
  std::vector<double> comp(devices, 0.0);
  for (int e = 0; e < experts; ++e) {
    std::vector<int> node_units(nodes, 0);
    std::vector<double> node_tokens(nodes, 0.0);
    int all_units = 0;
    for (int g = 0; g < devices; ++g) {
      node_units[g / gpn] += layout[e][g];
      all_units += layout[e][g];
    }
    if (all_units == 0) continue;
    for (int s = 0; s < devices; ++s) {
      const double t = tokens[s][e];
      if (t == 0) continue;
      node_tokens[s / gpn] += t;
      const int units = node_units[s / gpn];
      if (units > 0) {
        const double own = layout[e][s];
        comm_sum += bytes * t * (own / 1e9 + (units - own) / cost.intra_GBps) / units;
      } else {
        comm_sum += bytes * t / cost.inter_GBps;
      }
    }
    for (int node = 0; node < nodes; ++node) {
      const double t = node_tokens[node];
      if (t == 0) continue;
      const bool local = node_units[node] > 0;
      const int units = local ? node_units[node] : all_units;
      for (int g = 0; g < devices; ++g)
        if (layout[e][g] > 0 && (!local || g / gpn == node)) comp[g] += t * layout[e][g] / units * cost.comp_s_per_token;
    }
  }
  return 4 * comm_sum + (3 + (cost.checkpoint ? 1 : 0)) * *std::max_element(comp.begin(), comp.end());
}

/// Random loads drawn from a few values, so that ties between experts are common.
std::vector<double> random_loads(std::mt19937& rng, int experts) {
  std::uniform_int_distribution<int> pick(0, 5);
  static const double kValues[] = {0, 1, 2, 3, 6, 40};
  std::vector<double> loads(experts);
  for (double& l : loads) l = kValues[pick(rng)];
  return loads;
}

struct LaerCase {
  int gpus = 0;  ///< the last node may be partial: hw.nodes x gpus_per_node can be more
  ModelSpec model;
  HardwareSpec hw;
  LaerMoeParams params;
  std::vector<TraceRecord> records;
};

/// GPUs 4 to 48 in nodes of 2, 4 or 8 (the last node may be partial), 1 to 4 experts per GPU,
/// capacity from the default to three times E / N, a window of 1 to 5, a period of 1 to 3, both
/// traffic modes, skewed counts with some zeros; nine records over two layers.
LaerCase random_laer_case(std::mt19937& rng, int index) {
  static const int kGpus[] = {4, 6, 8, 12, 16, 24, 32, 48};
  static const int kNode[] = {2, 4, 8};
  LaerCase c;
  const int n = kGpus[index % 8];
  const int gpn = kNode[(index / 8) % 3];
  const int experts = n * (1 + index % 4);
  c.gpus = n;
  c.model = test::simple_model(experts);
  c.hw = test::simple_hardware((n + gpn - 1) / gpn, gpn);
  c.params.capacity_per_gpu = index % 3 == 0 ? 0 : experts / n + index % 3 + (index % 5 == 0 ? experts / n : 0);
  c.params.window = 1 + index % 5;
  c.params.period = 1 + (index / 3) % 3;
  c.params.traffic = index % 2 == 0 ? LaerTraffic::always : LaerTraffic::changes;
  c.params.grad_bytes_per_param = index % 4 == 1 ? 4 : 0;
  c.params.checkpoint = index % 7 == 3;
  std::lognormal_distribution<double> popularity(0.0, 1.0 + 0.2 * (index % 5));
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  for (int k = 0; k < 9; ++k) {
    TraceRecord r;
    r.step = static_cast<std::uint32_t>(k);
    r.layer = k % 3 == 2 ? 1 : 0;
    std::vector<double> weight(experts);
    for (double& w : weight) w = popularity(rng);
    for (int s = 0; s < n; ++s)
      for (int e = 0; e < experts; ++e)
        r.counts.push_back(unit(rng) < 0.1 ? 0u : static_cast<std::uint32_t>(weight[e] * (5 + 60 * unit(rng))));
    c.records.push_back(std::move(r));
  }
  return c;
}

/// The plan LAER-MoE's definition gives for `layout` (copies[e][g]; empty: static) and the record.
Plan expected_plan(const LaerCase& c, const TraceRecord& r, const LaerLayout& layout, const LaerLayout& before,
                   bool replanned, bool had_layout) {
  const int n = c.gpus;
  const int gpn = c.hw.gpus_per_node;
  const int experts = c.model.num_experts;
  auto home = [&](int e) { return home_gpu(e, experts, n, Placement::contiguous); };
  auto copies_at = [&](int e, int g) { return !layout.empty() ? layout[e][g] : (home(e) == g ? 1 : 0); };
  Plan p;
  p.num_gpus = n;
  p.gemm_order.assign(n, {});
  std::map<std::pair<int, int>, int> instance_of;  // (expert, GPU)
  std::vector<int> copies_total(experts, 0);
  for (int g = 0; g < n; ++g) {
    p.gemm_order[g].push_back(GemmGroup{g, {}});
    for (int e = 0; e < experts; ++e)
      if (copies_at(e, g) > 0) {
        instance_of[{e, g}] = static_cast<int>(p.instances.size());
        copies_total[e] += copies_at(e, g);
        p.gemm_order[g][0].instances.push_back(static_cast<int>(p.instances.size()));
        p.instances.push_back({e, g, g == home(e) ? InstanceKind::static_expert : InstanceKind::replica});
      }
  }
  const std::int64_t params = 2LL * c.model.hidden_size * c.model.expert_ffn_size;  // two matrices
  const std::int64_t weights = params * c.model.dtype_bytes;
  const std::int64_t grads = params * (c.params.grad_bytes_per_param > 0 ? c.params.grad_bytes_per_param : 1);
  for (int i = 0; i < static_cast<int>(p.instances.size()); ++i) {
    const int e = p.instances[i].expert, g = p.instances[i].gpu;
    const int was = had_layout ? before[e][g] : (home(e) == g ? 1 : 0);
    const bool always = c.params.traffic == LaerTraffic::always;
    for (int h = 0; h < n; ++h) {
      if (h == g) continue;
      const std::int64_t w = weights / n + (h < weights % n ? 1 : 0);
      const std::int64_t d = grads / n + (h < grads % n ? 1 : 0);
      if ((always || (replanned && was == 0)) && w > 0)
        p.transfers.push_back({TransferKind::weights, PassKind::forward, Carrier::ep_backend, TransferStart::prefetch,
                               i, h, g, w});
      if ((always || copies_total[e] > 1) && d > 0)
        p.transfers.push_back({TransferKind::gradients, PassKind::backward, Carrier::ep_backend,
                               TransferStart::after_dispatch, i, g, h, d});
    }
  }
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) {
      const std::int64_t count = r.count(s, e, experts);
      if (count == 0) continue;
      std::vector<int> to;
      for (int g = s / gpn * gpn; g < std::min(n, s / gpn * gpn + gpn); ++g)
        if (copies_at(e, g) > 0) to.push_back(g);
      if (to.empty())
        for (int g = 0; g < n; ++g)
          if (copies_at(e, g) > 0) to.push_back(g);
      // Copy units in target order; units rotation, rotation + 1, ... (mod W) take the remainder.
      int units = 0;
      for (int g : to) units += copies_at(e, g);
      int unit = 0;
      for (int g : to) {
        std::int64_t share = 0;
        for (int k = 0; k < copies_at(e, g); ++k, ++unit)
          share += count / units + ((unit - s % units + units) % units < count % units ? 1 : 0);
        if (share > 0) p.routes.push_back({s, instance_of.at({e, g}), share, g == s ? Carrier::none : Carrier::ep_backend, -1, 0});
      }
    }
  return p;
}

void check_same(const Plan& got, const Plan& want) {
  REQUIRE(got.instances.size() == want.instances.size());
  for (std::size_t i = 0; i < want.instances.size(); ++i) {
    CHECK(got.instances[i].expert == want.instances[i].expert);
    CHECK(got.instances[i].gpu == want.instances[i].gpu);
    CHECK(got.instances[i].kind == want.instances[i].kind);
  }
  REQUIRE(got.gemm_order.size() == want.gemm_order.size());
  for (std::size_t g = 0; g < want.gemm_order.size(); ++g) {
    REQUIRE(got.gemm_order[g].size() == 1);
    CHECK(got.gemm_order[g][0].gpu == static_cast<int>(g));
    CHECK(got.gemm_order[g][0].instances == want.gemm_order[g][0].instances);
  }
  REQUIRE(got.transfers.size() == want.transfers.size());
  for (std::size_t k = 0; k < want.transfers.size(); ++k) {
    const Transfer& a = got.transfers[k];
    const Transfer& b = want.transfers[k];
    CHECK((a.kind == b.kind && a.pass == b.pass && a.instance == b.instance && a.src_gpu == b.src_gpu &&
           a.dst_gpu == b.dst_gpu && a.bytes == b.bytes && a.carrier == b.carrier && a.start == b.start));
  }
  REQUIRE(got.routes.size() == want.routes.size());
  for (std::size_t k = 0; k < want.routes.size(); ++k) {
    const TokenRoute& a = got.routes[k];
    const TokenRoute& b = want.routes[k];
    CHECK((a.src_rank == b.src_rank && a.instance == b.instance && a.tokens == b.tokens && a.carrier == b.carrier &&
           a.via_gpu == -1 && a.stage == 0));
  }
}

}  // namespace

TEST_CASE("LAER-MoE's greedy placement is the source's replica-by-replica scan over every GPU, random inputs") {
  std::mt19937 rng(11);
  int compared = 0, refused = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const int devices = 2 + trial % 23;
    const int gpn = 1 + trial % 5;
    const int experts = 1 + (trial * 7) % 30;
    const int capacity = 1 + trial % 4;
    std::vector<double> loads = random_loads(rng, experts);
    std::uniform_int_distribution<int> reps(trial % 3 == 0 ? 0 : 1, 1 + devices * capacity / experts);
    std::vector<int> replicas(experts);
    for (int& r : replicas) r = reps(rng);
    LaerLayout want;
    bool fits = true;
    try {
      want = reference_placement(replicas, loads, devices, gpn, capacity);
    } catch (const std::runtime_error&) {
      fits = false;
    }
    if (fits) {
      CHECK(laer_greedy_placement(replicas, loads, devices, gpn, capacity) == want);
      ++compared;
    } else {
      CHECK_THROWS_AS(laer_greedy_placement(replicas, loads, devices, gpn, capacity), std::runtime_error);
      ++refused;
    }
  }
  // Both outcomes occur often enough for the comparison to mean something.
  CHECK(compared > 100);
  CHECK(refused > 20);
}

TEST_CASE("LAER-MoE's cost model sums in the source's order: the same double, bit for bit, on random layouts") {
  std::mt19937 rng(12);
  std::uniform_int_distribution<int> count(0, 900), copies(0, 3);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 3 + trial % 14, experts = 1 + trial % 9, gpn = 1 + trial % 6;
    LaerCostModel cost;
    cost.token_bytes = 1024.0 * (1 + trial % 7);
    cost.comp_s_per_token = 1e-7 * (1 + trial % 3);
    cost.checkpoint = trial % 2 == 1;
    std::vector<std::vector<double>> tokens(n, std::vector<double>(experts));
    for (auto& row : tokens)
      for (double& t : row) t = count(rng) < 150 ? 0 : count(rng);
    LaerLayout layout(experts, std::vector<int>(n, 0));
    for (int e = 0; e < experts; ++e)
      for (int g = 0; g < n; ++g) layout[e][g] = copies(rng) == 3 ? 1 + trial % 2 : 0;
    const double want = reference_cost(tokens, layout, gpn, cost);
    CHECK(laer_layout_cost(tokens, layout, gpn, cost) == want);
  }
}

TEST_CASE("LAER-MoE's plans follow their definition field by field on random records, EP 4 to 48") {
  std::mt19937 rng(13);
  int replans = 0, changes_gathers = 0;
  for (int index = 0; index < 48; ++index) {
    const LaerCase c = random_laer_case(rng, index);
    const int n = c.gpus;
    const int experts = c.model.num_experts;
    const BalancerContext ctx{n, c.hw.gpus_per_node, Placement::contiguous, &c.model, &c.hw};
    LaerMoe laer(c.params);
    // The history as the definition keeps it: per layer, the last `window` records, re-planned every
    // `period` records from their sum, with the cost model of the hardware's figures.
    struct History {
      std::deque<std::vector<std::uint32_t>> records;
      std::int64_t seen = 0;
      LaerLayout layout;
    };
    std::map<std::uint32_t, History> layers;
    const int capacity =
        c.params.capacity_per_gpu > 0 ? c.params.capacity_per_gpu : laer_default_capacity(experts, n);
    LaerCostModel cost;
    cost.token_bytes = static_cast<double>(c.model.token_bytes());
    cost.comp_s_per_token = c.model.expert_flops_per_token() / (c.hw.gpu.bf16_peak_TFLOPs * 1e12);
    cost.intra_GBps = c.hw.nvlink.port_bw_GBps;
    cost.inter_GBps = c.hw.infiniband.nic_bw_GBps;
    cost.checkpoint = c.params.checkpoint;
    for (const TraceRecord& r : c.records) {
      History& h = layers[r.layer];
      const LaerLayout before = h.layout;
      const bool had_layout = !h.layout.empty();
      const bool replan = h.seen > 0 && h.seen % c.params.period == 0;
      if (replan) {
        std::vector<std::vector<double>> tokens(n, std::vector<double>(experts, 0.0));
        for (const auto& old : h.records)
          for (int s = 0; s < n; ++s)
            for (int e = 0; e < experts; ++e) tokens[s][e] += old[static_cast<std::size_t>(s) * experts + e];
        h.layout = laer_plan_layout(tokens, capacity, c.hw.gpus_per_node, cost);
        ++replans;
      }
      h.records.push_back(r.counts);
      if (static_cast<int>(h.records.size()) > c.params.window) h.records.pop_front();
      ++h.seen;
      const Plan want = expected_plan(c, r, h.layout, before, replan, had_layout);
      if (replan && c.params.traffic == LaerTraffic::changes) changes_gathers += static_cast<int>(want.transfers.size());
      CAPTURE(index);
      CAPTURE(r.step);
      check_same(laer.plan(r, ctx), want);
    }
  }
  CHECK(replans > 100);
  CHECK(changes_gathers > 0);
}

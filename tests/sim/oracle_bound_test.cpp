// The oracle is a lower bound: its terms worked out by hand on round numbers, then checked against
// every balancer on random traces, clusters and models.
#include <doctest/doctest.h>

#include <cmath>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/hbm_fit.hpp"
#include "sim/balancers/oracle.hpp"
#include "sim/balancers/registry.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;
using test::record_of;

TEST_CASE("the oracle's compute term: the mean GPU's GEMM time at the best efficiency") {
  // 2 GPUs; 1 FLOP/ps; a token costs 2e6 FLOPs per GEMM, so 2e6 ps. 12 assignments, every expert fits
  // in HBM (80 GB against 1 MB per expert), so nothing has to travel.
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const ModelSpec model = test::simple_model(2, 1);
  const TraceRecord rec = record_of({{6, 2}, {4, 0}});
  const LayerBound b = oracle_bound(rec, hw, model, 2, {8, 4}, 1, true);
  CHECK(b.slots == 2);
  // Forward: 12 rows x 2e6 ps over 2 GPUs; the memory floor (2 MB of weights + 36 kB of rows at
  // 1000 bytes/ps = 2036 ps) is far below.
  CHECK(b.forward.compute_ps == doctest::Approx(12e6));
  CHECK(b.forward.egress_ps == 0);
  CHECK(b.backward.compute_ps == doctest::Approx(24e6));  // data and weight gradients
  CHECK(b.layer_ps() == 36'000'000);
  CHECK(std::string(b.forward.binding()) == "compute");
}

TEST_CASE("the oracle's traffic term: what cannot stay on a GPU whose HBM holds one expert") {
  HardwareSpec hw = test::simple_hardware(1, 2);
  hw.gpu.bf16_peak_TFLOPs = 1000;      // 2000 ps per row
  hw.gpu.hbm_capacity_GB = 0.0015;     // 1.5 MB: one 1 MB expert per GPU
  const ModelSpec model = test::simple_model(2, 1);
  // Rank 0 keeps its 6 tokens for expert 0 at best; its 2 for expert 1 leave: 2 x 1000 bytes at
  // 0.1 byte/ps = 20,000 ps out (dispatch) and 20,000 ps in (combine).
  const TraceRecord rec = record_of({{6, 2}, {4, 0}});
  const LayerBound b = oracle_bound(rec, hw, model, 2, {8, 4}, 1, true);
  CHECK(b.slots == 1);
  CHECK(b.forward.compute_ps == doctest::Approx(12'000));  // 12 x 2000 / 2
  CHECK(b.forward.egress_ps == doctest::Approx(20'000));
  CHECK(b.forward.ingress_ps == doctest::Approx(20'000));
  CHECK(b.forward.egress_gpu == 0);
  CHECK(std::string(b.forward.binding()) == "egress");
  CHECK(b.backward.compute_ps == doctest::Approx(24'000));
  CHECK(b.layer_ps() == 20'000 + 24'000);

  // With per-GPU copies and top-2 routing one copy can serve two assignments: half the bytes.
  hw.ep_backend.token_copies = TokenCopies::per_gpu;
  const LayerBound halved = oracle_bound(rec, hw, model, 2, {4, 2}, 2, false);
  CHECK(halved.forward.egress_ps == doctest::Approx(10'000));
  CHECK(halved.backward.total_ps() == 0);
}

TEST_CASE("the oracle's traffic term keeps each rank's largest counts, small ones counted or large ones selected") {
  // One expert fits per GPU; what leaves rank 0 is its counts less the largest. Counts up to four
  // times the experts are selected by counting values, larger ones by a partial sort: both must
  // keep the same counts, ties included.
  HardwareSpec hw = test::simple_hardware(1, 2);
  hw.gpu.bf16_peak_TFLOPs = 1000;
  hw.gpu.hbm_capacity_GB = 0.0015;  // one 1 MB expert per GPU
  const ModelSpec model = test::simple_model(2, 1);
  // Counted: {5, 5} keeps one 5, so 5 x 1000 bytes leave at 0.1 byte/ps: 50,000 ps.
  const LayerBound small = oracle_bound(record_of({{5, 5}, {0, 1}}), hw, model, 2, {10, 1}, 1, false);
  CHECK(small.slots == 1);
  CHECK(small.forward.egress_ps == doctest::Approx(50'000));
  // Selected: ten times the counts (50 > 4 x 2), ten times the time.
  const LayerBound large = oracle_bound(record_of({{50, 50}, {0, 10}}), hw, model, 2, {100, 10}, 1, false);
  CHECK(large.forward.egress_ps == doctest::Approx(500'000));
  // A zero among the counts is never kept in place of a count: {0, 7} leaves nothing.
  const LayerBound zero = oracle_bound(record_of({{0, 7}, {3, 0}}), hw, model, 2, {7, 3}, 1, false);
  CHECK(zero.forward.egress_ps == 0);
}

TEST_CASE("the oracle's compute term counts each rank's shared expert on its own GPU") {
  HardwareSpec hw = test::simple_hardware(1, 2);
  hw.gpu.bf16_peak_TFLOPs = 1000;
  const ModelSpec model = test::simple_model(2, 1, 1);
  const TraceRecord rec = record_of({{6, 2}, {4, 0}});
  // Shared expert: 8 rows on GPU 0 (16,000 ps), 4 on GPU 1 (8,000 ps); routed 24,000 ps in all:
  // max(16,000, (24,000 + 24,000) / 2) = 24,000.
  const LayerBound b = oracle_bound(rec, hw, model, 2, {8, 4}, 1, false);
  CHECK(b.forward.compute_ps == doctest::Approx(24'000));
  // One rank with all the tokens: its shared expert alone is the floor.
  const LayerBound lone = oracle_bound(record_of({{1, 1}, {0, 0}}), hw, model, 2, {100, 0}, 1, false);
  CHECK(lone.forward.compute_ps == doctest::Approx(200'000));
}

namespace {

/// A cluster, a model and a random trace drawn from `seed`: 1-4 nodes of 2-8 GPUs, one of three
/// copy modes, HBM from "every expert fits" down to "one spare slot", skewed expert popularity,
/// batches from decode-like (a few tokens per rank) to training-like.
struct RandomCase {
  HardwareSpec hw;
  ModelSpec model;
  int gpus = 0;
  std::vector<TraceRecord> records;
};

RandomCase random_case(std::uint32_t seed) {
  std::mt19937 rng(seed);
  const auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  RandomCase c;
  const int per_node = std::vector<int>{2, 4, 8}[pick(0, 2)];
  const int nodes = pick(1, 3);
  c.gpus = per_node * nodes;
  c.hw = test::simple_hardware(nodes, per_node);
  c.hw.gpu.bf16_peak_TFLOPs = 400;
  c.hw.gemm.efficiency = {{8, 0.1}, {128, 0.5}, {1024, 0.75}};
  c.hw.gemm.row_alignment = pick(0, 1) == 0 ? 1 : 16;
  c.hw.gemm.launch_us = 3;
  c.hw.gpu.hbm_GBps = 3000;
  c.hw.nvlink = {static_cast<double>(pick(100, 450)), 1};
  c.hw.infiniband = {static_cast<double>(pick(12, 50)), 3};
  c.hw.ep_backend.internode_route = pick(0, 1) == 0 ? "direct" : "rail_forward";
  c.hw.ep_backend.nvlink_efficiency = 0.8;
  c.hw.ep_backend.ib_efficiency = 0.9;
  const int copies = pick(0, 2);
  c.hw.ep_backend.token_copies = copies == 0 ? TokenCopies::per_expert : copies == 1 ? TokenCopies::per_gpu
                                                                                     : TokenCopies::per_node;
  if (c.hw.ep_backend.token_copies == TokenCopies::per_node && c.hw.ep_backend.internode_route == "direct")
    c.hw.ep_backend.internode_route = "rail_forward";

  const int experts_per_gpu = std::vector<int>{1, 2, 4}[pick(0, 2)];
  c.model = test::simple_model(c.gpus * experts_per_gpu, std::min(c.gpus * experts_per_gpu, pick(1, 4)), pick(0, 1));
  c.model.hidden_size = 512;
  c.model.expert_ffn_size = 256;
  c.model.dtype_bytes = 2;
  // HBM from a few spare slots to every expert everywhere.
  const double expert_bytes = static_cast<double>(c.model.expert_weight_bytes() + c.model.shared_weight_bytes());
  c.hw.gpu.hbm_capacity_GB = expert_bytes * (experts_per_gpu + pick(1, c.model.num_experts)) / 1e9;

  std::lognormal_distribution<double> popularity(0.0, 1.2);
  std::vector<double> weight(static_cast<std::size_t>(c.model.num_experts));
  for (double& w : weight) w = popularity(rng);
  const bool decode = pick(0, 3) == 0;
  for (int r = 0; r < 6; ++r) {
    TraceRecord rec;
    rec.step = static_cast<std::uint32_t>(r);
    rec.counts.assign(static_cast<std::size_t>(c.gpus * c.model.num_experts), 0);
    for (int s = 0; s < c.gpus; ++s) {
      const int tokens = decode ? pick(0, 8) : pick(64, 1024);
      for (int t = 0; t < tokens; ++t) {
        std::vector<double> w = weight;
        for (int k = 0; k < c.model.top_k; ++k) {
          const int e = std::discrete_distribution<int>(w.begin(), w.end())(rng);
          w[static_cast<std::size_t>(e)] = 0;  // top-k experts are distinct
          ++rec.counts[static_cast<std::size_t>(s * c.model.num_experts + e)];
        }
      }
    }
    c.records.push_back(std::move(rec));
  }
  return c;
}

}  // namespace

TEST_CASE("no balancer beats the oracle on random traces, clusters and models") {
  int checked = 0;
  for (std::uint32_t seed = 1; seed <= 40; ++seed) {
    const RandomCase c = random_case(seed);
    BalancerContext context = test::context_for(c.model, c.hw);
    for (const BalancerInfo& info : balancer_registry()) {
      std::unique_ptr<Balancer> balancer;
      try {
        balancer = make_balancer(BalancerChoice{info.name, YAML::Node(), ""}, "test");
      } catch (const std::exception&) {
        continue;
      }
      for (const TraceRecord& rec : c.records) {
        Plan plan;
        try {
          plan = balancer->plan(rec, context);
        } catch (const CannotServe&) {
          break;  // the replay reports this configuration as one the balancer cannot serve
        } catch (const std::invalid_argument&) {
          break;
        }
        if (hbm_overflow(plan, c.model, c.hw)) continue;  // refused by the replay, never simulated
        std::vector<std::int64_t> local(static_cast<std::size_t>(c.gpus), 0);
        for (int s = 0; s < c.gpus; ++s) {
          std::int64_t a = 0;
          for (int e = 0; e < c.model.num_experts; ++e) a += rec.count(s, e, c.model.num_experts);
          local[s] = a / c.model.top_k;
        }
        const LayerResult result = simulate_layer(c.hw, c.model, plan, local, true, &rec);
        const LayerBound bound = oracle_bound(rec, c.hw, c.model, c.gpus, local, c.model.top_k, true);
        INFO("seed " << seed << ", balancer " << info.name << ", record " << rec.step << ", " << c.gpus
                     << " GPUs, bound binding " << bound.forward.binding());
        CHECK(result.forward_ps >= static_cast<Time_ps>(bound.forward.total_ps()));
        CHECK(result.layer_ps() >= bound.layer_ps());
        ++checked;
      }
    }
  }
  CHECK(checked > 1000);
}

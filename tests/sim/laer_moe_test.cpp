// LAER-MoE: the planner's pieces by hand (replica counts, greedy placement, cost model), then the
// balancer's history/period behaviour, FSEP traffic, node-local routing and corner cases. With
// contiguous placement of 4 experts on 4 GPUs in 2 nodes of 2, GPU g is the home of expert g.
#include "sim/balancers/laer_moe.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <numeric>
#include <set>

#include "sim/balancers/placement.hpp"
#include "tests/sim/plan_checks.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

using test::check_counts_preserved;

TraceRecord record_of(const std::vector<std::vector<std::uint32_t>>& rows, std::uint32_t layer = 0) {
  TraceRecord r;
  r.layer = layer;
  for (const auto& row : rows) r.counts.insert(r.counts.end(), row.begin(), row.end());
  return r;
}

BalancerContext context_for(const ModelSpec& model, const HardwareSpec& hw) {
  BalancerContext c;
  c.num_gpus = hw.nodes * hw.gpus_per_node;
  c.gpus_per_node = hw.gpus_per_node;
  c.placement = Placement::contiguous;
  c.model = &model;
  c.hardware = &hw;
  return c;
}

LaerMoe laer(int capacity, int window = 5, int period = 1, LaerTraffic traffic = LaerTraffic::changes) {
  LaerMoeParams p;
  p.capacity_per_gpu = capacity;
  p.window = window;
  p.period = period;
  p.traffic = traffic;
  return LaerMoe(p);
}

/// Valid plan, (source, expert) totals preserved, carriers right, at most one instance per (expert,
/// GPU), sources use their own node's copies when there are any, shard transfers sized bytes / N.
void check_invariants(const Plan& plan, const TraceRecord& rec, const BalancerContext& ctx) {
  const int n = ctx.num_gpus;
  const int experts = ctx.model->num_experts;
  REQUIRE_NOTHROW(validate_plan(plan, experts, ctx.gpus_per_node));
  std::set<std::pair<int, int>> seen;
  std::map<int, std::set<int>> nodes_of;  // expert -> nodes with a copy
  for (const ExpertInstance& i : plan.instances) {
    CHECK(seen.insert({i.expert, i.gpu}).second);
    nodes_of[i.expert].insert(i.gpu / ctx.gpus_per_node);
  }
  for (const TokenRoute& r : plan.routes) {
    const ExpertInstance& inst = plan.instances[r.instance];
    CHECK(r.tokens > 0);
    CHECK(r.via_gpu == -1);
    CHECK(r.carrier == (r.src_rank == inst.gpu ? Carrier::none : Carrier::ep_backend));
    if (nodes_of[inst.expert].count(r.src_rank / ctx.gpus_per_node))
      CHECK(inst.gpu / ctx.gpus_per_node == r.src_rank / ctx.gpus_per_node);
  }
  check_counts_preserved(plan, rec, experts);
  const std::int64_t bytes = ctx.model->expert_weight_bytes();
  for (const Transfer& t : plan.transfers) {
    CHECK(t.carrier == Carrier::ep_backend);
    CHECK(t.src_gpu != t.dst_gpu);
    CHECK(t.bytes >= bytes / n);
    CHECK(t.bytes <= bytes / n + 1);
    const int g = plan.instances[t.instance].gpu;
    if (t.kind == TransferKind::weights) {
      CHECK(t.pass == PassKind::forward);
      CHECK(t.start == TransferStart::prefetch);
      CHECK(t.dst_gpu == g);
    } else {
      CHECK(t.pass == PassKind::backward);
      CHECK(t.src_gpu == g);
    }
  }
}

std::map<int, int> copies_per_gpu(const Plan& plan) {
  std::map<int, int> out;
  for (const ExpertInstance& i : plan.instances) ++out[i.gpu];
  return out;
}

}  // namespace

TEST_CASE("laer: precise replica counts by hand") {
  // One node: start at one copy each, grow by one, ties to the lowest index: {4, 2, 1, 1}.
  CHECK(laer_precise_replicas({8, 4, 2, 2}, 4, 2, 1) == std::vector<int>{4, 2, 1, 1});
  // Two nodes with room for one copy per node: start at 2, grow by 2.
  CHECK(laer_precise_replicas({8, 4, 2, 2}, 4, 2, 2) == std::vector<int>{2, 2, 2, 2});
  CHECK(laer_precise_replicas({8, 4, 2, 2}, 4, 3, 2) == std::vector<int>{6, 2, 2, 2});
  // 9 slots, 2 nodes: no expert can grow by 2 once 8 are used; the last slot stays empty.
  CHECK(laer_precise_replicas({8, 4, 2, 2}, 3, 3, 2) == std::vector<int>{2, 2, 2, 2});
  // No room for a copy per node: start at one, grow by one until every expert reaches `nodes`.
  CHECK(laer_precise_replicas({8, 4, 2, 2}, 2, 3, 2) == std::vector<int>{2, 2, 1, 1});
  CHECK_THROWS_AS(laer_precise_replicas({1, 1, 1, 1}, 1, 3, 1), std::invalid_argument);
}

TEST_CASE("laer: greedy placement by hand") {
  // Every replica carries 2.0: stable order e0 x4, e1 x2, e2, e3. Each goes to the node with fewest
  // copies of its expert, then the least-loaded GPU.
  const LaerLayout a = laer_greedy_placement({4, 2, 1, 1}, {8, 4, 2, 2}, 4, 2, 2);
  CHECK(a[0] == std::vector<int>{1, 1, 1, 1});
  CHECK(a[1] == std::vector<int>{1, 0, 1, 0});
  CHECK(a[2] == std::vector<int>{0, 1, 0, 0});
  CHECK(a[3] == std::vector<int>{0, 0, 0, 1});
  // Duplicates are allowed, as in the source: one GPU, two copies of one expert.
  const LaerLayout dup = laer_greedy_placement({2}, {10}, 1, 8, 2);
  CHECK(dup[0] == std::vector<int>{2});
  CHECK_THROWS_AS(laer_greedy_placement({3, 2}, {1, 1}, 2, 2, 2), std::runtime_error);
}

TEST_CASE("laer: cost model by hand") {
  LaerCostModel cost;
  cost.token_bytes = 1000;
  cost.comp_s_per_token = 2e-6;
  cost.intra_GBps = 100;
  cost.inter_GBps = 25;
  // 2 nodes of 1 GPU; expert 0 on GPU 0, expert 1 on GPU 1. Rank 0 sends 10 tokens to expert 1
  // (inter-node: 1e4 bytes / 25 GB/s = 4e-7 s) and 10 to expert 0 (itself: 1e4 / 1e18 ~ 0).
  const LaerLayout layout = {{1, 0}, {0, 1}};
  const double t = laer_layout_cost({{10, 10}, {0, 0}}, layout, 1, cost);
  CHECK(t == doctest::Approx(4 * (4e-7 + 1e-14) + 3 * 2e-5));
  cost.checkpoint = true;
  CHECK(laer_layout_cost({{10, 10}, {0, 0}}, layout, 1, cost) == doctest::Approx(4 * 4e-7 + 4 * 2e-5));
}

TEST_CASE("laer: planner spreads a hot expert, cheapest candidate wins") {
  LaerCostModel cost;
  cost.token_bytes = 1000;
  cost.comp_s_per_token = 2e-6;
  cost.intra_GBps = 100;
  cost.inter_GBps = 25;
  // One node of 4, capacity 2: even gives 2 copies each; precise gives expert 0 five copies.
  const std::vector<std::vector<double>> hot = {{100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}};
  const LaerLayout layout = laer_plan_layout(hot, 2, 4, cost);
  int copies0 = 0;
  for (int c : layout[0]) copies0 += c;
  CHECK(copies0 == 5);
  // Uniform load: even (2 copies each) and precise tie in compute; even is first and wins ties.
  const std::vector<std::vector<double>> flat(4, std::vector<double>(4, 10));
  const LaerLayout even = laer_plan_layout(flat, 2, 4, cost);
  for (const auto& row : even) CHECK(std::accumulate(row.begin(), row.end(), 0) == 2);
}

TEST_CASE("laer_moe: static first, then layouts from history, FSEP traffic on changes") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const BalancerContext ctx = context_for(model, hw);
  LaerMoe b = laer(/*capacity=*/2, /*window=*/2, /*period=*/2);
  const TraceRecord rec = record_of({{100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}});
  for (int k = 0; k < 2; ++k) {
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    CHECK(plan.instances.size() == 4);
    CHECK(plan.transfers.empty());
    CHECK(plan.tokens_per_gpu()[0] == 400);
  }
  const Plan plan = b.plan(rec, ctx);  // re-planned from records 0 and 1
  check_invariants(plan, rec, ctx);
  for (const auto& [g, c] : copies_per_gpu(plan)) CHECK(c <= 2);
  std::set<int> gpus0;
  for (const ExpertInstance& i : plan.instances)
    if (i.expert == 0) gpus0.insert(i.gpu);
  CHECK(gpus0.size() >= 2);
  const auto load = plan.tokens_per_gpu();
  CHECK(*std::max_element(load.begin(), load.end()) < 400);
  // Gathers for every copy new on its GPU: 3 shards each (N - 1 = 3 other GPUs).
  int gathers = 0, reduces = 0;
  for (const Transfer& t : plan.transfers) (t.kind == TransferKind::weights ? gathers : reduces)++;
  CHECK(gathers > 0);
  CHECK(gathers % 3 == 0);
  CHECK(reduces > 0);  // expert 0 is replicated
  // Next record, not a re-plan record: same layout, no gathers; replicated experts still reduce.
  const Plan next = b.plan(rec, ctx);
  check_invariants(next, rec, ctx);
  CHECK(next.instances.size() == plan.instances.size());
  for (const Transfer& t : next.transfers) CHECK(t.kind == TransferKind::gradients);
}

TEST_CASE("laer_moe: full FSEP traffic and layers") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const BalancerContext ctx = context_for(model, hw);
  LaerMoeParams p;
  p.capacity_per_gpu = 1;
  p.traffic = LaerTraffic::always;
  p.planner_time_us = 7;
  LaerMoe b(p);
  const TraceRecord rec = record_of({{5, 1, 1, 1}, {5, 1, 1, 1}, {5, 1, 1, 1}, {5, 1, 1, 1}});
  const Plan first = b.plan(rec, ctx);
  check_invariants(first, rec, ctx);
  CHECK(first.planner.duration_ps == 0);
  // Every copy gathers 3 shards and reduce-scatters 3: 4 copies x 6.
  CHECK(first.transfers.size() == 24);
  const Plan second = b.plan(rec, ctx);
  check_invariants(second, rec, ctx);
  CHECK(second.planner.duration_ps == us_to_ps(7));
  CHECK(second.instances.size() == 4);  // capacity 1 x 4 GPUs = 4 experts: a re-layout only
  // Another layer starts static.
  const Plan other = b.plan(record_of({{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}}, 3), ctx);
  CHECK(other.planner.duration_ps == 0);
  CHECK(other.instances.size() == 4);
}

TEST_CASE("laer_moe: corner cases") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const BalancerContext ctx = context_for(model, hw);

  SUBCASE("an expert hotter than a whole GPU") {
    LaerMoe b = laer(3, 1, 1);
    const TraceRecord rec = record_of({{1000, 1, 1, 1}, {1000, 1, 1, 1}, {1000, 1, 1, 1}, {1000, 1, 1, 1}});
    b.plan(rec, ctx);
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    const auto load = plan.tokens_per_gpu();
    // 12 slots, 2 nodes: every expert starts with 2 copies, expert 0 grows to 6, 3 per node over its
    // 2 GPUs; a node's 2000 tokens split by multiplicity put 2 x 2000/3 = 1333 on one GPU (4003 static).
    CHECK(*std::max_element(load.begin(), load.end()) <= 1340);
    int copies0 = 0;
    for (const ExpertInstance& i : plan.instances)
      if (i.expert == 0) ++copies0;
    CHECK(copies0 == 4);  // 6 copies on 4 GPUs: two GPUs hold 2 (one instance each)
  }
  SUBCASE("all load on one node: remote copies are used only when the node has none") {
    LaerMoe b = laer(2, 1, 1);
    const TraceRecord rec = record_of({{100, 50, 0, 0}, {100, 50, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}});
    b.plan(rec, ctx);
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    // 8 slots for 4 experts in 2 nodes: one copy of each per node; node 0's sources stay in node 0,
    // so node 1 computes nothing (LAER's routing is node-local, the NVLink-domain floor).
    const auto load = plan.tokens_per_gpu();
    CHECK(load[0] + load[1] == 300);
    CHECK(load[2] + load[3] == 0);
    // Placement (LAER assumes an even split over all copies, 100 per copy of expert 0, 50 of expert
    // 1): e0 -> GPUs 0 and 2, e1 -> GPUs 1 and 3; node-local routing then gives GPU 0 all of e0.
    CHECK(load[0] == 200);
    CHECK(load[1] == 100);
  }
  SUBCASE("zero-token micro-batches") {
    LaerMoe b = laer(2, 2, 1);
    const TraceRecord zero = record_of({{0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}});
    for (int k = 0; k < 3; ++k) {
      const Plan plan = b.plan(zero, ctx);
      check_invariants(plan, zero, ctx);
      CHECK(plan.routes.empty());
    }
  }
  SUBCASE("more replica slots than experts") {
    LaerMoe b = laer(4, 1, 1);  // 16 slots for 4 experts
    const TraceRecord rec = record_of({{10, 20, 30, 40}, {10, 20, 30, 40}, {10, 20, 30, 40}, {10, 20, 30, 40}});
    b.plan(rec, ctx);
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    for (const auto& [g, c] : copies_per_gpu(plan)) CHECK(c <= 4);
  }
  SUBCASE("capacity below the expert count is rejected") {
    LaerMoeParams p;
    p.capacity_per_gpu = 0;  // default: 2 E/N = 2
    LaerMoe ok(p);
    const TraceRecord rec = record_of({{1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}, {1, 1, 1, 1}});
    CHECK_NOTHROW(ok.plan(rec, ctx));
    const ModelSpec big = test::simple_model(16);
    BalancerContext big_ctx = context_for(big, hw);
    LaerMoe small = laer(3);
    TraceRecord r16;
    r16.counts.assign(4 * 16, 1);
    CHECK_THROWS_AS(small.plan(r16, big_ctx), std::invalid_argument);
  }
}

TEST_CASE("laer_moe: parameters through ConfigMap") {
  YAML::Node node = YAML::Load(
      "{capacity_per_gpu: 3, window: 5, period: 2, traffic: always, gradient_dtype: fp32, checkpoint: true, "
      "comp_us_per_token: 0.5, "
      "intra_GBps: 216.269, inter_GBps: 88.9539, planner_time_us: 2}");
  ConfigMap params(node, "test.yaml", "balancer.params");
  auto b = make_laer_moe(params);
  CHECK_NOTHROW(params.finish());
  CHECK(b != nullptr);
  YAML::Node bad = YAML::Load("{traffic: sometimes}");
  ConfigMap bad_params(bad, "test.yaml", "balancer.params");
  CHECK_THROWS(make_laer_moe(bad_params));
}

TEST_CASE("laer_moe: warm-up until a layout planned from a full window is in use") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const BalancerContext ctx = context_for(model, hw);
  LaerMoe b = laer(/*capacity=*/2, /*window=*/2, /*period=*/1);
  const TraceRecord rec = record_of({{100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}});
  // Record 0: static placement; record 1: a layout from one record of history; record 2 on: from two.
  const bool expected[] = {false, false, true, true};
  for (bool steady : expected) {
    b.plan(rec, ctx);
    CHECK(b.last_plan_steady() == steady);
  }
  // Another layer starts its own warm-up.
  b.plan(record_of({{100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}, {100, 1, 1, 1}}, 1), ctx);
  CHECK_FALSE(b.last_plan_steady());
}

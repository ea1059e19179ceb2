// DeepSeek EPLB: the port of rebalance_experts against the README example, then the balancer's
// history/period behaviour, weight moves, token split and corner cases. With contiguous placement of
// 8 experts on 4 GPUs, GPU g is the home of experts 2g and 2g+1.
#include "sim/balancers/deepseek_eplb.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <set>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/eplb_algorithm.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/core/input_error.hpp"
#include "tests/sim/plan_checks.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

using test::check_counts_preserved;

const std::vector<std::vector<double>> kReadmeWeight = {
    {90, 132, 40, 61, 104, 165, 39, 4, 73, 56, 183, 86},
    {20, 107, 104, 64, 19, 197, 187, 157, 172, 86, 16, 27},
};

/// max/mean over GPUs of the per-replica loads weight[e]/logcnt[e] summed per GPU.
double gpu_max_over_mean(const EplbLayout& layout, const std::vector<double>& weight, int num_gpus) {
  const int per_gpu = static_cast<int>(layout.phy2log.size()) / num_gpus;
  std::vector<double> load(num_gpus, 0.0);
  for (std::size_t p = 0; p < layout.phy2log.size(); ++p) {
    const int e = layout.phy2log[p];
    load[p / per_gpu] += weight[e] / layout.logcnt[e];
  }
  double sum = 0;
  for (double l : load) sum += l;
  return *std::max_element(load.begin(), load.end()) / (sum / num_gpus);
}

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

/// Valid plan, (source, expert) totals preserved, carriers right, slots per GPU as configured.
void check_invariants(const Plan& plan, const TraceRecord& rec, const BalancerContext& ctx) {
  const int n = ctx.num_gpus;
  const int experts = ctx.model->num_experts;
  REQUIRE_NOTHROW(validate_plan(plan, experts, ctx.gpus_per_node));
  for (const TokenRoute& r : plan.routes) {
    const ExpertInstance& inst = plan.instances[r.instance];
    CHECK(r.tokens > 0);
    CHECK(r.via_gpu == -1);
    CHECK(r.carrier == (r.src_rank == inst.gpu ? Carrier::none : Carrier::ep_backend));
  }
  check_counts_preserved(plan, rec, experts);
  for (const Transfer& t : plan.transfers) {
    CHECK(t.kind == TransferKind::weights);
    CHECK(t.pass == PassKind::forward);
    CHECK(t.start == TransferStart::before_dispatch);
    CHECK(t.bytes == ctx.model->expert_weight_bytes());
    CHECK(t.carrier == Carrier::ep_backend);
    CHECK(t.src_gpu == home_gpu(plan.instances[t.instance].expert, experts, n, ctx.placement));
    CHECK(t.dst_gpu == plan.instances[t.instance].gpu);
    CHECK(t.src_gpu != t.dst_gpu);
  }
  for (int g = 0; g < n; ++g) CHECK(plan.gemm_order[g].size() == 1);
}

int count_gpu_instances(const Plan& plan, int gpu) {
  return static_cast<int>(std::count_if(plan.instances.begin(), plan.instances.end(),
                                        [&](const ExpertInstance& i) { return i.gpu == gpu; }));
}

/// The records schedule: `window` and `period` count the layer's records.
DeepseekEplb eplb(int window, int period, int redundant = 1, int groups = 1,
                  EplbPolicy policy = EplbPolicy::auto_select) {
  DeepseekEplbParams p;
  p.schedule = EplbSchedule::records;
  p.window = window;
  p.period = period;
  p.redundant_experts_per_gpu = redundant;
  p.num_groups = groups;
  p.policy = policy;
  return DeepseekEplb(p);
}

}  // namespace

TEST_CASE("eplb: README example gives the published phy2log (hierarchical)") {
  const auto layouts = rebalance_experts(kReadmeWeight, 16, 4, 2, 8);
  REQUIRE(layouts.size() == 2);
  CHECK(layouts[0].phy2log == std::vector<int>{5, 6, 5, 7, 8, 4, 3, 4, 10, 9, 10, 2, 0, 1, 11, 1});
  CHECK(layouts[1].phy2log == std::vector<int>{7, 10, 6, 8, 6, 11, 8, 9, 2, 4, 5, 1, 5, 0, 3, 1});
  CHECK(gpu_max_over_mean(layouts[0], kReadmeWeight[0], 8) == doctest::Approx(1.208).epsilon(0.001));
  CHECK(gpu_max_over_mean(layouts[1], kReadmeWeight[1], 8) == doctest::Approx(1.242).epsilon(0.001));
  for (const EplbLayout& l : layouts) {
    int total = 0;
    for (int c : l.logcnt) total += c;
    CHECK(total == 16);
    // log2phy inverts phy2log, ranks 0..logcnt-1, padded with -1.
    for (std::size_t e = 0; e < l.logcnt.size(); ++e)
      for (std::size_t k = 0; k < l.log2phy[e].size(); ++k) {
        if (static_cast<int>(k) < l.logcnt[e]) {
          REQUIRE(l.log2phy[e][k] >= 0);
          CHECK(l.phy2log[l.log2phy[e][k]] == static_cast<int>(e));
          CHECK(l.phyrank[l.log2phy[e][k]] == static_cast<int>(k));
        } else {
          CHECK(l.log2phy[e][k] == -1);
        }
      }
    // Hierarchical: every expert's replicas stay in one node (slots 0-7 node 0, 8-15 node 1).
    for (std::size_t e = 0; e < l.logcnt.size(); ++e) {
      std::set<int> nodes;
      for (int k = 0; k < l.logcnt[e]; ++k) nodes.insert(l.log2phy[e][k] / 8);
      CHECK(nodes.size() == 1);
    }
  }
}

TEST_CASE("eplb: README example under the global policy (stable-sort tie rule)") {
  // rebalance_experts picks the global policy when groups % nodes != 0 (3 % 2).
  const auto layouts =
      rebalance_experts(std::vector<std::vector<double>>{kReadmeWeight[0], kReadmeWeight[1]}, 16, 1, 1, 8);
  CHECK(gpu_max_over_mean(layouts[0], kReadmeWeight[0], 8) == doctest::Approx(1.073).epsilon(0.001));
  CHECK(gpu_max_over_mean(layouts[1], kReadmeWeight[1], 8) == doctest::Approx(1.190).epsilon(0.001));
  // No anti-affinity: in layer 1 expert 8 takes both slots of GPU 6 (reference section 2).
  CHECK(layouts[1].phy2log[12] == 8);
  CHECK(layouts[1].phy2log[13] == 8);
  const EplbLayout auto_global = rebalance_experts(std::vector<double>(12, 1.0), 16, 3, 2, 8);
  CHECK(auto_global.phy2log.size() == 16);
}

TEST_CASE("eplb: building blocks by hand") {
  // replicate: weights 6, 3, 1 into 5 slots: 6/1 -> 6/2=3 vs 3/1=3 tie -> lowest index (0) -> 6/3=2 vs 3.
  const ReplicateResult rep = replicate_experts({6, 3, 1}, 5);
  CHECK(rep.phy2log == std::vector<int>{0, 1, 2, 0, 0});
  CHECK(rep.rank == std::vector<int>{0, 0, 0, 1, 2});
  CHECK(rep.logcnt == std::vector<int>{3, 1, 1});
  // packing: 5, 4, 3, 2 into 2 packs of 2: 5->p0, 4->p1, 3->p1 (4<5), 2->p0.
  const PackResult pack = balanced_packing({3, 5, 2, 4}, 2);
  CHECK(pack.pack_index == std::vector<int>{1, 0, 0, 1});
  CHECK(pack.rank_in_pack == std::vector<int>{1, 0, 1, 0});
  // Equal weights: stable order, lowest pack first.
  const PackResult ties = balanced_packing({1, 1, 1, 1}, 2);
  CHECK(ties.pack_index == std::vector<int>{0, 1, 0, 1});
  // The same with 64 items into 4 packs (past the few items a sort orders by insertion, stable or
  // not): item i to pack i mod 4, at place i / 4.
  const PackResult many = balanced_packing(std::vector<double>(64, 1.0), 4);
  for (int i = 0; i < 64; ++i) {
    CHECK(many.pack_index[i] == i % 4);
    CHECK(many.rank_in_pack[i] == i / 4);
  }
  CHECK_THROWS_AS(balanced_packing({1, 1, 1}, 2), std::invalid_argument);
  CHECK_THROWS_AS(replicate_experts({1, 1, 1}, 2), std::invalid_argument);
  CHECK_THROWS_AS(rebalance_experts_hierarchical({1, 1, 1, 1}, 6, 2, 2, 4), std::invalid_argument);  // 6 % 4
  // All-zero weights are legal and deterministic: the extra slots go to expert 0.
  const ReplicateResult zero = replicate_experts({0, 0, 0}, 5);
  CHECK(zero.logcnt == std::vector<int>{3, 1, 1});
}

TEST_CASE("deepseek_eplb: static until the first period, then the history's placement") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const BalancerContext ctx = context_for(model, hw);
  DeepseekEplb b = eplb(/*window=*/2, /*period=*/2);
  // Expert 0 is hot: 400 of 540 tokens.
  const TraceRecord rec = record_of({{100, 10, 0, 0, 0, 0, 0, 0},
                                     {100, 0, 10, 0, 0, 0, 0, 0},
                                     {100, 0, 0, 10, 10, 10, 10, 10},
                                     {100, 10, 10, 10, 10, 10, 10, 10}});
  for (int k = 0; k < 2; ++k) {
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    CHECK(plan.instances.size() == 8);  // static placement: home experts only
    CHECK(plan.transfers.empty());
    CHECK(plan.tokens_per_gpu()[0] == 420);
    CHECK(plan.planner.site == PlannerSite::host_cpu);
    CHECK(plan.planner.duration_ps == 0);
  }
  // Record 2: re-plan from records 0 and 1. P = 8 + 4 = 12 slots, 3 per GPU; the global policy (one
  // group) gives expert 0 five copies (400/5 = 80 > 40 of every other expert).
  const Plan plan = b.plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  REQUIRE(plan.instances.size() == 12);
  for (int g = 0; g < 4; ++g) CHECK(count_gpu_instances(plan, g) == 3);
  int copies0 = 0;
  for (const ExpertInstance& i : plan.instances) copies0 += i.expert == 0;
  CHECK(copies0 == 5);
  // Weights move for every copy not on its GPU before, and come from home.
  CHECK(!plan.transfers.empty());
  const auto load = plan.tokens_per_gpu();
  CHECK(*std::max_element(load.begin(), load.end()) < 420);
  // Record 3: same placement, nothing moves.
  const Plan next = b.plan(rec, ctx);
  check_invariants(next, rec, ctx);
  CHECK(next.transfers.empty());
  CHECK(next.instances.size() == 12);
  for (std::size_t i = 0; i < 12; ++i) {
    CHECK(next.instances[i].expert == plan.instances[i].expert);
    CHECK(next.instances[i].gpu == plan.instances[i].gpu);
  }
}

TEST_CASE("deepseek_eplb: layers keep separate histories, the window forgets") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const BalancerContext ctx = context_for(model, hw);
  DeepseekEplbParams p;
  p.schedule = EplbSchedule::records;
  p.window = 1;
  p.period = 1;
  p.redundant_experts_per_gpu = 1;  // P = 6, 3 per GPU
  p.planner_time_us = 5;
  DeepseekEplb b(p);
  const TraceRecord hot0 = record_of({{90, 0, 0, 0}, {0, 0, 0, 0}}, 0);
  const TraceRecord hot3 = record_of({{0, 0, 0, 0}, {0, 0, 0, 90}}, 0);
  const TraceRecord other = record_of({{1, 1, 1, 1}, {1, 1, 1, 1}}, 1);
  CHECK(b.plan(hot0, ctx).instances.size() == 4);
  CHECK(b.plan(other, ctx).instances.size() == 4);  // layer 1's first record: static
  const Plan p1 = b.plan(hot3, ctx);                // layer 0, planned from hot0 only
  check_invariants(p1, hot3, ctx);
  CHECK(p1.planner.duration_ps == us_to_ps(5));
  int c0 = 0, c3 = 0;
  for (const ExpertInstance& i : p1.instances) {
    c0 += i.expert == 0;
    c3 += i.expert == 3;
  }
  CHECK(c0 == 3);
  CHECK(c3 == 1);
  const Plan p2 = b.plan(hot0, ctx);  // planned from hot3 only (window 1)
  check_invariants(p2, hot0, ctx);
  c0 = c3 = 0;
  for (const ExpertInstance& i : p2.instances) {
    c0 += i.expert == 0;
    c3 += i.expert == 3;
  }
  CHECK(c0 == 1);
  CHECK(c3 == 3);
  CHECK(!p2.transfers.empty());
}

TEST_CASE("deepseek_eplb: even split with rotating remainder") {
  const ModelSpec model = test::simple_model(2);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const BalancerContext ctx = context_for(model, hw);
  // redundant 1: P = 4, 2 per GPU. History: expert 0 only, so expert 0 gets 3 copies.
  DeepseekEplb b = eplb(1, 1, 1);
  b.plan(record_of({{10, 0}, {10, 0}}), ctx);
  const TraceRecord rec = record_of({{7, 1}, {8, 0}});
  const Plan plan = b.plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  std::map<std::pair<int, int>, std::int64_t> by_src_inst;
  std::vector<int> copies;
  for (std::size_t i = 0; i < plan.instances.size(); ++i)
    if (plan.instances[i].expert == 0) copies.push_back(static_cast<int>(i));
  REQUIRE(copies.size() == 3);
  for (const TokenRoute& r : plan.routes) by_src_inst[{r.src_rank, r.instance}] += r.tokens;
  // Rank 0: 7 = 3+2+2, remainder on copy 0. Rank 1: 8 = 2+3+3, remainders start at copy 1.
  CHECK(by_src_inst[{0, copies[0]}] == 3);
  CHECK(by_src_inst[{0, copies[1]}] == 2);
  CHECK(by_src_inst[{0, copies[2]}] == 2);
  CHECK(by_src_inst[{1, copies[0]}] == 2);
  CHECK(by_src_inst[{1, copies[1]}] == 3);
  CHECK(by_src_inst[{1, copies[2]}] == 3);
}

TEST_CASE("deepseek_eplb: corner cases") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const BalancerContext ctx = context_for(model, hw);

  SUBCASE("an expert hotter than a whole GPU is spread over many GPUs") {
    DeepseekEplb b = eplb(1, 1, 2);  // P = 16, 4 per GPU
    const TraceRecord rec = record_of({{1000, 1, 1, 1, 1, 1, 1, 1},
                                       {1000, 1, 1, 1, 1, 1, 1, 1},
                                       {1000, 1, 1, 1, 1, 1, 1, 1},
                                       {1000, 1, 1, 1, 1, 1, 1, 1}});
    b.plan(rec, ctx);
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    std::set<int> gpus;
    for (const ExpertInstance& i : plan.instances)
      if (i.expert == 0) gpus.insert(i.gpu);
    CHECK(gpus.size() == 4);  // 9 copies of expert 0 (4000/9 = 444 tokens each) over all 4 GPUs
    // Some GPU holds 3 of the 9 copies: 3 x 4000/9 = 1333 (+ rounding and a small expert), against
    // 4004 on GPU 0 under static EP.
    const auto load = plan.tokens_per_gpu();
    CHECK(*std::max_element(load.begin(), load.end()) <= 1340);
  }
  SUBCASE("all load on one node; hierarchical keeps replicas in their node") {
    DeepseekEplb b = eplb(1, 1, 1, /*groups=*/2, EplbPolicy::hierarchical);
    const TraceRecord rec = record_of({{50, 40, 30, 20, 0, 0, 0, 0},
                                       {50, 40, 30, 20, 0, 0, 0, 0},
                                       {0, 0, 0, 0, 0, 0, 0, 0},
                                       {0, 0, 0, 0, 0, 0, 0, 0}});
    b.plan(rec, ctx);
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    std::map<int, std::set<int>> nodes;
    for (const ExpertInstance& i : plan.instances) nodes[i.expert].insert(i.gpu / 2);
    for (const auto& [e, ns] : nodes) CHECK(ns.size() == 1);
    // Group 0 (experts 0-3) fills one node, group 1 the other: the hot node keeps all the load.
    const auto load = plan.tokens_per_gpu();
    CHECK(load[0] + load[1] == 280);
    CHECK(load[2] + load[3] == 0);
  }
  SUBCASE("zero-token micro-batches") {
    DeepseekEplb b = eplb(2, 1, 1);
    const TraceRecord zero = record_of(
        {{0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}});
    for (int k = 0; k < 3; ++k) {
      const Plan plan = b.plan(zero, ctx);
      check_invariants(plan, zero, ctx);
      CHECK(plan.routes.empty());
    }
  }
  SUBCASE("more replica slots than experts") {
    DeepseekEplb b = eplb(1, 1, 3);  // P = 8 + 12 = 20 slots, 5 per GPU
    const TraceRecord rec = record_of({{10, 20, 30, 40, 50, 60, 70, 80},
                                       {10, 20, 30, 40, 50, 60, 70, 80},
                                       {10, 20, 30, 40, 50, 60, 70, 80},
                                       {10, 20, 30, 40, 50, 60, 70, 80}});
    b.plan(rec, ctx);
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    CHECK(plan.instances.size() == 20);
    for (int g = 0; g < 4; ++g) CHECK(count_gpu_instances(plan, g) == 5);
  }
  SUBCASE("no redundant slots: a pure rearrangement") {
    DeepseekEplb b = eplb(1, 1, 0);
    const TraceRecord rec = record_of({{80, 70, 60, 50, 40, 30, 20, 10},
                                       {0, 0, 0, 0, 0, 0, 0, 0},
                                       {0, 0, 0, 0, 0, 0, 0, 0},
                                       {0, 0, 0, 0, 0, 0, 0, 0}});
    b.plan(rec, ctx);
    const Plan plan = b.plan(rec, ctx);
    check_invariants(plan, rec, ctx);
    CHECK(plan.instances.size() == 8);
    const auto load = plan.tokens_per_gpu();
    CHECK(*std::max_element(load.begin(), load.end()) == 90);  // LPT: 80+10, 70+20, 60+30, 50+40
  }
  SUBCASE("hierarchical needs groups divisible by nodes") {
    DeepseekEplb b = eplb(1, 1, 1, 1, EplbPolicy::hierarchical);
    const TraceRecord rec = record_of(
        {{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}});
    b.plan(rec, ctx);
    CHECK_THROWS_AS(b.plan(rec, ctx), CannotServe);
  }
}

TEST_CASE("deepseek_eplb: re-balances every N trace steps from the last steps' loads, weights before the dispatch") {
  const ModelSpec model = test::simple_model(4);  // 1e6 weight bytes per expert
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const BalancerContext ctx = context_for(model, hw);
  DeepseekEplbParams p;
  p.period = 2;  // rebalance_every_steps
  p.window = 1;  // window_steps
  p.redundant_experts_per_gpu = 1;  // P = 6, 3 per GPU
  DeepseekEplb b(p);
  auto at = [](TraceRecord r, std::uint32_t step, std::uint32_t mb) {
    r.step = step;
    r.micro_batch = mb;
    return r;
  };
  // Two micro-batches per step, trace steps counted from the first one seen (10).
  const TraceRecord hot0 = record_of({{90, 0, 0, 0}, {0, 0, 0, 0}});
  const TraceRecord hot3 = record_of({{0, 0, 0, 0}, {0, 0, 0, 90}});
  for (const TraceRecord& r : {at(hot0, 10, 0), at(hot0, 10, 1), at(hot3, 11, 0), at(hot3, 11, 1)}) {
    const Plan plan = b.plan(r, ctx);
    CHECK(plan.instances.size() == 4);  // steps 0 and 1 of the layer: the static placement
    CHECK(plan.transfers.empty());
    CHECK_FALSE(b.last_plan_steady());
  }
  CHECK(b.warmup_periods() == 2);  // period 2 x max(1, ceil(1 / 2))
  CHECK(b.warmup_records() == 4);  // x 2 micro-batches per step
  // Step 12 (the layer's step 2): planned from step 11 alone, whose two records give expert 3 all 180
  // tokens: it gets the 2 extra slots (3 copies). Per-copy loads 60, 60, 60, 0, 0, 0 packed onto 2 GPUs
  // of 3 slots: GPU 0 takes copies 1 and 3 of expert 3 and expert 2, GPU 1 copy 2 of expert 3 and
  // experts 0 and 1. New (expert, GPU) pairs get weights from home: 3 -> GPU 0 (two copies, one
  // transfer), 2 -> GPU 0, 0 -> GPU 1, 1 -> GPU 1. Expert 3 on GPU 1 is at home.
  const TraceRecord first = at(hot0, 12, 0);
  const Plan replanned = b.plan(first, ctx);
  check_invariants(replanned, first, ctx);
  CHECK(b.last_plan_steady());
  std::vector<std::pair<int, int>> placed;
  for (const ExpertInstance& i : replanned.instances) placed.push_back({i.expert, i.gpu});
  CHECK(placed == std::vector<std::pair<int, int>>{{3, 0}, {3, 0}, {2, 0}, {3, 1}, {0, 1}, {1, 1}});
  std::set<std::pair<int, int>> moved;  // (expert, destination)
  for (const Transfer& t : replanned.transfers) moved.insert({replanned.instances[t.instance].expert, t.dst_gpu});
  CHECK(replanned.transfers.size() == 4);
  CHECK(moved == std::set<std::pair<int, int>>{{3, 0}, {2, 0}, {0, 1}, {1, 1}});
  // The step's second micro-batch and step 13 keep the placement without moving anything.
  for (const TraceRecord& r : {at(hot0, 12, 1), at(hot0, 13, 0), at(hot0, 13, 1)}) {
    const Plan plan = b.plan(r, ctx);
    CHECK(plan.instances.size() == 6);
    CHECK(plan.transfers.empty());
    CHECK(b.last_plan_steady());
  }
  // Step 14: planned from step 13 (expert 0 hot, 3 copies): GPU 0 holds experts 0, 0, 3 and GPU 1
  // experts 0, 1, 2. Every pair is at home or was placed before: nothing moves.
  const Plan again = b.plan(at(hot3, 14, 0), ctx);
  placed.clear();
  for (const ExpertInstance& i : again.instances) placed.push_back({i.expert, i.gpu});
  CHECK(placed == std::vector<std::pair<int, int>>{{0, 0}, {0, 0}, {3, 0}, {0, 1}, {1, 1}, {2, 1}});
  CHECK(again.transfers.empty());
  // Step 16, planned from step 15 (expert 3 hot again): the placement of step 12 again. Expert 3 is
  // still on GPU 0 (one copy there at step 14), experts 0 and 1 on GPU 1: only expert 2 moves, to GPU 0.
  b.plan(at(hot3, 15, 0), ctx);
  const Plan back = b.plan(at(hot0, 16, 0), ctx);
  moved.clear();
  for (const Transfer& t : back.transfers) moved.insert({back.instances[t.instance].expert, t.dst_gpu});
  CHECK(back.transfers.size() == 1);
  CHECK(moved == std::set<std::pair<int, int>>{{2, 0}});
}

TEST_CASE("deepseek_eplb: a window longer than the period is warm-up until it fills") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const BalancerContext ctx = context_for(model, hw);
  DeepseekEplbParams p;
  p.period = 1;
  p.window = 3;
  DeepseekEplb b(p);
  CHECK(b.warmup_periods() == 3);
  CHECK(b.warmup_records() == 3);  // one record per step seen so far (none yet)
  TraceRecord r = record_of({{5, 1, 1, 1}, {1, 1, 1, 1}});
  // Step 0 static; steps 1 and 2 re-plan from 1 and 2 steps of history; step 3 from the full 3.
  const std::vector<bool> steady = {false, false, false, true, true};
  for (std::uint32_t step = 0; step < 5; ++step) {
    r.step = step;
    b.plan(r, ctx);
    CHECK(b.last_plan_steady() == steady[step]);
  }
  // Deployment defaults (vLLM): the first re-balance is at step 3000; a short trace is all warm-up.
  DeepseekEplb deployed{DeepseekEplbParams{}};
  CHECK(deployed.warmup_periods() == 3000);
  for (std::uint32_t step = 0; step < 5; ++step) {
    r.step = step;
    const Plan plan = deployed.plan(r, ctx);
    CHECK(plan.instances.size() == 4);
    CHECK_FALSE(deployed.last_plan_steady());
  }
}

TEST_CASE("deepseek_eplb: parameters through ConfigMap") {
  YAML::Node node = YAML::Load(
      "{redundant_experts_per_gpu: 2, num_groups: 4, policy: global, window: 3, period: 5, planner_time_us: 1.5}");
  ConfigMap params(node, "test.yaml", "balancer.params");
  auto b = make_deepseek_eplb(params);
  CHECK_NOTHROW(params.finish());
  CHECK(b != nullptr);
  YAML::Node bad = YAML::Load("{policy: random}");
  ConfigMap bad_params(bad, "test.yaml", "balancer.params");
  CHECK_THROWS(make_deepseek_eplb(bad_params));
  ConfigMap steps(YAML::Load("{rebalance_every_steps: 10, window_steps: 4}"), "test.yaml", "balancer.params");
  auto by_steps = make_deepseek_eplb(steps);
  CHECK_NOTHROW(steps.finish());
  CHECK(dynamic_cast<DeepseekEplb&>(*by_steps).warmup_periods() == 10);
  ConfigMap records(YAML::Load("{window: 12}"), "test.yaml", "balancer.params");
  auto by_records = make_deepseek_eplb(records);
  CHECK(dynamic_cast<DeepseekEplb&>(*by_records).warmup_periods() == 16);  // period 8 x ceil(12 / 8)
  ConfigMap both(YAML::Load("{period: 2, window_steps: 3}"), "test.yaml", "balancer.params");
  CHECK_THROWS_AS(make_deepseek_eplb(both), InputError);
}

TEST_CASE("deepseek_eplb: an EP group inside one node (EP 4 on 8-GPU nodes)") {
  // GPUs 0-3 of one 8-GPU node: one node for EPLB's hierarchical policy, not a configuration error.
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 8);
  BalancerContext ctx = context_for(model, hw);
  ctx.num_gpus = 4;
  DeepseekEplb b = eplb(1, 1, /*redundant=*/0, /*groups=*/2, EplbPolicy::hierarchical);
  const TraceRecord rec = record_of({{80, 70, 60, 50, 40, 30, 20, 10},
                                     {0, 0, 0, 0, 0, 0, 0, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0}});
  b.plan(rec, ctx);
  const Plan plan = b.plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  // Both groups go to the one node; 8 slots, 2 per GPU, packed heaviest first onto the lightest GPU:
  // 80+10, 70+20, 60+30, 50+40.
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{90, 90, 90, 90});
}

TEST_CASE("deepseek_eplb: configurations it cannot serve are CannotServe, not internal errors") {
  const ModelSpec model = test::simple_model(8);
  const TraceRecord rec = record_of({{1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1}});
  SUBCASE("num_groups that does not divide the experts") {
    const HardwareSpec hw = test::simple_hardware(1, 2);
    DeepseekEplb b = eplb(1, 1, 1, /*groups=*/3);
    CHECK_THROWS_WITH_AS(b.plan(rec, context_for(model, hw)), "num_groups 3 must divide the 8 experts", CannotServe);
  }
  SUBCASE("hierarchical on an EP group that fills its last node partly") {
    // EP 6 on 4-GPU nodes: node 0 holds 4 of the group's GPUs, node 1 only 2.
    const ModelSpec model12 = test::simple_model(12);
    const HardwareSpec hw = test::simple_hardware(2, 4);
    BalancerContext ctx = context_for(model12, hw);
    ctx.num_gpus = 6;
    const TraceRecord six = record_of(std::vector<std::vector<std::uint32_t>>(6, std::vector<std::uint32_t>(12, 1)));
    DeepseekEplb b = eplb(1, 1, 1, 1, EplbPolicy::hierarchical);
    CHECK_THROWS_AS(b.plan(six, ctx), CannotServe);
  }
}

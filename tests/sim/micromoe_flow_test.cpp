// MicroMoE's default solver (parametric max-flow in whole tokens), its split by source, the per-step
// synchronisation of replicas and their memory, against numbers worked out by hand; and the flow's
// optimum against GLPK's LP on random counts (it must be the LP's optimum rounded up).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "sim/balancers/hbm_fit.hpp"
#include "sim/balancers/micromoe.hpp"
#include "sim/balancers/micromoe_flow.hpp"
#include "sim/balancers/placement.hpp"
#include "tests/sim/plan_checks.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

/// Per expert, its instances' GPUs as MicroMoe::plan builds them (home, then replicas by GPU).
std::vector<std::vector<int>> instance_gpus(int experts, int n, int redundant, Placement placement) {
  std::vector<std::vector<int>> gpus_of(experts);
  for (int e = 0; e < experts; ++e) gpus_of[e] = {home_gpu(e, experts, n, placement)};
  const auto layout = micromoe_replica_layout(experts, n, redundant, placement);
  for (int g = 0; g < n; ++g)
    for (int e : layout[g]) gpus_of[e].push_back(g);
  return gpus_of;
}

MicroMoeParams no_sync() {
  MicroMoeParams p;
  p.sync = false;
  return p;
}

/// tokens[s][g]: tokens source s sends to GPU g in `plan`.
std::vector<std::vector<std::int64_t>> routed(const Plan& plan) {
  std::vector<std::vector<std::int64_t>> out(plan.num_gpus, std::vector<std::int64_t>(plan.num_gpus, 0));
  for (const TokenRoute& r : plan.routes) out[r.src_rank][plan.instances[r.instance].gpu] += r.tokens;
  return out;
}

}  // namespace

TEST_CASE("micromoe flow: three GPUs, a hand-worked optimum and split") {
  // 3 experts, one per GPU, one replica each (default R = E/N = 1): the ring puts expert 2 on GPU 0,
  // expert 0 on GPU 1, expert 1 on GPU 2. Loads: e0 90 (30 per source), e1 30 (10 per source), e2 0.
  // e0 can only use GPUs 0 and 1, so z >= 90 / 2 = 45; e1 fits on GPU 2: z* = 45 (mean 40).
  CHECK(micromoe_replica_layout(3, 3, 1, Placement::contiguous) == std::vector<std::vector<int>>{{2}, {0}, {1}});
  const ReplicaBalance b = micromoe_balance_over_replicas({90, 30, 0}, {{0, 1}, {1, 2}, {2, 0}}, 3);
  CHECK(b.max_load == 45);
  CHECK(b.per_instance[0] == std::vector<std::int64_t>{45, 45});
  CHECK(b.per_instance[1] == std::vector<std::int64_t>{0, 30});  // GPU 1 is full with e0's 45
  CHECK(b.per_instance[2] == std::vector<std::int64_t>{0, 0});

  const ModelSpec model = test::simple_model(3);
  const HardwareSpec hw = test::simple_hardware(1, 3);
  const BalancerContext ctx = test::context_for(model, hw);
  const TraceRecord rec = test::record_of({{30, 10, 0}, {30, 10, 0}, {30, 10, 0}});
  const Plan plan = MicroMoe(no_sync()).plan(rec, ctx);
  REQUIRE_NOTHROW(validate_plan(plan, 3, 3));
  test::check_counts_preserved(plan, rec, 3);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{45, 45, 30});
  // e0: sources 0 and 1 keep theirs on their own GPU; source 2's 30 fill GPU 0 (15) then GPU 1 (15).
  // e1 (all on GPU 2): source 2 keeps its 10, sources 0 and 1 send theirs.
  const auto to = routed(plan);
  CHECK(to[0] == std::vector<std::int64_t>{30, 0, 10});
  CHECK(to[1] == std::vector<std::int64_t>{0, 30, 10});
  CHECK(to[2] == std::vector<std::int64_t>{15, 15, 10});
  // GLPK's LP agrees on the optimum.
  MicroMoeParams lp = no_sync();
  lp.solver = MicroMoeSolver::lp;
  CHECK(micromoe_schedule(rec, 3, 3, 3, instance_gpus(3, 3, 1, Placement::contiguous), lp).lp_max_load ==
        doctest::Approx(45));
}

TEST_CASE("micromoe flow: whole tokens, the LP's 50.5 rounds up to 51, one token moves") {
  const ModelSpec model = test::simple_model(2);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const BalancerContext ctx = test::context_for(model, hw);
  const TraceRecord rec = test::record_of({{50, 0}, {51, 0}});
  const Plan plan = MicroMoe(no_sync()).plan(rec, ctx);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{51, 50});
  const auto to = routed(plan);
  CHECK(to[0] == std::vector<std::int64_t>{50, 0});
  CHECK(to[1] == std::vector<std::int64_t>{1, 50});
}

TEST_CASE("micromoe split by source fills own GPU, then node, then other nodes") {
  // 4 GPUs in 2 nodes of 2; an expert with instances on GPUs 0 and 3, totals 60 and 40.
  // Sources: 0: 20, 1: 30, 2: 10, 3: 40. Own: s0 -> GPU 0 (20), s3 -> GPU 3 (40, GPU 3 full).
  // Node: s1 -> GPU 0 (30, GPU 0 at 50), s2 -> GPU 3 (full). Rest: s2 -> GPU 0 (10).
  // The rows are 3 wide: the expert's 2 columns start at column 1, and column 0 is left alone.
  std::vector<std::int64_t> totals{60, 40};
  std::vector<std::int64_t> split(12, -1);
  micromoe_split_by_source({20, 30, 10, 40}, {0, 3}, totals, 2, split.data() + 1, 3);
  CHECK(split == std::vector<std::int64_t>{-1, 20, 0, -1, 30, 0, -1, 10, 0, -1, 0, 40});
  CHECK(totals == std::vector<std::int64_t>{0, 0});
  std::vector<std::int64_t> short_totals{4};
  std::int64_t one = 0;
  CHECK_THROWS_AS(micromoe_split_by_source({5}, {0}, short_totals, 2, &one, 1), std::logic_error);
}

TEST_CASE("micromoe split by source matches every source trying every instance, level by level") {
  // The definition written out: for each level, each source in order tries each instance in order.
  const auto plain = [](const std::vector<std::int64_t>& counts, const std::vector<int>& gpus,
                        std::vector<std::int64_t> totals, int per_node) {
    std::vector<std::int64_t> split(counts.size() * gpus.size(), 0);
    std::vector<std::int64_t> left = counts;
    for (int level = 0; level < 3; ++level)
      for (std::size_t s = 0; s < counts.size(); ++s)
        for (std::size_t r = 0; r < gpus.size() && left[s] > 0; ++r) {
          const int g = gpus[r];
          const int src = static_cast<int>(s);
          const bool fits = level == 2 || (level == 1 ? g / per_node == src / per_node : g == src);
          if (!fits || totals[r] == 0) continue;
          const std::int64_t take = std::min(left[s], totals[r]);
          split[s * gpus.size() + r] += take;
          left[s] -= take;
          totals[r] -= take;
        }
    return split;
  };
  std::mt19937 rng(5);
  for (int trial = 0; trial < 400; ++trial) {
    const int per_node = 1 + static_cast<int>(rng() % 8);
    const int sources = 1 + static_cast<int>(rng() % 40);
    const std::size_t k = 1 + rng() % std::min<std::uint32_t>(6, static_cast<std::uint32_t>(sources));
    std::vector<int> all(sources);
    for (int g = 0; g < sources; ++g) all[g] = g;
    std::shuffle(all.begin(), all.end(), rng);
    const std::vector<int> gpus(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(k));
    std::vector<std::int64_t> counts(sources);
    std::int64_t sum = 0;
    for (std::int64_t& c : counts) sum += (c = rng() % 3 == 0 ? 0 : rng() % 50);
    // Random totals that add up to the counts' sum, some of them 0.
    std::vector<std::int64_t> totals(k, 0);
    for (std::int64_t t = 0; t < sum; ++t) ++totals[rng() % (trial % 2 == 0 ? k : (k + 1) / 2)];
    std::vector<std::int64_t> split(counts.size() * k, 0);
    std::vector<std::int64_t> used = totals;
    micromoe_split_by_source(counts, gpus, used, per_node, split.data(), k);
    CHECK(split == plain(counts, gpus, totals, per_node));
  }
}

TEST_CASE("micromoe flow optimum is the LP optimum rounded up, on random counts and layouts") {
  std::mt19937 rng(17);
  std::lognormal_distribution<double> popularity(0.0, 1.3);
  for (int trial = 0; trial < 30; ++trial) {
    const int n = trial % 3 == 0 ? 4 : 8;
    const int experts = 2 * n;
    const int redundant = trial % 4;
    const Placement placement = trial % 2 == 0 ? Placement::contiguous : Placement::interleaved;
    std::vector<std::vector<std::uint32_t>> rows(n, std::vector<std::uint32_t>(experts));
    std::vector<double> weight(experts);
    for (double& w : weight) w = popularity(rng);
    for (auto& row : rows)
      for (int e = 0; e < experts; ++e) row[e] = static_cast<std::uint32_t>(weight[e] * 37 * (1 + trial % 5));
    const TraceRecord rec = test::record_of(rows);
    const auto gpus_of = instance_gpus(experts, n, redundant, placement);
    MicroMoeParams flow = no_sync();
    MicroMoeParams lp = no_sync();
    lp.solver = MicroMoeSolver::lp;
    const MicroMoeSchedule a = micromoe_schedule(rec, n, experts, 4, gpus_of, flow);
    const MicroMoeSchedule b = micromoe_schedule(rec, n, experts, 4, gpus_of, lp);
    CHECK(a.lp_max_load == std::ceil(b.lp_max_load - 1e-6));
    // The flow's plan reaches its optimum exactly and keeps every count.
    const ModelSpec model = test::simple_model(experts);
    const HardwareSpec hw = test::simple_hardware(n / 4, 4);
    MicroMoeParams p = no_sync();
    p.redundant_per_gpu = redundant;
    const Plan plan = MicroMoe(p).plan(rec, test::context_for(model, hw, placement));
    test::check_counts_preserved(plan, rec, experts);
    const auto load = plan.tokens_per_gpu();
    CHECK(static_cast<double>(*std::max_element(load.begin(), load.end())) == a.lp_max_load);
  }
}

TEST_CASE("micromoe synchronises replicas once per step: weights from home, gradients back in their precision") {
  const ModelSpec model = test::simple_model(4);  // 1e6 parameters per expert, 1 byte each
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const BalancerContext ctx = test::context_for(model, hw);
  MicroMoeParams p;
  p.grad_bytes_per_param = 4;
  MicroMoe micromoe(p);
  TraceRecord rec = test::record_of({{30, 20, 5, 0}, {10, 10, 5, 0}});
  // Default R = E/N = 2: every expert has one replica on the other GPU.
  const Plan first = micromoe.plan(rec, ctx);
  CHECK(first.instances.size() == 8u);
  CHECK(first.transfers.size() == 8u);
  for (const Transfer& t : first.transfers) {
    const ExpertInstance& inst = first.instances[t.instance];
    CHECK(inst.kind == InstanceKind::replica);
    CHECK(t.carrier == Carrier::ep_backend);
    if (t.kind == TransferKind::weights) {
      CHECK(t.pass == PassKind::forward);
      CHECK(t.start == TransferStart::before_dispatch);
      CHECK(t.src_gpu == 1 - inst.gpu);
      CHECK(t.dst_gpu == inst.gpu);
      CHECK(t.bytes == 1'000'000);
    } else {
      CHECK(t.pass == PassKind::backward);
      CHECK(t.src_gpu == inst.gpu);
      CHECK(t.dst_gpu == 1 - inst.gpu);
      CHECK(t.bytes == 4'000'000);
    }
  }
  // Later micro-batches of the step move no weights or gradients.
  rec.micro_batch = 3;
  CHECK(micromoe.plan(rec, ctx).transfers.empty());
}

TEST_CASE("micromoe replicas count in HBM: E/N home experts plus R replicas per GPU") {
  const ModelSpec model = test::simple_model(4);
  HardwareSpec hw = test::simple_hardware(1, 2);
  const BalancerContext ctx = test::context_for(model, hw);
  const Plan plan = MicroMoe(no_sync()).plan(test::record_of({{1, 1, 1, 1}, {1, 1, 1, 1}}), ctx);
  const HbmNeed need = largest_hbm_need(plan, model);
  CHECK(need.routed_experts == 4);  // 2 at home + 2 replicas
  CHECK(need.bytes == doctest::Approx(4e6));
  CHECK_FALSE(hbm_overflow(plan, model, hw).has_value());
  hw.gpu.hbm_capacity_GB = 3e-3;  // 3 MB: static EP's 2 MB fit, MicroMoE's 4 MB do not
  CHECK(hbm_overflow(plan, model, hw).has_value());
}

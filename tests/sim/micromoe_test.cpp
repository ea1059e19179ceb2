// MicroMoE: the replica layout, hand-solved LPs with the GLPK solver (`solver: lp`) and the invariants
// of its plans, without the per-step synchronisation (tests/sim/micromoe_flow_test.cpp covers the
// default flow solver, synchronisation and memory). Counts are c[s][e] rows; with contiguous placement
// GPU g is the home of experts g*E/N .. (g+1)*E/N - 1.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <set>
#include <string>

#include "sim/balancers/micromoe.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/core/input_error.hpp"
#include "tests/sim/plan_checks.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

using test::check_counts_preserved;

using test::context_for;
using test::record_of;

MicroMoeParams params_with(int redundant_per_gpu, bool minimize_traffic = true) {
  MicroMoeParams p;
  p.redundant_per_gpu = redundant_per_gpu;
  p.solver = MicroMoeSolver::lp;
  p.minimize_traffic = minimize_traffic;
  p.sync = false;
  return p;
}

/// The LP's optimum for the plan's layout (what micromoe_schedule reports).
double lp_optimum(const TraceRecord& rec, const BalancerContext& ctx, const MicroMoeParams& p) {
  const int n = ctx.num_gpus;
  const int experts = ctx.model->num_experts;
  std::vector<std::vector<int>> gpus_of(experts);
  for (int e = 0; e < experts; ++e) gpus_of[e] = {home_gpu(e, experts, n, ctx.placement)};
  const auto layout = micromoe_replica_layout(experts, n, p.redundant_per_gpu, ctx.placement);
  for (int g = 0; g < n; ++g)
    for (int e : layout[g]) gpus_of[e].push_back(g);
  return micromoe_schedule(rec, n, experts, ctx.gpus_per_node, gpus_of, p).lp_max_load;
}

/// Everything a MicroMoE plan must satisfy: a valid plan, every (source, expert) total preserved,
/// home copies 0..E-1, replicas (no transfers) with at most one copy of an expert per GPU, direct EP
/// routes, one GEMM group per GPU, a host planner before the dispatch.
void check_invariants(const Plan& plan, const TraceRecord& rec, const BalancerContext& ctx) {
  const int n = ctx.num_gpus;
  const int experts = ctx.model->num_experts;
  REQUIRE_NOTHROW(validate_plan(plan, experts, ctx.gpus_per_node));
  for (const TokenRoute& r : plan.routes) {
    const ExpertInstance& inst = plan.instances[r.instance];
    CHECK(r.tokens > 0);
    CHECK(r.via_gpu == -1);
    CHECK(r.stage == 0);
    CHECK(r.carrier == (r.src_rank == inst.gpu ? Carrier::none : Carrier::ep_backend));
  }
  check_counts_preserved(plan, rec, experts);
  std::set<std::pair<int, int>> copies;
  for (std::size_t i = 0; i < plan.instances.size(); ++i) {
    const ExpertInstance& inst = plan.instances[i];
    CHECK(copies.insert({inst.gpu, inst.expert}).second);
    CHECK(inst.kind == (i < static_cast<std::size_t>(experts) ? InstanceKind::static_expert : InstanceKind::replica));
  }
  for (int g = 0; g < n; ++g) CHECK(plan.gemm_order[g].size() == 1u);
  CHECK(plan.transfers.empty());
  CHECK(plan.planner.site == PlannerSite::host_cpu);
  CHECK(plan.planner.start == PlannerStart::before_dispatch);
}

std::int64_t max_of(const std::vector<std::int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

}  // namespace

TEST_CASE("MicroMoE's ring layout takes one expert from each other GPU, nearest first") {
  // 8 experts on 4 GPUs, 2 slots: GPU g holds expert (g mod 2) of GPU g-1, then of GPU g-2.
  const auto layout = micromoe_replica_layout(8, 4, 2, Placement::contiguous);
  CHECK(layout == std::vector<std::vector<int>>{{6, 4}, {1, 7}, {2, 0}, {5, 3}});
  // Every expert gets exactly one replica here.
  std::vector<int> copies(8, 0);
  for (const auto& slots : layout)
    for (int e : slots) ++copies[e];
  CHECK(copies == std::vector<int>(8, 1));
  // More slots than foreign experts: capped at every foreign expert once.
  CHECK(micromoe_replica_layout(4, 2, 100, Placement::contiguous) ==
        std::vector<std::vector<int>>{{2, 3}, {1, 0}});
  CHECK(micromoe_replica_layout(4, 1, 3, Placement::contiguous) == std::vector<std::vector<int>>{{}});
  CHECK(micromoe_replica_layout(8, 4, 0, Placement::contiguous) == std::vector<std::vector<int>>(4));
}

TEST_CASE("MicroMoE's LP reaches the hand-computed optimum") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  // GPU 0: experts 0 (40 tokens), 1 (30); GPU 1: experts 2 (10), 3 (0). With one slot, GPU 0 holds a
  // replica of expert 2 and GPU 1 one of expert 1. Expert 0's 40 cannot move, so z >= 40 = mean:
  // all 30 of expert 1 go to GPU 1 and expert 2 stays at home. z* = 40.
  const TraceRecord rec = record_of({{30, 20, 5, 0}, {10, 10, 5, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const MicroMoeParams p = params_with(1);
  CHECK(lp_optimum(rec, ctx, p) == doctest::Approx(40));
  const Plan plan = MicroMoe(p).plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{40, 40});
  // Without the traffic term the max load is the same.
  const Plan plain = MicroMoe(params_with(1, false)).plan(rec, ctx);
  check_invariants(plain, rec, ctx);
  CHECK(max_of(plain.tokens_per_gpu()) == 40);
}

TEST_CASE("MicroMoE splits an expert hotter than a whole GPU and rounds deterministically") {
  const ModelSpec model = test::simple_model(2);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  // One expert per GPU, each replicated on the other. Expert 0 has 50 + 51 = 101 tokens: z* = 50.5.
  const TraceRecord rec = record_of({{50, 0}, {51, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const MicroMoeParams p = params_with(1);
  CHECK(lp_optimum(rec, ctx, p) == doctest::Approx(50.5));
  const Plan plan = MicroMoe(p).plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  // The traffic LP keeps each rank's tokens local but half a token of rank 1 on GPU 0; rounding
  // gives that tie (0.5 / 0.5) to the lower instance, the home copy on GPU 0.
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{51, 50});
  std::int64_t moved = 0;
  for (const TokenRoute& r : plan.routes)
    if (r.carrier != Carrier::none) moved += r.tokens;
  CHECK(moved == 1);
  // Same input, same plan.
  const Plan again = MicroMoe(p).plan(rec, ctx);
  CHECK(again.tokens_per_gpu() == plan.tokens_per_gpu());
  CHECK(again.routes.size() == plan.routes.size());
}

TEST_CASE("MicroMoE with every load on one node spreads it over the replicas, across nodes") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  // Node 0 (GPUs 0, 1: experts 0..3) has every token.
  const TraceRecord rec = record_of({{30, 30, 5, 5, 0, 0, 0, 0},
                                     {20, 10, 0, 0, 0, 0, 0, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const MicroMoeParams p = params_with(2);
  const Plan plan = MicroMoe(p).plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  // Layout {{6, 4}, {1, 7}, {2, 0}, {5, 3}}: expert 0 (50 tokens) may use GPU 0 or 2, expert 1 (40)
  // GPU 0 or 1, expert 2 (5) GPU 1 or 2, expert 3 (5) GPU 1 or 3. GPU 3 can get only expert 3's 5, so
  // by hand the other 95 tokens spread over GPUs 0..2: z* = 95 / 3, and half of expert 0's tokens or
  // so cross to node 1 (GPU 2).
  const double z = lp_optimum(rec, ctx, p);
  CHECK(z == doctest::Approx(95.0 / 3));
  const auto tokens = plan.tokens_per_gpu();
  CHECK(tokens[3] == 5);
  CHECK(tokens[2] > 0);
  CHECK(static_cast<double>(max_of(tokens)) <= std::ceil(z) + 1);
  CHECK(max_of(plan.tokens_per_gpu()) < max_of(StaticEp().plan(rec, ctx).tokens_per_gpu()));
}

TEST_CASE("MicroMoE handles a micro-batch without tokens") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const TraceRecord rec = record_of(std::vector<std::vector<std::uint32_t>>(4, std::vector<std::uint32_t>(8, 0)));
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = MicroMoe(params_with(2)).plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  CHECK(plan.routes.empty());
  CHECK(plan.instances.size() == 8u + 4u * 2u);
  CHECK(lp_optimum(rec, ctx, params_with(2)) == doctest::Approx(0));
}

TEST_CASE("MicroMoE with more replica slots than experts balances perfectly") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  // Every GPU holds every expert: z* = mean = 60.
  const TraceRecord rec = record_of({{70, 10, 0, 0}, {20, 0, 10, 10}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = MicroMoe(params_with(100)).plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  CHECK(plan.instances.size() == 8u);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{60, 60});
  // The traffic LP: rank 1 keeps its 40 tokens (experts 2, 3 are at home, expert 0 on its replica of
  // GPU 1); only 20 of rank 0's tokens leave (to GPU 1), the fewest that can.
  std::int64_t moved = 0;
  for (const TokenRoute& r : plan.routes)
    if (r.carrier != Carrier::none) moved += r.tokens;
  CHECK(moved == 20);
}

TEST_CASE("MicroMoE plans are valid and preserve every count on skewed counts, both placements") {
  const ModelSpec model = test::simple_model(32);
  const HardwareSpec hw = test::simple_hardware(2, 4);
  std::mt19937 rng(11);
  std::lognormal_distribution<double> popularity(0.0, 1.2);
  for (Placement placement : {Placement::contiguous, Placement::interleaved}) {
    for (int trial = 0; trial < 10; ++trial) {
      std::vector<double> weight(32);
      for (double& w : weight) w = popularity(rng);
      std::vector<std::vector<std::uint32_t>> rows(8, std::vector<std::uint32_t>(32));
      for (auto& row : rows)
        for (int e = 0; e < 32; ++e) row[e] = static_cast<std::uint32_t>(weight[e] * 300 * (trial % 3 + 1) / 10);
      const TraceRecord rec = record_of(rows);
      const BalancerContext ctx = context_for(model, hw, placement);
      const MicroMoeParams p = params_with(trial % 4);
      const Plan plan = MicroMoe(p).plan(rec, ctx);
      check_invariants(plan, rec, ctx);
      CHECK(plan.instances.size() == 32u + 8u * static_cast<unsigned>(trial % 4));
      const std::int64_t max_load = max_of(plan.tokens_per_gpu());
      CHECK(max_load <= max_of(StaticEp().plan(rec, ctx).tokens_per_gpu()));
      // Rounding adds less than one token per (source, expert) pair split on the GPU.
      const double z = lp_optimum(rec, ctx, p);
      CHECK(static_cast<double>(max_load) <= std::ceil(z - 1e-9) + 8);
      CHECK(static_cast<double>(max_load) >= z - 1e-6);
    }
  }
}

TEST_CASE("MicroMoE reads its parameters strictly") {
  auto params_of = [](const std::string& text) { return ConfigMap(YAML::Load(text), "t.yaml", "balancer.params"); };
  ConfigMap defaults = params_of("{}");
  CHECK(make_micromoe(defaults) != nullptr);
  CHECK_NOTHROW(defaults.finish());
  ConfigMap set = params_of(
      "{redundant_per_gpu: 1, solver: lp, minimize_traffic: false, internode_traffic_weight: 2, planner_time_us: 12.5, "
      "sync: false, gradient_dtype: fp32}");
  auto balancer = make_micromoe(set);
  CHECK_NOTHROW(set.finish());
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const TraceRecord rec = record_of({{30, 20, 5, 0}, {10, 10, 5, 0}});
  const Plan plan = balancer->plan(rec, context_for(model, hw));
  CHECK(plan.planner.duration_ps == 12'500'000);
  CHECK(plan.instances.size() == 6u);
  ConfigMap negative = params_of("{redundant_per_gpu: -1}");
  CHECK_THROWS_AS(make_micromoe(negative), InputError);
  ConfigMap bad_dtype = params_of("{gradient_dtype: fp64}");
  CHECK_THROWS_AS(make_micromoe(bad_dtype), InputError);
  ConfigMap bad_solver = params_of("{solver: simplex}");
  CHECK_THROWS_AS(make_micromoe(bad_solver), InputError);
  ConfigMap unknown = params_of("{redundant_per_gpus: 1}");
  make_micromoe(unknown);
  CHECK_THROWS_AS(unknown.finish(), InputError);
}

TEST_CASE("MicroMoE's traffic LP keeps moved tokens inside their node where the load allows") {
  // Two nodes of two GPUs, one expert a GPU; with one slot, GPU 2 (node 1) holds a replica of expert 1
  // (home GPU 1, node 0). Ranks 0 (node 0) and 3 (node 1) send 4 tokens each to expert 1: the load LP
  // puts 4 on each of its GPUs (z* = 4), and the traffic LP, at 1 a token within a node and 4 across
  // nodes, keeps each rank's tokens in its own node: rank 0's on GPU 1, rank 3's on GPU 2 (8 in all,
  // where sending both ranks' tokens across would cost 32).
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const TraceRecord rec = record_of({{0, 4, 0, 0}, {0, 0, 0, 0}, {0, 0, 0, 0}, {0, 4, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const MicroMoeParams p = params_with(1);
  CHECK(lp_optimum(rec, ctx, p) == doctest::Approx(4));
  const Plan plan = MicroMoe(p).plan(rec, ctx);
  check_invariants(plan, rec, ctx);
  REQUIRE(plan.routes.size() == 2);
  for (const TokenRoute& r : plan.routes) {
    CAPTURE(r.src_rank);
    CHECK(r.tokens == 4);
    CHECK(plan.instances[r.instance].expert == 1);
    CHECK(plan.instances[r.instance].gpu == (r.src_rank == 0 ? 1 : 2));
  }
}

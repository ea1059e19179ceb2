// FasterMoE: the shadow policy worked by hand, the runtime of a shadow, the group-wise exchange and the
// corner cases. Costs come from tests/sim/simple_cluster.hpp with the NVLink efficiency cut to 0.1 so
// that the network is slow enough for the trade-off to be visible:
//   token: 1000 bytes, 2e6 FLOPs; expert weights: 2 * 1000 * 500 * 1 byte = 1e6 bytes
//   peak 1 TFLOP/s, efficiency 1  -> t_comp  = 2e6 ps = 2 us per token
//   NVLink 100 GB/s * 0.1 = 10 GB/s -> t_feat  = 1000 / 10 GB/s = 0.1 us per token
//                                    t_model = 1e6 / 10 GB/s  = 100 us per expert
// so a = 3 * t_comp + 4 * t_feat = 6.4 us per token, and lat_k = 6.4 * B_(k+1) + 100 * k (us).
#include <doctest/doctest.h>

#include <algorithm>
#include <map>

#include "sim/balancers/fastermoe.hpp"
#include "sim/balancers/group_exchange.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/core/input_error.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

TraceRecord record_of(const std::vector<std::vector<std::uint32_t>>& rows) {
  TraceRecord r;
  for (const auto& row : rows) r.counts.insert(r.counts.end(), row.begin(), row.end());
  return r;
}

TraceRecord uniform_record(int gpus, int experts, std::uint32_t count) {
  return record_of(std::vector<std::vector<std::uint32_t>>(gpus, std::vector<std::uint32_t>(experts, count)));
}

HardwareSpec slow_hardware(int nodes = 1, int gpus_per_node = 8) {
  HardwareSpec hw = test::simple_hardware(nodes, gpus_per_node);
  hw.ep_backend.nvlink_efficiency = 0.1;
  return hw;
}

BalancerContext context_for(const ModelSpec& model, const HardwareSpec& hw, int gpus,
                            Placement placement = Placement::contiguous) {
  BalancerContext c;
  c.num_gpus = gpus;
  c.gpus_per_node = hw.gpus_per_node;
  c.placement = placement;
  c.model = &model;
  c.hardware = &hw;
  return c;
}

Plan plan_with(FasterMoeOptions options, const TraceRecord& rec, const BalancerContext& context) {
  FasterMoe balancer(options);
  Plan plan = balancer.plan(rec, context);
  validate_plan(plan, context.model->num_experts);
  return plan;
}

// One grouped GEMM per exchange step unless a test asks for v1's per-expert launches.
FasterMoeOptions options(ShadowPolicy policy, bool smart = true, int group_size = 4,
                         FasterMoeGemm gemm = FasterMoeGemm::grouped,
                         ShadowCollective collective = ShadowCollective::ring) {
  FasterMoeOptions o;
  o.policy = policy;
  o.smart_schedule = smart;
  o.group_size = group_size;
  o.gemm = gemm;
  o.collective = collective;
  return o;
}

}  // namespace

TEST_CASE("shadow costs come from the hardware and the model") {
  const ModelSpec model = test::simple_model(4);
  HardwareSpec hw = slow_hardware(2, 2);
  const TraceRecord rec = uniform_record(2, 4, 10);
  const ShadowCosts costs = shadow_costs(rec, context_for(model, hw, 2));
  CHECK(costs.comp_ps_per_token == doctest::Approx(2e6));
  CHECK(costs.feat_ps_per_token == doctest::Approx(1e5));
  CHECK(costs.model_ps_per_expert == doctest::Approx(1e8));

  // Four GPUs over two nodes of two: the policy's network is the NIC, 25 GB/s * 0.5.
  hw.ep_backend.ib_efficiency = 0.5;
  CHECK(shadow_net_bw_GBps(context_for(model, hw, 4)) == doctest::Approx(12.5));
  CHECK(shadow_net_bw_GBps(context_for(model, hw, 2)) == doctest::Approx(10.0));

  // t_comp takes the GEMM efficiency at the padded mean expert load: 80 tokens over 4 experts = 20,
  // padded to 128 rows, where the curve says 0.5 -> 2e6 FLOPs / 0.5 FLOP per ps = 4e6 ps.
  hw.gemm.row_alignment = 128;
  hw.gemm.efficiency = {{128, 0.5}, {1024, 1.0}};
  CHECK(shadow_costs(rec, context_for(model, hw, 2)).comp_ps_per_token == doctest::Approx(4e6));
}

TEST_CASE("the paper policy shadows exactly the experts the formula says") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = slow_hardware();
  const BalancerContext ctx = context_for(model, hw, 2);

  // Loads 100, 60, 50, 10 (experts 0..3):
  //   lat_0 = 6.4 * 100       = 640
  //   lat_1 = 6.4 * 60  + 100 = 484 < 640: shadow expert 0
  //   lat_2 = 6.4 * 50  + 200 = 520 > 484: stop
  CHECK(shadowed_experts(ShadowPolicy::paper, record_of({{60, 30, 25, 5}, {40, 30, 25, 5}}), ctx) ==
        std::vector<int>{0});

  // Loads 30, 70, 100, 40 (the heaviest are experts 2 and 1):
  //   lat_0 = 640; lat_1 = 6.4 * 70 + 100 = 548 < 640; lat_2 = 6.4 * 40 + 200 = 456 < 548;
  //   lat_3 = 6.4 * 30 + 300 = 492 > 456: stop with experts 2 and 1.
  CHECK(shadowed_experts(ShadowPolicy::paper, record_of({{15, 35, 50, 20}, {15, 35, 50, 20}}), ctx) ==
        std::vector<int>{1, 2});

  // Two experts, loads 100 and 80: B beyond the list is 0, so shadowing both can win:
  //   lat_0 = 640; lat_1 = 6.4 * 80 + 100 = 612; lat_2 = 0 + 200 = 200: both shadowed.
  const ModelSpec two = test::simple_model(2);
  CHECK(shadowed_experts(ShadowPolicy::paper, record_of({{50, 40}, {50, 40}}), context_for(two, hw, 2)) ==
        std::vector<int>{0, 1});

  // Equal loads: lat_1 = lat_0 + 100 never improves.
  CHECK(shadowed_experts(ShadowPolicy::paper, uniform_record(2, 4, 50), ctx).empty());
  // The border: a drop of 15.625 tokens pays for one expert's weights. Loads 66, 50, 50, 0:
  //   lat_0 = 422.4; lat_1 = 320 + 100 = 420 < 422.4; lat_2 = 320 + 200 = 520: only expert 0.
  // Loads 65, 50, 50, 0: lat_0 = 416 < lat_1 = 420: nothing.
  CHECK(shadowed_experts(ShadowPolicy::paper, record_of({{66, 50, 50, 0}, {0, 0, 0, 0}}), ctx) ==
        std::vector<int>{0});
  CHECK(shadowed_experts(ShadowPolicy::paper, record_of({{65, 50, 50, 0}, {0, 0, 0, 0}}), ctx).empty());
  CHECK(shadowed_experts(ShadowPolicy::none, record_of({{60, 30, 25, 5}, {40, 30, 25, 5}}), ctx).empty());
}

TEST_CASE("the code policy reproduces v1: per-sender totals taken as expert ids") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = slow_hardware();
  const BalancerContext ctx = context_for(model, hw, 2);

  // A very hot expert 0, but both ranks send 100 tokens: the sender totals are equal, nothing shadowed.
  const TraceRecord equal = record_of({{97, 1, 1, 1}, {97, 1, 1, 1}});
  CHECK(shadowed_experts(ShadowPolicy::code, equal, ctx).empty());
  CHECK(shadowed_experts(ShadowPolicy::paper, equal, ctx) == std::vector<int>{0});

  // Sender 1 is heavier (200 vs 10): totals [10, 200] sorted give index 1 first;
  //   lat_0 = 6.4 * 200 = 1280; lat_1 = 6.4 * 10 + 100 = 164 < 1280: "expert 1" is shadowed,
  // although expert 1 has no tokens at all; v1 never tries the last entry, so it stops there.
  const TraceRecord skewed = record_of({{5, 0, 5, 0}, {200, 0, 0, 0}});
  CHECK(shadowed_experts(ShadowPolicy::code, skewed, ctx) == std::vector<int>{1});
  // The paper reading shadows the hot expert: loads 205, 0, 5, 0:
  //   lat_0 = 1312; lat_1 = 6.4 * 5 + 100 = 132; lat_2 = 0 + 200 = 200 > 132: stop.
  CHECK(shadowed_experts(ShadowPolicy::paper, skewed, ctx) == std::vector<int>{0});

  // The balancer honours the quirk: expert 1's (zero) tokens are "computed locally", expert 0 still
  // crosses the EP backend.
  const Plan plan = plan_with(options(ShadowPolicy::code), skewed, ctx);
  CHECK(plan.transfers.size() == 2);
  CHECK(plan.instances[plan.transfers[0].instance].expert == 1);
}

TEST_CASE("greedy_shadow: heaviest first, the cap, and why ties never matter") {
  const ShadowCosts costs{1.0, 0.0, 1.0};  // a = 3 per token, t_model = 1
  // Loads 1, 9, 2: lat_0 = 27; lat_1 = 6 + 1 = 7 (index 1); lat_2 = 3 + 2 = 5 (index 2);
  // lat_3 = 0 + 3 = 3 (index 0): all three, heaviest first; a cap of 2 stops after two.
  CHECK(greedy_shadow({1, 9, 2}, costs, 3) == std::vector<int>{1, 2, 0});
  CHECK(greedy_shadow({1, 9, 2}, costs, 2) == std::vector<int>{1, 2});
  // lat_k - lat_(k-1) = a * (B_(k+1) - B_(k)) + t_model >= 0 when B_(k+1) = B_(k): a tie stops the
  // loop before either tied entry is shadowed, so the tie order (v1's torch sort is not stable)
  // cannot change the result, even with free weights.
  CHECK(greedy_shadow({10, 10, 0}, costs, 3).empty());
  CHECK(greedy_shadow({20, 9, 9, 0}, costs, 4) == std::vector<int>{0});
  CHECK(greedy_shadow({0, 9, 9}, ShadowCosts{1.0, 0.0, 0.0}, 3).empty());
  CHECK(greedy_shadow({}, costs, 0).empty());
}

TEST_CASE("group-wise exchange stages are (group(d) - group(s)) mod n_g") {
  const GroupExchange two(8, 4);
  CHECK(two.num_groups() == 2);
  CHECK(two.stage(0, 3) == 0);
  CHECK(two.stage(0, 4) == 1);
  CHECK(two.stage(7, 2) == 1);
  const GroupExchange four(8, 2);
  CHECK(four.num_groups() == 4);
  CHECK(four.stage(0, 7) == 3);
  CHECK(four.stage(7, 0) == 1);
  CHECK(four.stage(3, 5) == 1);
  CHECK(four.stage(5, 3) == 3);
  const GroupExchange capped(2, 8);
  CHECK(capped.group_size() == 2);
  CHECK(capped.num_groups() == 1);
  const GroupExchange ragged(6, 4);  // groups {0..3}, {4, 5}
  CHECK(ragged.num_groups() == 2);
  CHECK(ragged.stage(5, 0) == 1);
}

TEST_CASE("smart scheduling: each stage's tokens have their own instance and GEMM group") {
  const ModelSpec model = test::simple_model(16);
  const HardwareSpec hw = slow_hardware();
  const TraceRecord rec = uniform_record(8, 16, 3);  // equal loads: nothing shadowed
  for (int group_size : {4, 2}) {
    CAPTURE(group_size);
    const BalancerContext ctx = context_for(model, hw, 8);
    const Plan plan = plan_with(options(ShadowPolicy::paper, true, group_size), rec, ctx);
    const GroupExchange exchange(8, group_size);
    const int stages = 8 / group_size;
    CHECK(plan.exchange_stages == stages);
    CHECK(plan.transfers.empty());
    CHECK(plan.planner.site == PlannerSite::gpu);
    CHECK(plan.planner.duration_ps == us_to_ps(20));
    // Every route's stage follows the group rule; one instance holds tokens of one stage only.
    std::map<int, int> stage_of_instance;
    for (const TokenRoute& r : plan.routes) {
      const int dst = plan.instances[r.instance].gpu;
      CHECK(r.stage == exchange.stage(r.src_rank, dst));
      CHECK(r.stage == ((dst / group_size - r.src_rank / group_size) % stages + stages) % stages);
      CHECK((r.carrier == Carrier::none) == (r.src_rank == dst));
      CHECK(r.via_gpu == -1);
      auto [it, fresh] = stage_of_instance.emplace(r.instance, r.stage);
      CHECK(it->second == r.stage);
    }
    // 16 experts x `stages` stages, each with tokens; all static, on the expert's home GPU.
    CHECK(plan.instances.size() == static_cast<std::size_t>(16 * stages));
    for (const ExpertInstance& inst : plan.instances) {
      CHECK(inst.kind == InstanceKind::static_expert);
      CHECK(inst.gpu == home_gpu(inst.expert, 16, 8, Placement::contiguous));
    }
    // Per GPU: C_0 .. C_{n_g-1}, each with the GPU's two experts, each group one stage.
    for (int g = 0; g < 8; ++g) {
      REQUIRE(plan.gemm_order[g].size() == static_cast<std::size_t>(stages));
      for (int j = 0; j < stages; ++j) {
        CHECK(plan.gemm_order[g][j].instances.size() == 2);
        for (int i : plan.gemm_order[g][j].instances) CHECK(stage_of_instance.at(i) == j);
      }
    }
    CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>(8, 8 * 2 * 3));
  }
}

TEST_CASE("empty stages make no instance and no group") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = slow_hardware();
  // Only rank 0 sends, 1 token to each expert: GPUs 0..3 get stage-0 tokens, GPUs 4..7 stage 1.
  std::vector<std::vector<std::uint32_t>> rows(8, std::vector<std::uint32_t>(8, 0));
  rows[0].assign(8, 1);
  const Plan plan = plan_with(options(ShadowPolicy::none), record_of(rows), context_for(model, hw, 8));
  CHECK(plan.exchange_stages == 2);
  CHECK(plan.planner.site == PlannerSite::none);
  // Experts 4..7 have an (empty) stage-0 home instance and a stage-1 instance.
  CHECK(plan.instances.size() == 8 + 4);
  for (int g = 0; g < 4; ++g) CHECK(plan.gemm_order[g].size() == 1);
  for (int g = 4; g < 8; ++g) {
    REQUIRE(plan.gemm_order[g].size() == 2);
    CHECK(plan.gemm_order[g][0].instances == std::vector<int>{g});
    CHECK(plan.gemm_order[g][1].instances == std::vector<int>{g + 4});
  }
}

TEST_CASE("a shadowed expert with a star collective: weights out, local compute, gradients back") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = slow_hardware();
  // Expert 0 (home GPU 0, with expert 1) is hot: loads 100, then 12 for each other expert ->
  // lat_0 = 640, lat_1 = 6.4 * 12 + 100 = 176.8, lat_2 = 6.4 * 12 + 200 = 276.8: only expert 0.
  const TraceRecord rec = record_of({{40, 3, 3, 3, 3, 3, 3, 3},
                                     {20, 3, 3, 3, 3, 3, 3, 3},
                                     {30, 3, 3, 3, 3, 3, 3, 3},
                                     {10, 3, 3, 3, 3, 3, 3, 3}});
  const BalancerContext ctx = context_for(model, hw, 4);
  REQUIRE(shadowed_experts(ShadowPolicy::paper, rec, ctx) == std::vector<int>{0});
  const Plan plan =
      plan_with(options(ShadowPolicy::paper, true, 2, FasterMoeGemm::grouped, ShadowCollective::star), rec, ctx);
  CHECK(plan.exchange_stages == 2);

  // Every token of expert 0 stays on its source GPU, outside the exchange (stage -1).
  for (const TokenRoute& r : plan.routes) {
    if (plan.instances[r.instance].expert != 0) continue;
    CHECK(r.carrier == Carrier::none);
    CHECK(plan.instances[r.instance].gpu == r.src_rank);
    CHECK(r.stage == -1);
    CHECK(plan.instances[r.instance].kind ==
          (r.src_rank == 0 ? InstanceKind::static_expert : InstanceKind::dynamic_expert));
  }
  // N - 1 = 3 weight broadcasts and 3 gradient reductions of 1e6 bytes, on the EP backend.
  int weights = 0, gradients = 0;
  for (const Transfer& t : plan.transfers) {
    const ExpertInstance& inst = plan.instances[t.instance];
    CHECK(inst.expert == 0);
    CHECK(inst.kind == InstanceKind::dynamic_expert);
    CHECK(t.bytes == 1'000'000);
    CHECK(t.carrier == Carrier::ep_backend);
    if (t.kind == TransferKind::weights) {
      ++weights;
      CHECK(t.pass == PassKind::forward);
      CHECK(t.src_gpu == 0);
      CHECK(t.dst_gpu == inst.gpu);
    } else {
      ++gradients;
      CHECK(t.pass == PassKind::backward);
      // v1 reduces each shadow's gradients right after its backward, on a stream of its own.
      CHECK(t.start == TransferStart::after_wgrad);
      CHECK(t.src_gpu == inst.gpu);
      CHECK(t.dst_gpu == 0);
    }
  }
  CHECK(weights == 3);
  CHECK(gradients == 3);
  // Post-shadow load: L_w = sum of non-shadowed home loads + own tokens for shadowed experts.
  // GPU 0 homes experts 0 and 1 (12 tokens) and keeps its own 40 of expert 0; the others home two
  // experts of 12.
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{12 + 40, 24 + 20, 24 + 30, 24 + 10});
  // The shadow group runs last on every GPU in the forward and first in the backward, as v1 runs them;
  // the exchanged experts' groups keep the default backward.
  for (int g = 0; g < 4; ++g) {
    REQUIRE(plan.gemm_order[g].size() == 3);
    const GemmGroup& last = plan.gemm_order[g].back();
    REQUIRE(last.instances.size() == 1);
    CHECK(plan.instances[last.instances[0]].expert == 0);
    CHECK(plan.instances[last.instances[0]].gpu == g);
    CHECK(last.backward_first);
    CHECK_FALSE(plan.gemm_order[g][0].backward_first);
    CHECK_FALSE(plan.gemm_order[g][1].backward_first);
  }
  // GPU 0: C_0 {expert 1 from ranks 0, 1}, C_1 {expert 1 from ranks 2, 3}, then its own tokens of
  // expert 0 on the home instance.
  CHECK(plan.gemm_order[0][0].instances == std::vector<int>{1});
  REQUIRE(plan.gemm_order[0][1].instances.size() == 1);
  CHECK(plan.instances[plan.gemm_order[0][1].instances[0]].expert == 1);
  CHECK(plan.gemm_order[0][2].instances == std::vector<int>{0});
  const auto per_instance = plan.tokens_per_instance();
  CHECK(per_instance[1] == 6);
  CHECK(per_instance[plan.gemm_order[0][1].instances[0]] == 6);
}

TEST_CASE("without smart scheduling and shadows the plan is static EP's") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = slow_hardware();
  const TraceRecord rec = record_of({{5, 0, 3, 1, 2, 2, 0, 7},
                                     {2, 7, 0, 4, 1, 1, 1, 1},
                                     {0, 1, 2, 3, 4, 5, 6, 7},
                                     {3, 3, 3, 3, 0, 0, 0, 1}});
  for (Placement placement : {Placement::contiguous, Placement::interleaved}) {
    for (ShadowPolicy policy : {ShadowPolicy::none, ShadowPolicy::code}) {
      const BalancerContext ctx = context_for(model, hw, 4, placement);
      REQUIRE(shadowed_experts(policy, rec, ctx).empty());
      const Plan plan = plan_with(options(policy, false), rec, ctx);
      StaticEp static_ep;
      const Plan base = static_ep.plan(rec, ctx);
      CHECK(plan.exchange_stages == 1);
      REQUIRE(plan.instances.size() == base.instances.size());
      for (std::size_t i = 0; i < base.instances.size(); ++i) {
        CHECK(plan.instances[i].expert == base.instances[i].expert);
        CHECK(plan.instances[i].gpu == base.instances[i].gpu);
        CHECK(plan.instances[i].kind == base.instances[i].kind);
      }
      REQUIRE(plan.routes.size() == base.routes.size());
      for (std::size_t i = 0; i < base.routes.size(); ++i) {
        CHECK(plan.routes[i].src_rank == base.routes[i].src_rank);
        CHECK(plan.routes[i].instance == base.routes[i].instance);
        CHECK(plan.routes[i].tokens == base.routes[i].tokens);
        CHECK(plan.routes[i].carrier == base.routes[i].carrier);
        CHECK(plan.routes[i].stage == 0);
      }
      CHECK(plan.transfers.empty());
      for (int g = 0; g < 4; ++g) {
        REQUIRE(plan.gemm_order[g].size() == 1);
        CHECK(plan.gemm_order[g][0].instances == base.gemm_order[g][0].instances);
      }
    }
  }
}

TEST_CASE("corner cases: no tokens, one GPU, group larger than the EP degree") {
  const HardwareSpec hw = slow_hardware();
  SUBCASE("zero-token micro-batch") {
    const ModelSpec model = test::simple_model(8);
    const TraceRecord rec = uniform_record(4, 8, 0);
    for (ShadowPolicy policy : {ShadowPolicy::paper, ShadowPolicy::code, ShadowPolicy::none}) {
      const BalancerContext ctx = context_for(model, hw, 4);
      CHECK(shadowed_experts(policy, rec, ctx).empty());
      const Plan plan = plan_with(options(policy, true, 2), rec, ctx);
      CHECK(plan.routes.empty());
      CHECK(plan.transfers.empty());
      CHECK(plan.instances.size() == 8);  // the home copies only
      CHECK(plan.exchange_stages == 2);
    }
  }
  SUBCASE("one GPU") {
    const ModelSpec model = test::simple_model(2);
    const TraceRecord rec = record_of({{500, 1}});
    const BalancerContext ctx = context_for(model, hw, 1);
    CHECK(shadowed_experts(ShadowPolicy::paper, rec, ctx).empty());
    const Plan plan = plan_with(options(ShadowPolicy::paper), rec, ctx);
    CHECK(plan.exchange_stages == 1);
    CHECK(plan.transfers.empty());
    for (const TokenRoute& r : plan.routes) CHECK(r.carrier == Carrier::none);
    CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{501});
  }
  SUBCASE("group_size larger than N") {
    const ModelSpec model = test::simple_model(4);
    const TraceRecord rec = record_of({{1, 2, 3, 4}, {4, 3, 2, 1}});
    const Plan plan = plan_with(options(ShadowPolicy::none, true, 8), rec, context_for(model, hw, 2));
    CHECK(plan.exchange_stages == 1);
    for (const TokenRoute& r : plan.routes) CHECK(r.stage == 0);
    CHECK(plan.gemm_order[0].size() == 1);
  }
}

TEST_CASE("make_fastermoe reads its parameters") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = slow_hardware();
  const TraceRecord rec = record_of({{60, 30, 25, 5}, {40, 30, 25, 5}});
  const BalancerContext ctx = context_for(model, hw, 2);
  {
    ConfigMap params(YAML::Load("{policy: paper, smart_schedule: false, group_size: 1, planner_time_us: 7.5}"),
                     "t.yaml", "balancer.params");
    auto balancer = make_fastermoe(params);
    params.finish();
    const Plan plan = balancer->plan(rec, ctx);
    validate_plan(plan, 4);
    CHECK(plan.balancer == "fastermoe");
    CHECK(plan.exchange_stages == 1);
    CHECK(plan.planner.duration_ps == us_to_ps(7.5));
    CHECK(plan.transfers.size() == 2);  // expert 0 shadowed on the other GPU, weights and gradients
  }
  {
    ConfigMap params(YAML::Node(), "t.yaml", "balancer.params");
    auto balancer = make_fastermoe(params);
    params.finish();
    const Plan plan = balancer->plan(rec, ctx);
    CHECK(plan.exchange_stages == 1);  // group_size 4 capped at 2 GPUs
    CHECK(plan.planner.duration_ps == us_to_ps(20));
  }
  {
    ConfigMap params(YAML::Load("{policy: greedy}"), "t.yaml", "balancer.params");
    CHECK_THROWS_AS(make_fastermoe(params), InputError);
  }
  {
    ConfigMap params(YAML::Load("{group_size: 0}"), "t.yaml", "balancer.params");
    CHECK_THROWS_AS(make_fastermoe(params), InputError);
  }
  {
    ConfigMap params(YAML::Load("{groupsize: 2}"), "t.yaml", "balancer.params");
    make_fastermoe(params);
    CHECK_THROWS_AS(params.finish(), InputError);
  }
}

TEST_CASE("the prototype policy shadows whole workers, with the artifact's loop") {
  // Costs: t_comp 1, t_feat 0, t_model 1, one expert per worker -> a shadowed worker costs 2 (its
  // weights broadcast and its gradients reduced).
  const ShadowCosts costs{1.0, 0.0, 1.0};
  // Worker 0 computes 200 tokens, 100 from each sender; worker 1 computes 10, 5 from each.
  //   lat_base = 3 * 200 = 600
  //   i = 0, worker 0: loads [0 + 100, 10 + 100] = [100, 110] -> lat = 3 * 110 + 2 = 332
  //   i = 1, worker 1: loads [100 + 5, 0 + 5]   = [105, 5]   -> lat = 3 * 105 + 4 = 319 < 332
  // The loop ends without a stop at i = 1, and the artifact shadows indices[:i]: worker 0 only,
  // although its own lowest latency shadowed both.
  CHECK(prototype_shadow_workers({200, 10}, {{100, 100}, {5, 5}}, costs, 1) == std::vector<int>{0});
  // Worker 1's 10 tokens all from sender 0: i = 1 gives [110, 0] -> 330 + 4 = 334 > 332: a stop at
  // i = 1, and again worker 0 alone.
  CHECK(prototype_shadow_workers({200, 10}, {{100, 100}, {10, 0}}, costs, 1) == std::vector<int>{0});
  // A worker fed only by itself gains nothing: [200, 10], returned [[200, 0], [0, 10]]:
  //   i = 0: [200, 10] -> 600 + 2 = 602 > lat_base 600 -> nothing.
  CHECK(prototype_shadow_workers({200, 10}, {{200, 0}, {0, 10}}, costs, 1).empty());
  // Two experts per worker double the price of a shadow: 332 -> 330 + 4 = 334, 319 -> 315 + 8 = 323.
  // The loop ends at i = 1 again with worker 0.
  CHECK(prototype_shadow_workers({200, 10}, {{100, 100}, {5, 5}}, costs, 2) == std::vector<int>{0});
  CHECK(prototype_shadow_workers({}, {}, costs, 1).empty());
  // A latency equal to the best so far goes on, as the artifact's loop does (it stops only on a worse
  // one). t_model 3: a shadow costs 6. Workers [3, 18, 117], lat_base = 351:
  //   i = 0, worker 2: [3 + 50, 18 + 41, 0 + 26] = [53, 59, 26]  -> 3 * 59 + 6 = 183
  //   i = 1, worker 1: [53 + 4, 0 + 3, 26 + 11]  = [57, 3, 37]   -> 3 * 57 + 12 = 183, equal: on
  //   i = 2, worker 0: [0 + 0, 3 + 3, 37 + 0]    = [0, 6, 37]    -> 3 * 37 + 18 = 129
  // The loop ends at i = 2 and shadows indices[:2]: workers 2 and 1 (stopping at the tie, 2 alone).
  const ShadowCosts dear_model{1.0, 0.0, 3.0};
  CHECK(prototype_shadow_workers({3, 18, 117}, {{0, 3, 0}, {4, 3, 11}, {50, 41, 26}}, dear_model, 1) ==
        std::vector<int>{1, 2});
}

TEST_CASE("the prototype policy on a record: every expert of the shadowed GPU") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = slow_hardware();
  const BalancerContext ctx = context_for(model, hw, 2);
  // t_comp 2 us, t_feat 0.1 us, t_model 100 us; two experts per GPU -> a worker's shadow costs 400 us.
  // Both senders send 100 tokens to experts 0 and 1 (GPU 0) and 10 to experts 2 and 3 (GPU 1):
  //   loads [400, 40]; lat_base = 6.4 * 400 = 2560
  //   i = 0, GPU 0: [0 + 200, 40 + 200] -> 6 * 240 + 400 = 1840
  //   i = 1, GPU 1: [200 + 20, 0 + 20]  -> 6 * 220 + 800 = 2120 > 1840: stop; 2560 > 1840.
  const TraceRecord rec = record_of({{100, 100, 10, 10}, {100, 100, 10, 10}});
  CHECK(shadowed_experts(ShadowPolicy::prototype, rec, ctx) == std::vector<int>{0, 1});
  // The expert-level policy sees loads 200, 200, 20, 20: a tie at the top, so nothing.
  CHECK(shadowed_experts(ShadowPolicy::paper, rec, ctx).empty());
  // Interleaved placement homes experts 0 and 2 on GPU 0: loads [220, 220] tie, GPU 0 first:
  //   lat_base = 6.4 * 220 = 1408; i = 0: [110, 220 + 110] -> 6 * 330 + 400 = 2380 > 1408 ...
  //   i = 1: [110 + 110, 0 + 110] = [220, 110] -> 1320 + 800 = 2120 < 2380; end: 1408 > 2120 fails.
  CHECK(shadowed_experts(ShadowPolicy::prototype, rec, context_for(model, hw, 2, Placement::interleaved)).empty());
}

TEST_CASE("per-expert launches: one GEMM group per instance, in v1's order") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = slow_hardware();
  // The record of the shadowed-expert test: expert 0 shadowed, two stages of two GPUs.
  const TraceRecord rec = record_of({{40, 3, 3, 3, 3, 3, 3, 3},
                                     {20, 3, 3, 3, 3, 3, 3, 3},
                                     {30, 3, 3, 3, 3, 3, 3, 3},
                                     {10, 3, 3, 3, 3, 3, 3, 3}});
  const BalancerContext ctx = context_for(model, hw, 4);
  const Plan grouped = plan_with(options(ShadowPolicy::paper, true, 2, FasterMoeGemm::grouped), rec, ctx);
  const Plan per_expert = plan_with(options(ShadowPolicy::paper, true, 2, FasterMoeGemm::per_expert), rec, ctx);
  // Same instances, routes and transfers; only the launches differ.
  CHECK(per_expert.instances.size() == grouped.instances.size());
  CHECK(per_expert.routes.size() == grouped.routes.size());
  CHECK(per_expert.transfers.size() == grouped.transfers.size());
  for (int g = 0; g < 4; ++g) {
    // Flattening the grouped plan's groups gives the per-expert plan's groups, one instance each.
    std::vector<int> flat;
    for (const GemmGroup& group : grouped.gemm_order[g]) flat.insert(flat.end(), group.instances.begin(), group.instances.end());
    REQUIRE(per_expert.gemm_order[g].size() == flat.size());
    for (std::size_t k = 0; k < flat.size(); ++k) CHECK(per_expert.gemm_order[g][k].instances == std::vector<int>{flat[k]});
    // Each shadow launch (expert 0, the only one shadowed) runs its backward first; no other does.
    for (const GemmGroup& group : per_expert.gemm_order[g])
      CHECK(group.backward_first == (per_expert.instances[group.instances[0]].expert == 0));
  }
  // GPU 1 homes experts 2 and 3: C_0 {2, 3} (ranks 0, 1), C_1 {2, 3} (ranks 2, 3), the shadow of 0:
  // five launches instead of three groups.
  CHECK(grouped.gemm_order[1].size() == 3);
  CHECK(per_expert.gemm_order[1].size() == 5);
  CHECK(per_expert.instances[per_expert.gemm_order[1][0].instances[0]].expert == 2);
  CHECK(per_expert.instances[per_expert.gemm_order[1][1].instances[0]].expert == 3);
  CHECK(per_expert.instances[per_expert.gemm_order[1][4].instances[0]].expert == 0);

  // Each launch pays the launch cost: with 5 us per launch and a GEMM of 6 tokens (12 us) per stage
  // and expert, GPU 1's forward GEMMs take 4 x (12 + 5) + shadow (20 tokens: 40 + 5) = 113 us
  // per_expert, against 2 x (24 + 5) + 45 = 103 us grouped.
  HardwareSpec timed = test::simple_hardware(1, 4);
  timed.gemm.launch_us = 5;
  timed.ep_backend.comm_sms = 0;  // no exchange kernel slows a GEMM down
  const std::vector<std::int64_t> local{64, 44, 54, 34};
  const LayerResult a = simulate_layer(timed, model, per_expert, local, false);
  const LayerResult b = simulate_layer(timed, model, grouped, local, false);
  CHECK(a.routed_gemm_fwd_ps[1] == us_to_ps(113));
  CHECK(b.routed_gemm_fwd_ps[1] == us_to_ps(103));
}

TEST_CASE("make_fastermoe reads collective and gemm") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = slow_hardware();
  const TraceRecord rec = record_of({{40, 3, 3, 3, 3, 3, 3, 3},
                                     {20, 3, 3, 3, 3, 3, 3, 3},
                                     {30, 3, 3, 3, 3, 3, 3, 3},
                                     {10, 3, 3, 3, 3, 3, 3, 3}});
  const BalancerContext ctx = context_for(model, hw, 4);
  auto weight_sources = [](const Plan& plan) {
    std::vector<int> sources;
    for (const Transfer& t : plan.transfers)
      if (t.kind == TransferKind::weights) sources.push_back(t.src_gpu);
    return sources;
  };
  {
    // Defaults: a ring from GPU 0 (0 -> 1 -> 2 -> 3) and one group per instance.
    ConfigMap params(YAML::Node(), "t.yaml", "balancer.params");
    auto balancer = make_fastermoe(params);
    params.finish();
    const Plan plan = balancer->plan(rec, ctx);
    validate_plan(plan, 8);
    CHECK(weight_sources(plan) == std::vector<int>{0, 1, 2});
    for (int g = 0; g < 4; ++g)
      for (const GemmGroup& group : plan.gemm_order[g]) CHECK(group.instances.size() == 1);
  }
  {
    // The star: GPU 0 sends to each GPU itself; grouped: one group of 4 GPUs is one stage, so GPU 1
    // runs C_0 and the shadows.
    ConfigMap params(YAML::Load("{collective: star, gemm: grouped}"), "t.yaml", "balancer.params");
    auto balancer = make_fastermoe(params);
    params.finish();
    const Plan plan = balancer->plan(rec, ctx);
    validate_plan(plan, 8);
    CHECK(weight_sources(plan) == std::vector<int>{0, 0, 0});
    CHECK(plan.gemm_order[1].size() == 2);
  }
  {
    // The prototype's loads per GPU: 112, 24, 24, 24; shadowing GPU 0 (experts 0 and 1, 400 us of
    // weights) gives [43, 47, 57, 37] -> 6 * 57 + 400 = 742 us, more than 6.4 * 112 = 716.8: nothing.
    ConfigMap params(YAML::Load("{policy: prototype}"), "t.yaml", "balancer.params");
    auto balancer = make_fastermoe(params);
    params.finish();
    const Plan plan = balancer->plan(rec, ctx);
    CHECK(plan.transfers.empty());
  }
  {
    ConfigMap params(YAML::Load("{collective: mesh}"), "t.yaml", "balancer.params");
    CHECK_THROWS_AS(make_fastermoe(params), InputError);
  }
  {
    ConfigMap params(YAML::Load("{gemm: fused}"), "t.yaml", "balancer.params");
    CHECK_THROWS_AS(make_fastermoe(params), InputError);
  }
}

// FEPLB: hand-worked scheduler cases and the invariants of its plans. Counts are c[s][e] rows; with
// contiguous placement of 8 experts on 4 GPUs, GPU g is the home of experts 2g and 2g+1.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "sim/balancers/feplb.hpp"
#include "sim/balancers/hbm_fit.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "tests/sim/plan_checks.hpp"
#include "tests/sim/simple_cluster.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

namespace {

using test::check_counts_preserved;

using test::context_for;
using test::record_of;

/// FEPLB as the paper describes it (whole dynamic experts, a minimum gain), with `min_gain` 0.01 as
/// by default.
Feplb feplb(int dynamic_per_gpu = 2, int slots_per_gpu = 2, double min_gain = 0.01) {
  FeplbParams p;
  p.scheduler.dynamic_experts_per_gpu = dynamic_per_gpu;
  p.scheduler.dynamic_slots_per_gpu = slots_per_gpu;
  p.scheduler.min_gain = min_gain;
  return Feplb(p);
}

/// The token-splitting scheduler (`granularity: tokens`); with min_gain 0 it moves down to one token.
Feplb feplb_tokens(int dynamic_per_gpu = 2, int slots_per_gpu = 2, double min_gain = 0) {
  FeplbParams p;
  p.scheduler.dynamic_experts_per_gpu = dynamic_per_gpu;
  p.scheduler.dynamic_slots_per_gpu = slots_per_gpu;
  p.scheduler.granularity = FeplbGranularity::tokens;
  p.scheduler.min_gain = min_gain;
  return Feplb(p);
}

/// (receiver GPU -> tokens) of expert e's dynamic instances.
std::map<int, std::int64_t> dynamic_pieces(const Plan& plan, int expert) {
  std::map<int, std::int64_t> pieces;
  const auto tokens = plan.tokens_per_instance();
  for (std::size_t i = 0; i < plan.instances.size(); ++i)
    if (plan.instances[i].expert == expert && plan.instances[i].kind == InstanceKind::dynamic_expert)
      pieces[plan.instances[i].gpu] += tokens[i];
  return pieces;
}

int count_dynamic(const Plan& plan) {
  return static_cast<int>(std::count_if(plan.instances.begin(), plan.instances.end(), [](const ExpertInstance& i) {
    return i.kind == InstanceKind::dynamic_expert;
  }));
}

/// Everything a FEPLB plan must satisfy whatever the counts: a valid plan, every (source, expert)
/// total preserved, home routes as in static EP, two-phase routes via the home GPU inside its node,
/// one weights and one gradients Copy Engine transfer per dynamic instance (weights in their dtype,
/// gradients in FP32), slots respected, and per GPU the GEMM groups static, dynamic at home (after
/// the planner), moved in (after the planner, on arrival), the last two only when not empty.
void check_invariants(const Plan& plan, const TraceRecord& rec, const BalancerContext& ctx, int slots_per_gpu) {
  const int n = ctx.num_gpus;
  const int experts = ctx.model->num_experts;
  REQUIRE_NOTHROW(validate_plan(plan, experts, ctx.gpus_per_node));
  for (const TokenRoute& r : plan.routes) {
    const ExpertInstance& inst = plan.instances[r.instance];
    const int home = home_gpu(inst.expert, experts, n, ctx.placement);
    CHECK(r.tokens > 0);
    if (inst.kind == InstanceKind::static_expert) {
      CHECK(inst.gpu == home);
      CHECK(r.via_gpu == -1);
      CHECK(r.carrier == (r.src_rank == home ? Carrier::none : Carrier::ep_backend));
    } else {
      REQUIRE(inst.kind == InstanceKind::dynamic_expert);
      CHECK(r.via_gpu == home);
      CHECK(r.carrier == Carrier::copy_engine);
      CHECK(inst.gpu != home);
      CHECK(inst.gpu / ctx.gpus_per_node == home / ctx.gpus_per_node);
    }
  }
  check_counts_preserved(plan, rec, experts);
  // Home instances are 0..E-1 in expert order; dynamic instances follow.
  for (int e = 0; e < experts; ++e) CHECK(plan.instances[e].expert == e);
  std::vector<int> slots_used(n, 0);
  for (std::size_t i = experts; i < plan.instances.size(); ++i) ++slots_used[plan.instances[i].gpu];
  for (int g = 0; g < n; ++g) {
    CHECK(slots_used[g] <= slots_per_gpu);
    const std::vector<GemmGroup>& groups = plan.gemm_order[g];
    REQUIRE(!groups.empty());
    std::size_t next = 0;
    // Static: no marks, static instances only; left out when empty unless it is the only group.
    if (!groups[0].on_arrival && !groups[0].after_planner) {
      CHECK((!groups[0].instances.empty() || groups.size() == 1));
      for (int i : groups[0].instances) CHECK(plan.instances[i].kind == InstanceKind::static_expert);
      ++next;
    }
    if (next < groups.size() && !groups[next].on_arrival) {
      CHECK(groups[next].after_planner);
      CHECK_FALSE(groups[next].instances.empty());
      for (int i : groups[next].instances) CHECK(plan.instances[i].kind == InstanceKind::static_expert);
      ++next;
    }
    if (slots_used[g] > 0) {
      REQUIRE(next < groups.size());
      CHECK(groups[next].on_arrival);
      CHECK(groups[next].after_planner);
      CHECK(groups[next].instances.size() == static_cast<std::size_t>(slots_used[g]));
      for (int i : groups[next].instances) CHECK(plan.instances[i].kind == InstanceKind::dynamic_expert);
      ++next;
    }
    CHECK(next == groups.size());
  }
  CHECK(plan.transfers.size() == 2 * static_cast<std::size_t>(count_dynamic(plan)));
  for (const Transfer& t : plan.transfers) {
    const ExpertInstance& inst = plan.instances[t.instance];
    const int home = home_gpu(inst.expert, experts, n, ctx.placement);
    CHECK(t.carrier == Carrier::copy_engine);
    if (t.kind == TransferKind::weights) {
      CHECK(t.pass == PassKind::forward);
      CHECK((t.src_gpu == home && t.dst_gpu == inst.gpu));
      CHECK(t.bytes == ctx.model->expert_weight_bytes());
    } else {
      CHECK(t.pass == PassKind::backward);
      CHECK((t.src_gpu == inst.gpu && t.dst_gpu == home));
      CHECK(t.bytes == feplb_gradient_bytes(*ctx.model, Dtype::fp32));
    }
  }
  CHECK(plan.planner.site == PlannerSite::host_cpu);
  CHECK(plan.planner.start == PlannerStart::after_dispatch);
  CHECK(plan.planner.d2h_bytes == static_cast<std::int64_t>(n) * experts * 4);
}

}  // namespace

TEST_CASE("FEPLB with granularity tokens and min_gain 0 moves exactly a hot expert's excess, split over receivers") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // Expert 0 (home GPU 0) has 20+15+15+10 = 60 tokens. GPU loads 64, 10, 12, 10: 96 tokens, mean 24.
  const TraceRecord rec = record_of({{20, 1, 2, 1, 2, 2, 2, 1},
                                     {15, 1, 2, 1, 2, 1, 1, 1},
                                     {15, 1, 1, 1, 2, 1, 1, 1},
                                     {10, 1, 1, 1, 1, 1, 1, 2}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb_tokens().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // By hand (target 24, GPU 0 gives 40 tokens of its heaviest dynamic expert, expert 0): least loaded
  // first, lower index on ties: GPU 1 (10) takes 14, GPU 3 (10) takes 14, GPU 2 (12) takes 12.
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{24, 24, 24, 24});
  CHECK(dynamic_pieces(plan, 0) == std::map<int, std::int64_t>{{1, 14}, {2, 12}, {3, 14}});
  CHECK(plan.tokens_per_instance()[0] == 20);  // the home copy keeps 60 - 40
  CHECK(count_dynamic(plan) == 3);
  // Moved tokens come off the lowest source ranks first, in receiver order: GPU 1 gets rank 0's
  // first 14; GPU 2 rank 0's last 6 and rank 1's first 6; GPU 3 rank 1's last 9 and rank 2's first 5.
  std::vector<std::vector<std::int64_t>> from(3, std::vector<std::int64_t>(4, 0));
  for (const TokenRoute& r : plan.routes)
    if (r.instance >= 8) from[r.instance - 8][r.src_rank] += r.tokens;
  CHECK(from[0] == std::vector<std::int64_t>{14, 0, 0, 0});
  CHECK(from[1] == std::vector<std::int64_t>{6, 6, 0, 0});
  CHECK(from[2] == std::vector<std::int64_t>{0, 9, 5, 0});
  // Three weights copies forward, 2 x 1000 x 500 parameters of 1 byte each, and three gradient copies
  // backward, the same parameters in FP32: 4 bytes each.
  CHECK(plan.transfers.size() == 6);
  std::int64_t weight_bytes = 0;
  std::int64_t gradient_bytes = 0;
  for (const Transfer& t : plan.transfers) (t.kind == TransferKind::weights ? weight_bytes : gradient_bytes) += t.bytes;
  CHECK(weight_bytes == 3'000'000);
  CHECK(gradient_bytes == 12'000'000);
  CHECK(plan.planner.duration_ps == 3'000'000);  // the measured default, 3 us
  CHECK(plan.planner.d2h_bytes == 4 * 8 * 4);
}

TEST_CASE("FEPLB moves nothing on a balanced micro-batch: static EP's routes, dynamic experts at home after the planner") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // Expert loads 12, 13, 12, 13, 12, 13, 12, 14; GPU loads 25, 25, 25, 26. GPU 3 gives nothing: moving
  // its dynamic expert 7 (14 tokens) to GPU 0 (25) would make GPU 0 the straggler with 39.
  const TraceRecord rec = record_of({{3, 4, 3, 4, 3, 4, 3, 4},
                                     {3, 3, 3, 3, 3, 3, 3, 3},
                                     {3, 3, 3, 3, 3, 3, 3, 3},
                                     {3, 3, 3, 3, 3, 3, 3, 4}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb(1, 2).plan(rec, ctx);
  const Plan base = StaticEp().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
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
    CHECK(plan.routes[i].via_gpu == base.routes[i].via_gpu);
  }
  CHECK(plan.transfers.empty());
  // Each GPU's heavier expert (its dynamic one: 1, 3, 5, 7) waits for the planner; the other is static.
  for (int g = 0; g < 4; ++g) {
    REQUIRE(plan.gemm_order[g].size() == 2);
    CHECK(plan.gemm_order[g][0].instances == std::vector<int>{2 * g});
    CHECK(plan.gemm_order[g][1].instances == std::vector<int>{2 * g + 1});
    CHECK(plan.gemm_order[g][1].after_planner);
    CHECK_FALSE(plan.gemm_order[g][1].on_arrival);
  }
}

TEST_CASE("FEPLB balances each node to its own mean and never moves across nodes") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  // Node 0 (GPUs 0, 1): loads 50 and 10, mean 30. Node 1 (GPUs 2, 3): 16 and 4, mean 10. Global mean 20.
  const TraceRecord rec = record_of({{10, 3, 2, 1, 4, 1, 0, 1},
                                     {10, 3, 1, 1, 4, 1, 0, 0},
                                     {10, 2, 1, 1, 3, 0, 1, 0},
                                     {10, 2, 1, 2, 3, 0, 1, 1}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb_tokens().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // The NVLink-domain floor stays: max 30 against a global mean of 20.
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{30, 30, 10, 10});
  CHECK(dynamic_pieces(plan, 0) == std::map<int, std::int64_t>{{1, 20}});
  CHECK(dynamic_pieces(plan, 4) == std::map<int, std::int64_t>{{3, 6}});
  CHECK(count_dynamic(plan) == 2);

  // Whole experts (loads 40, 10 | 5, 5 | 14, 2 | 2, 2). Node 0: expert 0 (40) moved to GPU 1 would
  // leave it at 50, a gain of 0; expert 1 (10) gains 50 - max(40, 20) = 10 and moves; then expert 0
  // alone is left and cannot gain. Node 1: expert 5 (2) gains 16 - max(14, 6) = 2, expert 4 none.
  const Plan whole = feplb().plan(rec, ctx);
  check_invariants(whole, rec, ctx, 2);
  CHECK(whole.tokens_per_gpu() == std::vector<std::int64_t>{40, 20, 14, 6});
  CHECK(dynamic_pieces(whole, 1) == std::map<int, std::int64_t>{{1, 10}});
  CHECK(dynamic_pieces(whole, 5) == std::map<int, std::int64_t>{{3, 2}});
  CHECK(count_dynamic(whole) == 2);
}

TEST_CASE("FEPLB respects the dynamic slots and the dynamic experts per GPU") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  // GPU 0 holds experts 0-3 with 10 tokens each, GPU 1 experts 4-7 with none: target 20. Each
  // expert alone fills only half of GPU 1's deficit, so a second expert needs a second slot.
  const TraceRecord rec = record_of({{5, 5, 5, 5, 0, 0, 0, 0}, {5, 5, 5, 5, 0, 0, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);

  // Whole experts and token splits agree here: each move is one whole 10-token expert (the token
  // scheduler's target is 20 and GPU 1's deficit 20, so it moves all 10 of an expert too).
  for (const bool whole : {true, false}) {
    CAPTURE(whole);
    auto make = [&](int dynamic, int slots) { return whole ? feplb(dynamic, slots) : feplb_tokens(dynamic, slots); };
    const Plan one_slot = make(4, 1).plan(rec, ctx);
    check_invariants(one_slot, rec, ctx, 1);
    CHECK(one_slot.tokens_per_gpu() == std::vector<std::int64_t>{30, 10});
    CHECK(dynamic_pieces(one_slot, 0) == std::map<int, std::int64_t>{{1, 10}});

    const Plan two_slots = make(4, 2).plan(rec, ctx);
    check_invariants(two_slots, rec, ctx, 2);
    CHECK(two_slots.tokens_per_gpu() == std::vector<std::int64_t>{20, 20});
    CHECK(count_dynamic(two_slots) == 2);

    // Only expert 0 is dynamic: slots to spare do not help.
    const Plan one_dynamic = make(1, 2).plan(rec, ctx);
    check_invariants(one_dynamic, rec, ctx, 2);
    CHECK(one_dynamic.tokens_per_gpu() == std::vector<std::int64_t>{30, 10});

    const Plan no_slots = make(4, 0).plan(rec, ctx);
    check_invariants(no_slots, rec, ctx, 0);
    CHECK(no_slots.tokens_per_gpu() == std::vector<std::int64_t>{40, 0});
    CHECK(no_slots.transfers.empty());
  }
}

TEST_CASE("FEPLB handles a micro-batch without tokens") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(std::vector<std::vector<std::uint32_t>>(4, std::vector<std::uint32_t>(8, 0)));
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  CHECK(plan.routes.empty());
  CHECK(plan.transfers.empty());
  CHECK(plan.instances.size() == 8);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{0, 0, 0, 0});
}

TEST_CASE("FEPLB with granularity tokens splits an expert hotter than a GPU's fair share over several receivers") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // Expert 0 carries 90 of 101 tokens, far more than the 26 any GPU should compute.
  const TraceRecord rec = record_of({{30, 0, 1, 0, 0, 0, 0, 0},
                                     {30, 0, 0, 0, 2, 0, 0, 0},
                                     {20, 0, 0, 0, 0, 0, 0, 3},
                                     {10, 0, 2, 0, 0, 0, 0, 3}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb_tokens().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // Target 26; GPU 2 (2 tokens) takes 24, GPU 1 (3) takes 23, GPU 3 (6) takes the last 17.
  CHECK(dynamic_pieces(plan, 0) == std::map<int, std::int64_t>{{1, 23}, {2, 24}, {3, 17}});
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{26, 26, 26, 23});
  CHECK(plan.tokens_per_instance()[0] == 26);
  // Each receiver needs its own copy of the weights.
  int weight_copies = 0;
  for (const Transfer& t : plan.transfers) weight_copies += t.kind == TransferKind::weights ? 1 : 0;
  CHECK(weight_copies == 3);
}

TEST_CASE("FEPLB plans are valid and preserve every count on skewed counts, both placements") {
  const ModelSpec model = test::simple_model(32);
  const HardwareSpec hw = test::simple_hardware(2, 4);
  // Deterministic skewed counts: a few hot experts, many cold ones.
  std::vector<std::vector<std::uint32_t>> rows(8, std::vector<std::uint32_t>(32, 0));
  std::uint64_t state = 12345;
  for (int s = 0; s < 8; ++s) {
    for (int e = 0; e < 32; ++e) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      const std::uint32_t noise = static_cast<std::uint32_t>(state >> 59);  // 0..31
      rows[s][e] = (e % 7 == 0 ? 40u : 2u) + noise;
    }
  }
  const TraceRecord rec = record_of(rows);
  for (Placement placement : {Placement::contiguous, Placement::interleaved}) {
    for (int slots : {0, 1, 2, 4}) {
     for (const bool whole : {true, false}) {
      CAPTURE(slots);
      CAPTURE(whole);
      const BalancerContext ctx = context_for(model, hw, placement);
      const Plan plan = (whole ? feplb(2, slots) : feplb_tokens(2, slots)).plan(rec, ctx);
      check_invariants(plan, rec, ctx, slots);
      CHECK((count_dynamic(plan) > 0) == (slots > 0));
      // Never worse than static EP, per node.
      const auto base = StaticEp().plan(rec, ctx).tokens_per_gpu();
      const auto after = plan.tokens_per_gpu();
      for (int node = 0; node < 2; ++node) {
        CHECK(*std::max_element(after.begin() + 4 * node, after.begin() + 4 * node + 4) <=
              *std::max_element(base.begin() + 4 * node, base.begin() + 4 * node + 4));
      }
     }
    }
  }
}

TEST_CASE("FEPLB reads its parameters strictly") {
  auto params_of = [](const std::string& text) { return ConfigMap(YAML::Load(text), "t.yaml", "balancer.params"); };
  ConfigMap defaults = params_of("{}");
  CHECK(make_feplb(defaults) != nullptr);
  CHECK_NOTHROW(defaults.finish());

  ConfigMap set = params_of("{dynamic_experts_per_gpu: 1, dynamic_slots_per_gpu: 3, planner_time_us: 12.5}");
  auto balancer = make_feplb(set);
  CHECK_NOTHROW(set.finish());
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(std::vector<std::vector<std::uint32_t>>(4, std::vector<std::uint32_t>(8, 1)));
  CHECK(balancer->plan(rec, context_for(model, hw)).planner.duration_ps == 12'500'000);

  ConfigMap choices = params_of("{granularity: tokens, min_gain: 0, gradient_dtype: bf16}");
  auto split = make_feplb(choices);
  CHECK_NOTHROW(choices.finish());
  // Test 1's counts: with tokens and no threshold, GPU 0's expert 0 is split three ways; the gradients
  // come back in BF16, 2 bytes per parameter.
  const TraceRecord hot = record_of({{20, 1, 2, 1, 2, 2, 2, 1},
                                     {15, 1, 2, 1, 2, 1, 1, 1},
                                     {15, 1, 1, 1, 2, 1, 1, 1},
                                     {10, 1, 1, 1, 1, 1, 1, 2}});
  const Plan split_plan = split->plan(hot, context_for(model, hw));
  CHECK(split_plan.tokens_per_gpu() == std::vector<std::int64_t>{24, 24, 24, 24});
  for (const Transfer& t : split_plan.transfers)
    if (t.kind == TransferKind::gradients) CHECK(t.bytes == 2'000'000);

  ConfigMap bad_granularity = params_of("{granularity: experts}");
  CHECK_THROWS_AS(make_feplb(bad_granularity), InputError);
  ConfigMap bad_gain = params_of("{min_gain: 1.5}");
  CHECK_THROWS_AS(make_feplb(bad_gain), InputError);
  ConfigMap bad_dtype = params_of("{gradient_dtype: int8}");
  CHECK_THROWS_AS(make_feplb(bad_dtype), InputError);
  ConfigMap negative = params_of("{dynamic_slots_per_gpu: -1}");
  CHECK_THROWS_AS(make_feplb(negative), InputError);
  ConfigMap fractional = params_of("{dynamic_experts_per_gpu: 1.5}");
  CHECK_THROWS_AS(make_feplb(fractional), InputError);
  ConfigMap unknown = params_of("{dynamic_slot_per_gpu: 1}");
  make_feplb(unknown);
  CHECK_THROWS_AS(unknown.finish(), InputError);
}

TEST_CASE("FEPLB's token scheduler works on node-local indices and records moves in the order it made them") {
  // Test 1's node: GPU 0 gives expert 0's excess to GPU 1, then GPU 3, then GPU 2.
  const std::vector<std::vector<HomeExpert>> home = {
      {{0, 60}, {1, 4}}, {{2, 6}, {3, 4}}, {{4, 7}, {5, 5}}, {{6, 5}, {7, 5}}};
  FeplbSchedulerParams tokens;
  tokens.granularity = FeplbGranularity::tokens;
  tokens.min_gain = 0;
  const auto moves = FeplbScheduler(tokens).schedule(home);
  REQUIRE(moves.size() == 3);
  CHECK((moves[0].expert == 0 && moves[0].home == 0 && moves[0].receiver == 1 && moves[0].tokens == 14));
  CHECK((moves[1].expert == 0 && moves[1].home == 0 && moves[1].receiver == 3 && moves[1].tokens == 14));
  CHECK((moves[2].expert == 0 && moves[2].home == 0 && moves[2].receiver == 2 && moves[2].tokens == 12));
  CHECK(FeplbScheduler(tokens).schedule({}).empty());

  // min_gain 0.55: at least ceil(0.55 x mean 24) = 14 tokens a move. The two moves of 14 are made;
  // GPU 2's deficit is 12 and expert 1's 4 tokens are fewer still, so GPU 0 stops at 36.
  tokens.min_gain = 0.55;
  const auto gated = FeplbScheduler(tokens).schedule(home);
  REQUIRE(gated.size() == 2);
  CHECK((gated[0].expert == 0 && gated[0].receiver == 1 && gated[0].tokens == 14));
  CHECK((gated[1].expert == 0 && gated[1].receiver == 3 && gated[1].tokens == 14));
}

TEST_CASE("FEPLB with an EP degree smaller than a node treats the EP GPUs as one node") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 8);
  BalancerContext ctx = context_for(model, hw);
  ctx.num_gpus = 2;
  // GPU 0 (experts 0, 1): 30 tokens; GPU 1 (experts 2, 3): 10 tokens.
  const TraceRecord rec = record_of({{10, 5, 3, 2}, {10, 5, 3, 2}});
  const Plan plan = feplb_tokens().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{20, 20});
  CHECK(dynamic_pieces(plan, 0) == std::map<int, std::int64_t>{{1, 10}});
  // Whole experts: expert 0 (20) would gain 0; expert 1 (10) gains 30 - max(20, 20) = 10.
  const Plan whole = feplb().plan(rec, ctx);
  check_invariants(whole, rec, ctx, 2);
  CHECK(whole.tokens_per_gpu() == std::vector<std::int64_t>{20, 20});
  CHECK(dynamic_pieces(whole, 1) == std::map<int, std::int64_t>{{1, 10}});
}

TEST_CASE("FEPLB's scheduler moves whole dynamic experts, the one that lowers the pair's maximum most") {
  // Loads: GPU 0 experts 0, 1 = 20, 18 (38); GPU 1 experts 2, 3 = 16, 14 (30); GPU 2 experts 4, 5 = 3, 2
  // (5); GPU 3 experts 6, 7 = 4, 3 (7). Mean 20, threshold max(1, ceil(0.01 x 20)) = 1. By hand:
  //   GPU 0 (38) -> GPU 2 (5): expert 0 gains 38 - max(18, 25) = 13, expert 1 38 - max(20, 23) = 15:
  //     expert 1 moves; loads 20, 30, 23, 7.
  //   GPU 1 (30) -> GPU 3 (7): expert 2 gains 30 - max(14, 23) = 7, expert 3 30 - max(16, 21) = 9:
  //     expert 3 moves; loads 20, 16, 23, 21.
  //   GPU 2 (23) -> GPU 1 (16): expert 4 gains 23 - max(20, 19) = 3, expert 5 2: expert 4 moves; loads
  //     20, 19, 20, 21.
  //   GPU 3 (21) -> GPU 1 (19, one slot left): expert 6 gains 21 - max(17, 23) = -2, expert 7 -1: stop.
  const std::vector<std::vector<HomeExpert>> home = {
      {{0, 20}, {1, 18}}, {{2, 16}, {3, 14}}, {{4, 3}, {5, 2}}, {{6, 4}, {7, 3}}};
  const FeplbScheduler scheduler{FeplbSchedulerParams{}};
  const auto dynamic = scheduler.dynamic_experts(home);
  REQUIRE(dynamic.size() == 4);
  CHECK((dynamic[3].size() == 2 && dynamic[3][0].expert == 6 && dynamic[3][1].expert == 7));
  const auto moves = scheduler.schedule(home);
  REQUIRE(moves.size() == 3);
  CHECK((moves[0].expert == 1 && moves[0].home == 0 && moves[0].receiver == 2 && moves[0].tokens == 18));
  CHECK((moves[1].expert == 3 && moves[1].home == 1 && moves[1].receiver == 3 && moves[1].tokens == 14));
  CHECK((moves[2].expert == 4 && moves[2].home == 2 && moves[2].receiver == 1 && moves[2].tokens == 3));

  // min_gain 0.2: a move must gain ceil(0.2 x 20) = 4 tokens, so expert 4's gain of 3 is not enough.
  FeplbSchedulerParams gated;
  gated.min_gain = 0.2;
  const auto fewer = FeplbScheduler(gated).schedule(home);
  REQUIRE(fewer.size() == 2);
  CHECK(fewer[0].expert == 1);
  CHECK(fewer[1].expert == 3);

  // One dynamic expert per GPU: the heaviest of each (0, 2, 4, 6) and nothing else may move.
  FeplbSchedulerParams one;
  one.dynamic_experts_per_gpu = 1;
  const auto dynamic_one = FeplbScheduler(one).dynamic_experts(home);
  for (int g = 0; g < 4; ++g) CHECK((dynamic_one[g].size() == 1 && dynamic_one[g][0].expert == 2 * g));
}

TEST_CASE("FEPLB's scheduler cannot move an expert heavier than the gap it would close") {
  // GPU 0: expert 0 = 60, expert 1 = 4 (64); the others 10, 12, 10; mean 24. Expert 0 moved whole to
  // GPU 1 (10) would leave GPU 1 at 70, worse than 64; expert 1 gains 64 - max(60, 14) = 4 and moves.
  // Then expert 0 alone would make GPU 3 (10) 70: the node's maximum stays 60.
  const std::vector<std::vector<HomeExpert>> home = {
      {{0, 60}, {1, 4}}, {{2, 6}, {3, 4}}, {{4, 7}, {5, 5}}, {{6, 5}, {7, 5}}};
  const auto moves = FeplbScheduler(FeplbSchedulerParams{}).schedule(home);
  REQUIRE(moves.size() == 1);
  CHECK((moves[0].expert == 1 && moves[0].receiver == 1 && moves[0].tokens == 4));
}

TEST_CASE("FEPLB moves nothing whose gain is below the minimum gain") {
  // GPU 0: experts 0, 1 = 30, 10 (40); GPU 1: 5, 5 (10); GPU 2: 8, 6 (14); GPU 3: 12, 4 (16). Mean 20.
  // The best move, expert 1 to GPU 1, gains 40 - max(30, 20) = 10 tokens; nothing else gains.
  const std::vector<std::vector<HomeExpert>> home = {
      {{0, 30}, {1, 10}}, {{2, 5}, {3, 5}}, {{4, 8}, {5, 6}}, {{6, 12}, {7, 4}}};
  FeplbSchedulerParams p;
  p.min_gain = 0.5;  // ceil(0.5 x 20) = 10: the gain of 10 is enough
  const auto at = FeplbScheduler(p).schedule(home);
  REQUIRE(at.size() == 1);
  CHECK((at[0].expert == 1 && at[0].receiver == 1 && at[0].tokens == 10));
  p.min_gain = 0.51;  // ceil(10.2) = 11: it is not
  CHECK(FeplbScheduler(p).schedule(home).empty());
  p.granularity = FeplbGranularity::tokens;  // the token scheduler's moves (10 and 4) fall short too
  CHECK(FeplbScheduler(p).schedule(home).empty());
}

namespace {

/// Loads 20, 18 | 16, 14 | 3, 2 | 4, 3 over 4 ranks (see the scheduler test above).
TraceRecord skewed_record() {
  return record_of({{5, 5, 4, 4, 1, 1, 1, 1}, {5, 5, 4, 4, 1, 1, 1, 1}, {5, 4, 4, 3, 1, 0, 1, 1}, {5, 4, 4, 3, 0, 0, 1, 0}});
}

}  // namespace

TEST_CASE("FEPLB's plan: static experts first, dynamic ones at home after the planner, moved-in ones on arrival") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const BalancerContext ctx = context_for(model, hw);
  const TraceRecord rec = skewed_record();
  // One dynamic expert per GPU (0, 2, 4, 6). By hand: expert 0 (20) GPU 0 -> GPU 2 gains 38 - 25 = 13;
  // expert 2 (16) GPU 1 -> GPU 3 gains 30 - 23 = 7; expert 4 (3) GPU 2 (25) -> GPU 1 (14) gains 3;
  // expert 6 (4) GPU 3 (23) -> GPU 1 (17) gains 2; GPU 2 (22) has nothing left to move.
  const Plan plan = feplb(1, 2).plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{18, 21, 22, 19});
  REQUIRE(plan.instances.size() == 12);
  CHECK((plan.instances[8].expert == 0 && plan.instances[8].gpu == 2));
  CHECK((plan.instances[9].expert == 2 && plan.instances[9].gpu == 3));
  CHECK((plan.instances[10].expert == 4 && plan.instances[10].gpu == 1));
  CHECK((plan.instances[11].expert == 6 && plan.instances[11].gpu == 1));
  const auto tokens = plan.tokens_per_instance();
  CHECK(tokens[0] == 0);  // moved whole: nothing stays at home
  CHECK(tokens[8] == 20);
  auto group = [&](int g, std::size_t k) { return plan.gemm_order[g][k].instances; };
  CHECK(plan.gemm_order[0].size() == 2);
  CHECK(group(0, 0) == std::vector<int>{1});
  CHECK(group(0, 1) == std::vector<int>{0});
  REQUIRE(plan.gemm_order[1].size() == 3);
  CHECK(group(1, 0) == std::vector<int>{3});
  CHECK(group(1, 1) == std::vector<int>{2});
  CHECK(group(1, 2) == std::vector<int>{10, 11});
  CHECK(plan.gemm_order[1][2].on_arrival);
  CHECK(group(2, 2) == std::vector<int>{8});
  CHECK(group(3, 2) == std::vector<int>{9});
  // Four weights copies of 1e6 bytes, four FP32 gradient copies of 4e6.
  CHECK(plan.transfers.size() == 8);
}

TEST_CASE("FEPLB's weight gradients are the expert's parameters in the gradient precision") {
  const ModelSpec simple = test::simple_model(8);  // 2 x 1000 x 500 = 1e6 parameters
  CHECK(feplb_gradient_bytes(simple, Dtype::fp32) == 4'000'000);
  CHECK(feplb_gradient_bytes(simple, Dtype::bf16) == 2'000'000);
  CHECK(feplb_gradient_bytes(simple, Dtype::fp8) == 1'000'000);
  // GLM-5: 3 x 6144 x 2048 = 37,748,736 parameters; FP32 gradients 150,994,944 bytes, twice the BF16
  // weights (75,497,472 bytes) that travel forward.
  const ModelSpec glm5 = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  CHECK(glm5.expert_weight_bytes() == 75'497'472);
  CHECK(feplb_gradient_bytes(glm5, Dtype::fp32) == 150'994'944);
}

TEST_CASE("FEPLB's copied weights count in the HBM check: a plan whose moved weights do not fit is refused") {
  const ModelSpec model = test::simple_model(8);  // 1e6 bytes of weights per expert, one MoE layer
  HardwareSpec hw = test::simple_hardware(1, 4);
  // 3.5e6 bytes: a GPU's 2 home experts (2e6) fit, and one moved-in copy more (3e6); two do not.
  hw.gpu.hbm_capacity_GB = 0.0035;
  const BalancerContext ctx = context_for(model, hw);
  const TraceRecord rec = skewed_record();
  CHECK_FALSE(hbm_overflow(StaticEp().plan(rec, ctx), model, hw));
  // One moved-in expert per GPU at most (expert 1 to GPU 2, expert 3 to GPU 3, expert 4 to GPU 1): fits.
  CHECK_FALSE(hbm_overflow(feplb(2, 1).plan(rec, ctx), model, hw));
  // The plan above hosts experts 4 and 6 on GPU 1: 4 experts, 4e6 bytes.
  const auto refused = hbm_overflow(feplb(1, 2).plan(rec, ctx), model, hw);
  REQUIRE(refused);
  CHECK(refused->find("GPU 1 needs") != std::string::npos);
  CHECK(refused->find("4 routed experts") != std::string::npos);
}

TEST_CASE("FEPLB's schedulers take the lowest of equally loaded donors first at both granularities") {
  // GPUs 0 and 1 tie at 20 tokens, GPUs 2 and 3 at 2; mean 11.
  // Whole experts: GPU 0 gives first, to GPU 2 (the lower of the two least loaded): expert 0 (12)
  // gains 20 - max(8, 14) = 6, expert 1 (8) 20 - max(12, 10) = 8, so expert 1 goes; then GPU 1 gives
  // expert 3 to GPU 3 the same way; then GPU 0 (12) would gain 12 - max(0, 22) < 1 with expert 0: stop.
  const std::vector<std::vector<HomeExpert>> whole = {
      {{0, 12}, {1, 8}}, {{2, 12}, {3, 8}}, {{4, 1}, {5, 1}}, {{6, 1}, {7, 1}}};
  const auto moves = FeplbScheduler(FeplbSchedulerParams{}).schedule(whole);
  REQUIRE(moves.size() == 2);
  CHECK((moves[0].expert == 1 && moves[0].home == 0 && moves[0].receiver == 2 && moves[0].tokens == 8));
  CHECK((moves[1].expert == 3 && moves[1].home == 1 && moves[1].receiver == 3 && moves[1].tokens == 8));

  // Tokens, target ceil(44 / 4) = 11: GPU 0 first gives 9 of expert 0 to GPU 2, then GPU 1 9 of
  // expert 2 to GPU 3; every GPU at 11.
  FeplbSchedulerParams tokens;
  tokens.granularity = FeplbGranularity::tokens;
  tokens.min_gain = 0;
  const std::vector<std::vector<HomeExpert>> split = {
      {{0, 15}, {1, 5}}, {{2, 15}, {3, 5}}, {{4, 1}, {5, 1}}, {{6, 1}, {7, 1}}};
  const auto pieces = FeplbScheduler(tokens).schedule(split);
  REQUIRE(pieces.size() == 2);
  CHECK((pieces[0].expert == 0 && pieces[0].home == 0 && pieces[0].receiver == 2 && pieces[0].tokens == 9));
  CHECK((pieces[1].expert == 2 && pieces[1].home == 1 && pieces[1].receiver == 3 && pieces[1].tokens == 9));
}

TEST_CASE("FEPLB keeps an expert without tokens static: no group waits for the planner for nothing") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // Experts 0, 4 and 6 get 4 tokens each, the others none: GPU 1 (experts 2, 3) has no work. Nothing
  // moves: a GPU's one expert with tokens would gain 4 - max(0, 4) = 0 by going whole to GPU 1.
  const TraceRecord rec = record_of({{2, 0, 0, 0, 2, 0, 2, 0},
                                     {2, 0, 0, 0, 2, 0, 2, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  CHECK(plan.transfers.empty());
  // GPU 0: expert 0 is its dynamic expert (after the planner); expert 1, without tokens, stays static.
  REQUIRE(plan.gemm_order[0].size() == 2);
  CHECK(plan.gemm_order[0][0].instances == std::vector<int>{1});
  CHECK(plan.gemm_order[0][1].instances == std::vector<int>{0});
  CHECK(plan.gemm_order[0][1].after_planner);
  // GPU 1: neither expert is dynamic: one static group, launched without waiting for the planner.
  REQUIRE(plan.gemm_order[1].size() == 1);
  CHECK(plan.gemm_order[1][0].instances == std::vector<int>{2, 3});
  CHECK_FALSE(plan.gemm_order[1][0].after_planner);
}

// FEPLB: hand-worked scheduler cases and the invariants of its plans. Counts are c[s][e] rows; with
// contiguous placement of 8 experts on 4 GPUs, GPU g is the home of experts 2g and 2g+1.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <string>

#include "sim/balancers/feplb.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/core/input_error.hpp"
#include "tests/sim/plan_checks.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

using test::check_copy_transfers;
using test::check_counts_preserved;

using test::context_for;
using test::record_of;

Feplb feplb(int dynamic_per_gpu = 2, int slots_per_gpu = 2) {
  FeplbParams p;
  p.scheduler.dynamic_experts_per_gpu = dynamic_per_gpu;
  p.scheduler.dynamic_slots_per_gpu = slots_per_gpu;
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
/// one weights and one gradients Copy Engine transfer per dynamic instance, slots respected.
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
    CHECK(plan.gemm_order[g].size() == (slots_used[g] > 0 ? 2u : 1u));
    for (int i : plan.gemm_order[g][0].instances) CHECK(plan.instances[i].kind == InstanceKind::static_expert);
    if (plan.gemm_order[g].size() == 2)
      CHECK(plan.gemm_order[g][1].instances.size() == static_cast<std::size_t>(slots_used[g]));
  }
  CHECK(plan.transfers.size() == 2 * static_cast<std::size_t>(count_dynamic(plan)));
  check_copy_transfers(plan, ctx, Carrier::copy_engine);
  CHECK(plan.planner.site == PlannerSite::host_cpu);
  CHECK(plan.planner.start == PlannerStart::after_dispatch);
  CHECK(plan.planner.d2h_bytes == static_cast<std::int64_t>(n) * experts * 4);
}

}  // namespace

TEST_CASE("FEPLB moves exactly a hot expert's excess to the under-loaded GPUs of its node") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // Expert 0 (home GPU 0) has 20+15+15+10 = 60 tokens. GPU loads 64, 10, 12, 10: 96 tokens, mean 24.
  const TraceRecord rec = record_of({{20, 1, 2, 1, 2, 2, 2, 1},
                                     {15, 1, 2, 1, 2, 1, 1, 1},
                                     {15, 1, 1, 1, 2, 1, 1, 1},
                                     {10, 1, 1, 1, 1, 1, 1, 2}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb().plan(rec, ctx);
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
  // Three weights copies forward and three gradient copies backward, 2 * 1000 * 500 bytes each.
  CHECK(plan.transfers.size() == 6);
  std::int64_t weight_bytes = 0;
  std::int64_t gradient_bytes = 0;
  for (const Transfer& t : plan.transfers) (t.kind == TransferKind::weights ? weight_bytes : gradient_bytes) += t.bytes;
  CHECK(weight_bytes == 3'000'000);
  CHECK(gradient_bytes == 3'000'000);
  CHECK(plan.planner.duration_ps == 3'000'000);  // the measured default, 3 us
  CHECK(plan.planner.d2h_bytes == 4 * 8 * 4);
}

TEST_CASE("FEPLB leaves a balanced micro-batch as static EP plans it") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // GPU loads 25, 25, 25, 26: already at ceil(101 / 4), so nothing is worth a weights copy.
  const TraceRecord rec = record_of({{3, 4, 3, 4, 3, 4, 3, 4},
                                     {3, 3, 3, 3, 3, 3, 3, 3},
                                     {3, 3, 3, 3, 3, 3, 3, 3},
                                     {3, 3, 3, 3, 3, 3, 3, 4}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb().plan(rec, ctx);
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
  for (int g = 0; g < 4; ++g) {
    REQUIRE(plan.gemm_order[g].size() == 1);
    CHECK(plan.gemm_order[g][0].instances == base.gemm_order[g][0].instances);
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
  const Plan plan = feplb().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // The NVLink-domain floor stays: max 30 against a global mean of 20.
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{30, 30, 10, 10});
  CHECK(dynamic_pieces(plan, 0) == std::map<int, std::int64_t>{{1, 20}});
  CHECK(dynamic_pieces(plan, 4) == std::map<int, std::int64_t>{{3, 6}});
  CHECK(count_dynamic(plan) == 2);
}

TEST_CASE("FEPLB respects the dynamic slots and the dynamic experts per GPU") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 2);
  // GPU 0 holds experts 0-3 with 10 tokens each, GPU 1 experts 4-7 with none: target 20. Each
  // expert alone fills only half of GPU 1's deficit, so a second expert needs a second slot.
  const TraceRecord rec = record_of({{5, 5, 5, 5, 0, 0, 0, 0}, {5, 5, 5, 5, 0, 0, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);

  const Plan one_slot = feplb(4, 1).plan(rec, ctx);
  check_invariants(one_slot, rec, ctx, 1);
  CHECK(one_slot.tokens_per_gpu() == std::vector<std::int64_t>{30, 10});
  CHECK(dynamic_pieces(one_slot, 0) == std::map<int, std::int64_t>{{1, 10}});

  const Plan two_slots = feplb(4, 2).plan(rec, ctx);
  check_invariants(two_slots, rec, ctx, 2);
  CHECK(two_slots.tokens_per_gpu() == std::vector<std::int64_t>{20, 20});
  CHECK(count_dynamic(two_slots) == 2);

  // Only expert 0 is dynamic: slots to spare do not help.
  const Plan one_dynamic = feplb(1, 2).plan(rec, ctx);
  check_invariants(one_dynamic, rec, ctx, 2);
  CHECK(one_dynamic.tokens_per_gpu() == std::vector<std::int64_t>{30, 10});

  const Plan no_slots = feplb(4, 0).plan(rec, ctx);
  check_invariants(no_slots, rec, ctx, 0);
  CHECK(no_slots.tokens_per_gpu() == std::vector<std::int64_t>{40, 0});
  CHECK(no_slots.transfers.empty());
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

TEST_CASE("FEPLB splits an expert hotter than a GPU's fair share over several receivers") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // Expert 0 carries 90 of 101 tokens, far more than the 26 any GPU should compute.
  const TraceRecord rec = record_of({{30, 0, 1, 0, 0, 0, 0, 0},
                                     {30, 0, 0, 0, 2, 0, 0, 0},
                                     {20, 0, 0, 0, 0, 0, 0, 3},
                                     {10, 0, 2, 0, 0, 0, 0, 3}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = feplb().plan(rec, ctx);
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
      CAPTURE(slots);
      const BalancerContext ctx = context_for(model, hw, placement);
      const Plan plan = feplb(2, slots).plan(rec, ctx);
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

  ConfigMap negative = params_of("{dynamic_slots_per_gpu: -1}");
  CHECK_THROWS_AS(make_feplb(negative), InputError);
  ConfigMap fractional = params_of("{dynamic_experts_per_gpu: 1.5}");
  CHECK_THROWS_AS(make_feplb(fractional), InputError);
  ConfigMap unknown = params_of("{dynamic_slot_per_gpu: 1}");
  make_feplb(unknown);
  CHECK_THROWS_AS(unknown.finish(), InputError);
}

TEST_CASE("FEPLB's scheduler works on node-local indices and records moves in the order it made them") {
  // Test 1's node: GPU 0 gives expert 0's excess to GPU 1, then GPU 3, then GPU 2.
  const std::vector<std::vector<HomeExpert>> home = {
      {{0, 60}, {1, 4}}, {{2, 6}, {3, 4}}, {{4, 7}, {5, 5}}, {{6, 5}, {7, 5}}};
  const auto moves = FeplbScheduler(FeplbSchedulerParams{}).schedule(home);
  REQUIRE(moves.size() == 3);
  CHECK((moves[0].expert == 0 && moves[0].home == 0 && moves[0].receiver == 1 && moves[0].tokens == 14));
  CHECK((moves[1].expert == 0 && moves[1].home == 0 && moves[1].receiver == 3 && moves[1].tokens == 14));
  CHECK((moves[2].expert == 0 && moves[2].home == 0 && moves[2].receiver == 2 && moves[2].tokens == 12));
  CHECK(FeplbScheduler(FeplbSchedulerParams{}).schedule({}).empty());
}

TEST_CASE("FEPLB with an EP degree smaller than a node treats the EP GPUs as one node") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 8);
  BalancerContext ctx = context_for(model, hw);
  ctx.num_gpus = 2;
  // GPU 0 (experts 0, 1): 30 tokens; GPU 1 (experts 2, 3): 10 tokens.
  const TraceRecord rec = record_of({{10, 5, 3, 2}, {10, 5, 3, 2}});
  const Plan plan = feplb().plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{20, 20});
  CHECK(dynamic_pieces(plan, 0) == std::map<int, std::int64_t>{{1, 10}});
}

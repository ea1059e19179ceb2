// UltraEP: hand-worked quota searches and the invariants of its plans. Counts are c[s][e] rows; with
// contiguous placement of 8 experts on 4 GPUs, GPU g is the home of experts 2g and 2g+1.
#include <doctest/doctest.h>

#include <algorithm>
#include <map>
#include <random>
#include <set>
#include <string>

#include "sim/balancers/hbm_fit.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/balancers/ultraep.hpp"
#include "sim/core/input_error.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/plan_checks.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

using test::check_counts_preserved;

using test::context_for;
using test::record_of;

/// No tolerance above the floor (oracle_eps 0: the fast path starts at the domain mean), otherwise
/// UltraEP's defaults.
UltraEpParams exact_params(int slots = 2) {
  UltraEpParams p;
  p.spare_slots_per_gpu = slots;
  p.oracle_eps = 0;
  return p;
}

/// (GPU -> quota) of expert e's instances, master included.
std::map<int, std::int64_t> pieces_of(const Plan& plan, int expert) {
  std::map<int, std::int64_t> pieces;
  const auto tokens = plan.tokens_per_instance();
  for (std::size_t i = 0; i < plan.instances.size(); ++i)
    if (plan.instances[i].expert == expert) pieces[plan.instances[i].gpu] += tokens[i];
  return pieces;
}

/// Everything an UltraEP plan must satisfy whatever the counts: a valid plan, every (source, expert)
/// total preserved, masters 0..E-1 at home, replicas in the master's node, at most `slots` replicas and
/// one copy per expert on a GPU, direct EP routes, one grouped GEMM per GPU, and per replica one weights
/// transfer from home before the dispatch and one gradients transfer back in FP32 (4 bytes for each
/// of the simple model's 2 x 1000 x 500 parameters, whose weights take 1 byte each).
void check_invariants(const Plan& plan, const TraceRecord& rec, const BalancerContext& ctx, int slots) {
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
  for (int e = 0; e < experts; ++e) {
    CHECK(plan.instances[e].expert == e);
    CHECK(plan.instances[e].gpu == home_gpu(e, experts, n, ctx.placement));
    CHECK(plan.instances[e].kind == InstanceKind::static_expert);
  }
  std::vector<int> replicas(n, 0);
  std::set<std::pair<int, int>> copies;
  for (std::size_t i = 0; i < plan.instances.size(); ++i) {
    const ExpertInstance& inst = plan.instances[i];
    CHECK(copies.insert({inst.gpu, inst.expert}).second);
    if (i < static_cast<std::size_t>(experts)) continue;
    CHECK(inst.kind == InstanceKind::dynamic_expert);
    const int home = home_gpu(inst.expert, experts, n, ctx.placement);
    CHECK(inst.gpu / ctx.gpus_per_node == home / ctx.gpus_per_node);
    ++replicas[inst.gpu];
  }
  for (int g = 0; g < n; ++g) {
    CHECK(replicas[g] <= slots);
    CHECK(plan.gemm_order[g].size() == 1u);
  }
  CHECK(plan.transfers.size() == 3 * (plan.instances.size() - experts));
  std::vector<int> restores(plan.instances.size(), 0), syncs(plan.instances.size(), 0);
  for (const Transfer& t : plan.transfers) {
    const ExpertInstance& inst = plan.instances[t.instance];
    const int home = home_gpu(inst.expert, experts, n, ctx.placement);
    CHECK(t.carrier == Carrier::ep_backend);
    if (t.kind == TransferKind::weights) {
      // weight_sync before the dispatch, and again before the expert backward (the restore).
      CHECK(t.start == TransferStart::before_dispatch);
      ++(t.pass == PassKind::forward ? syncs : restores)[t.instance];
      CHECK((t.src_gpu == home && t.dst_gpu == inst.gpu));
      CHECK(t.bytes == 1'000'000);
    } else {
      CHECK((t.pass == PassKind::backward && t.start == TransferStart::after_dispatch));
      CHECK((t.src_gpu == inst.gpu && t.dst_gpu == home));
      CHECK(t.bytes == 4'000'000);
    }
  }
  for (std::size_t i = experts; i < plan.instances.size(); ++i) {
    CHECK(syncs[i] == 1);
    CHECK(restores[i] == 1);
  }
  CHECK(plan.planner.site == PlannerSite::gpu);
  CHECK(plan.planner.start == PlannerStart::before_dispatch);
}

std::int64_t max_of(const std::vector<std::int64_t>& v) { return *std::max_element(v.begin(), v.end()); }

// Expert 0 (home GPU 0) has 20+15+15+10 = 60 tokens. GPU loads 64, 10, 12, 10: 96 tokens, mean 24.
const std::vector<std::vector<std::uint32_t>> kHotRows = {{20, 1, 2, 1, 2, 2, 2, 1},
                                                          {15, 1, 2, 1, 2, 1, 1, 1},
                                                          {15, 1, 1, 1, 2, 1, 1, 1},
                                                          {10, 1, 1, 1, 1, 1, 1, 2}};

}  // namespace

TEST_CASE("UltraEP's quota search exports a hot expert's excess into the largest slack first") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(kHotRows);
  const BalancerContext ctx = context_for(model, hw);
  UltraEp ultraep(exact_params());
  const Plan plan = ultraep.plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // By hand, T = 24: GPU 0 needs 40 off. Expert 0 (59 exportable, one token stays): GPU 1 (slack 14,
  // ties to the lower index over GPU 3) takes 14 (floor ceil(40/3) = 14), GPU 3 takes 14 (floor 13),
  // GPU 2 takes 12 (floor 12).
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{24, 24, 24, 24});
  CHECK(pieces_of(plan, 0) == std::map<int, std::int64_t>{{0, 20}, {1, 14}, {2, 12}, {3, 14}});
  CHECK(plan.instances.size() == 11u);
  // Locality first: each host keeps its own tokens up to its quota (GPU 0 20, GPU 1 14 of 15, GPU 2
  // 12 of 15, GPU 3 all 10); the 4 left over (1 from rank 1, 3 from rank 2) fill GPU 3's remaining 4.
  std::map<std::pair<int, int>, std::int64_t> moved;  // (src, gpu) -> tokens of expert 0 that travel
  for (const TokenRoute& r : plan.routes)
    if (plan.instances[r.instance].expert == 0 && r.carrier != Carrier::none)
      moved[{r.src_rank, plan.instances[r.instance].gpu}] += r.tokens;
  CHECK(moved == std::map<std::pair<int, int>, std::int64_t>{{{1, 3}, 1}, {{2, 3}, 3}});

  const UltraEpDomainQuotas q = ultraep_domain_quotas({60, 4, 6, 4, 7, 5, 5, 5},
                                                      {0, 0, 1, 1, 2, 2, 3, 3}, 0, 4, exact_params());
  CHECK(q.threshold == 24);
  REQUIRE(q.moves.size() == 3u);
  CHECK((q.moves[0].gpu == 1 && q.moves[0].tokens == 14));
  CHECK((q.moves[1].gpu == 3 && q.moves[1].tokens == 14));
  CHECK((q.moves[2].gpu == 2 && q.moves[2].tokens == 12));
}

TEST_CASE("UltraEP's default 1% fast path accepts ceil(1.01 * floor)") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(kHotRows);
  const BalancerContext ctx = context_for(model, hw);
  UltraEp ultraep{UltraEpParams{}};
  const Plan plan = ultraep.plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // T = ceil(24 * 1.01) = 25: GPU 1 takes 15, GPU 3 15, GPU 2 the last 9 (floor ceil(9/1) = 9).
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{25, 25, 21, 25});
  CHECK(plan.planner.duration_ps == us_to_ps(kUltraEpDefaultPlannerTimeUs));
}

TEST_CASE("UltraEP without locality splits each source's tokens in proportion to the quotas") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(kHotRows);
  const BalancerContext ctx = context_for(model, hw);
  UltraEpParams p = exact_params();
  p.locality_aware = false;
  const Plan plan = UltraEp(p).plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // Quotas 20, 14, 12, 14 of 60. Rank 0's 20 tokens: 6.67, 4.67, 4, 4.67 -> 6, 4, 4, 4 and the two
  // largest remainders (40/60 each; ties: lower instance) go to the master and GPU 1: 7, 5, 4, 4.
  std::map<int, std::int64_t> from_rank0;
  for (const TokenRoute& r : plan.routes)
    if (r.src_rank == 0 && plan.instances[r.instance].expert == 0) from_rank0[plan.instances[r.instance].gpu] = r.tokens;
  CHECK(from_rank0 == std::map<int, std::int64_t>{{0, 7}, {1, 5}, {2, 4}, {3, 4}});
  // Per-source rounding may leave an instance a few tokens off its quota, never more than N.
  const auto tokens = plan.tokens_per_gpu();
  for (int g = 0; g < 4; ++g) CHECK(std::abs(tokens[g] - 24) <= 4);
}

TEST_CASE("UltraEP splits an expert hotter than a whole GPU over several ranks") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // Expert 0: 40 tokens from each rank (160); experts 2..7: 10 each. Loads 160, 20, 20, 20; mean 55.
  const TraceRecord rec = record_of({{40, 0, 10, 10, 10, 10, 10, 10},
                                     {40, 0, 0, 0, 0, 0, 0, 0},
                                     {40, 0, 0, 0, 0, 0, 0, 0},
                                     {40, 0, 0, 0, 0, 0, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = UltraEp(exact_params()).plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{55, 55, 55, 55});
  CHECK(pieces_of(plan, 0) == std::map<int, std::int64_t>{{0, 55}, {1, 35}, {2, 35}, {3, 35}});

  // No spare slots: nothing can move, the plan is static EP's plus the planner.
  const Plan none = UltraEp(exact_params(0)).plan(rec, ctx);
  check_invariants(none, rec, ctx, 0);
  const Plan st = StaticEp().plan(rec, ctx);
  CHECK(none.tokens_per_gpu() == st.tokens_per_gpu());
  CHECK(none.routes.size() == st.routes.size());
  CHECK(none.transfers.empty());
}

TEST_CASE("UltraEP never replicates across NVLink domains: all load on one node") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  // Node 0 (GPUs 0, 1: experts 0..3) has every token: loads 90, 10, 0, 0. Node mean 50.
  const TraceRecord rec = record_of({{30, 30, 5, 5, 0, 0, 0, 0},
                                     {20, 10, 0, 0, 0, 0, 0, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0},
                                     {0, 0, 0, 0, 0, 0, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = UltraEp(exact_params()).plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  // The floor is the node mean: GPU 0 exports 40 to GPU 1 (expert 0 first: 40 of its 49 exportable).
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{50, 50, 0, 0});
  CHECK(pieces_of(plan, 0) == std::map<int, std::int64_t>{{0, 10}, {1, 40}});
}

TEST_CASE("UltraEP handles a micro-batch without tokens") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const TraceRecord rec = record_of(std::vector<std::vector<std::uint32_t>>(4, std::vector<std::uint32_t>(8, 0)));
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = UltraEp(exact_params()).plan(rec, ctx);
  check_invariants(plan, rec, ctx, 2);
  CHECK(plan.routes.empty());
  CHECK(plan.instances.size() == 8u);
  CHECK(plan.transfers.empty());
}

TEST_CASE("UltraEP with more spare slots than experts keeps one copy of an expert per GPU") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // One expert per GPU; expert 0 has everything (400 tokens): it can only spread to 3 other GPUs.
  const TraceRecord rec = record_of(std::vector<std::vector<std::uint32_t>>(4, {100, 0, 0, 0}));
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = UltraEp(exact_params(100)).plan(rec, ctx);
  check_invariants(plan, rec, ctx, 100);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{100, 100, 100, 100});
  CHECK(plan.instances.size() == 4u + 3u);
  // Locality: every rank keeps its own 100 tokens; nothing travels.
  for (const TokenRoute& r : plan.routes) CHECK(r.carrier == Carrier::none);
}

TEST_CASE("UltraEP's replica floor keeps a big excess off a tiny slack") {
  // One domain of 2 GPUs: loads 5000 and 0 with min_tokens_per_replica 1024. T = 2500 moves 2500.
  UltraEpParams p = exact_params();
  const UltraEpDomainQuotas q = ultraep_domain_quotas({5000, 0}, {0, 1}, 0, 2, p);
  CHECK(q.threshold == 2500);
  REQUIRE(q.moves.size() == 1u);
  CHECK(q.moves[0].tokens == 2500);
  // Two experts of 10 tokens on GPU 0, 1 spare slot on GPU 1: at T = 10 the need is 10 but a master
  // keeps one token, so q = 9 is below the fast path's floor ceil(10 / 1) = 10 and T = 10 fails. The
  // retry ladder's step is max(1, ceil(20 / 100)) = 1: T = 11 (q = 9, floor 9) is feasible.
  p.spare_slots_per_gpu = 1;
  const UltraEpDomainQuotas two = ultraep_domain_quotas({10, 10, 0, 0}, {0, 0, 1, 1}, 0, 2, p);
  CHECK(two.threshold == 11);
  CHECK(two.search == UltraEpSearch::fast);
  CHECK(two.fast_tries == 2);
  REQUIRE(two.moves.size() == 1u);
  CHECK((two.moves[0].expert == 0 && two.moves[0].gpu == 1 && two.moves[0].tokens == 9));
  // Two 1-token experts: neither master may empty, so nothing moves unless allowed.
  p.spare_slots_per_gpu = 2;
  const UltraEpDomainQuotas ones = ultraep_domain_quotas({1, 1, 0, 0}, {0, 0, 1, 1}, 0, 2, p);
  CHECK(ones.threshold == 2);
  CHECK(ones.moves.empty());
  p.allow_zero_master_quota = true;
  const UltraEpDomainQuotas zero = ultraep_domain_quotas({1, 1, 0, 0}, {0, 0, 1, 1}, 0, 2, p);
  CHECK(zero.threshold == 1);
  REQUIRE(zero.moves.size() == 1u);
  CHECK((zero.moves[0].expert == 0 && zero.moves[0].tokens == 1));
}

TEST_CASE("UltraEP's fast path: floor ceil(need / feasible targets) with no 1024 cap, retries 1% of hi apart") {
  // One domain of 2 GPUs, 2 spare slots each. GPU 0: experts 0 and 1 with 2001 tokens each (4002);
  // GPU 1: nothing. lo = 4002 / 2 = 2001, hi = 4002, the ladder's step ceil(4002 / 100) = 41.
  // T = 2001: need 2001, one feasible target (GPU 1), so the floor is 2001; each expert can export at
  // most 2000 (its master keeps a token): no copy, T fails. (Under a floor capped at 1024, T = 2001
  // would pass with copies of 2000 and 1 tokens.) T = 2042: need 1960, floor 1960, expert 0 exports
  // 1960 to GPU 1.
  const UltraEpDomainQuotas q = ultraep_domain_quotas({2001, 2001, 0, 0}, {0, 0, 1, 1}, 0, 2, exact_params());
  CHECK(q.search == UltraEpSearch::fast);
  CHECK(q.fast_tries == 2);
  CHECK(q.threshold == 2042);
  REQUIRE(q.moves.size() == 1u);
  CHECK((q.moves[0].expert == 0 && q.moves[0].gpu == 1 && q.moves[0].tokens == 1960));
}

TEST_CASE("UltraEP after three failed fast tries: the capacity bound with the static floor") {
  // GPU 0: four experts of 1000 tokens (4000); GPU 1: nothing; 4 spare slots on GPU 1. lo = 2000,
  // hi = 4000, step 40. Fast tries T = 2000, 2040, 2080: the floor is the whole need (one feasible
  // target) and an expert exports at most 999, so all three fail. The smallest T whose slack covers
  // the excess is 2000; with min_tokens_per_replica 1, experts 0, 1 and 2 export 999, 999 and 2.
  UltraEpParams p = exact_params(4);
  p.min_tokens_per_replica = 1;
  const std::vector<std::int64_t> loads = {1000, 1000, 1000, 1000, 0, 0, 0, 0};
  const std::vector<int> home = {0, 0, 0, 0, 1, 1, 1, 1};
  const UltraEpDomainQuotas q = ultraep_domain_quotas(loads, home, 0, 2, p);
  CHECK(q.search == UltraEpSearch::precheck);
  CHECK(q.fast_tries == 3);
  CHECK(q.threshold == 2000);
  REQUIRE(q.moves.size() == 3u);
  CHECK((q.moves[0].expert == 0 && q.moves[0].tokens == 999));
  CHECK((q.moves[1].expert == 1 && q.moves[1].tokens == 999));
  CHECK((q.moves[2].expert == 2 && q.moves[2].tokens == 2));
  // The default floor, 1024 tokens, is more than any expert can export: no cap below hi is feasible
  // and the domain stays as it is.
  p.min_tokens_per_replica = 1024;
  const UltraEpDomainQuotas stuck = ultraep_domain_quotas(loads, home, 0, 2, p);
  CHECK(stuck.search == UltraEpSearch::probes);
  CHECK(stuck.threshold == 4000);
  CHECK(stuck.moves.empty());
}

TEST_CASE("UltraEP's probe search: four probes a round, the first feasible one bounds the next") {
  // As above with one spare slot: a single copy of at most 999 tokens, so T is feasible iff
  // 4000 - T <= 999. The fast path and the capacity bound (T = 2000) fail; then over [2001, 4000):
  //   range 1999: probes 2400 2800 3200 3600 -> 3200 first feasible: [2801, 3200]
  //   range 399:  probes 2880 2960 3040 3120 -> 3040: [2961, 3040]
  //   range 79:   probes 2976 2992 3008 3024 -> 3008: [2993, 3008]
  //   range 15:   probes 2996 2999 3002 3005 -> 3002: [3000, 3002]
  //   range 2:    probes 3000 3001           -> 3001.
  UltraEpParams p = exact_params(1);
  p.min_tokens_per_replica = 1;
  const UltraEpDomainQuotas q =
      ultraep_domain_quotas({1000, 1000, 1000, 1000, 0, 0, 0, 0}, {0, 0, 0, 0, 1, 1, 1, 1}, 0, 2, p);
  CHECK(q.search == UltraEpSearch::probes);
  CHECK(q.threshold == 3001);
  REQUIRE(q.moves.size() == 1u);
  CHECK((q.moves[0].expert == 0 && q.moves[0].gpu == 1 && q.moves[0].tokens == 999));
}

TEST_CASE("UltraEP's reroute: replicas in the oracle's order, remainder ties to the lower host GPU") {
  const ModelSpec model = test::simple_model(4);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  // One expert per GPU; expert 3 (home GPU 3) has all 12 tokens: 6 from rank 0, 6 from rank 2.
  // T = 3: copies of 3 tokens on GPUs 0, 1, 2 (equal slack: lower GPU first), the master keeps 3.
  // Locality: GPU 0 and GPU 2 fill their copies from their own 6; the master (no local tokens) and
  // GPU 1 have 3 tokens of room each. Ranks 0 and 2 each split their remaining 3 as 1.5 and 1.5: the
  // tie goes to the lower host GPU, 1, not to the master (which is the lower instance).
  const TraceRecord rec = record_of({{0, 0, 0, 6}, {0, 0, 0, 0}, {0, 0, 0, 6}, {0, 0, 0, 0}});
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = UltraEp(exact_params(1)).plan(rec, ctx);
  check_invariants(plan, rec, ctx, 1);
  REQUIRE(plan.instances.size() == 7u);
  CHECK(plan.instances[4].gpu == 0);
  CHECK(plan.instances[5].gpu == 1);
  CHECK(plan.instances[6].gpu == 2);
  CHECK(plan.tokens_per_gpu() == std::vector<std::int64_t>{3, 4, 3, 2});
  std::map<std::pair<int, int>, std::int64_t> sent;  // (src, gpu) -> tokens
  for (const TokenRoute& r : plan.routes) sent[{r.src_rank, plan.instances[r.instance].gpu}] += r.tokens;
  CHECK(sent == std::map<std::pair<int, int>, std::int64_t>{
                    {{0, 0}, 3}, {{0, 1}, 2}, {{0, 3}, 1}, {{2, 2}, 3}, {{2, 1}, 2}, {{2, 3}, 1}});
}

TEST_CASE("UltraEP's replica copies count against HBM: a plan whose copies do not fit is refused") {
  const ModelSpec model = test::simple_model(8);  // 1e6 bytes per expert
  HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(kHotRows);
  const BalancerContext ctx = context_for(model, hw);
  const Plan plan = UltraEp(exact_params()).plan(rec, ctx);
  // Static EP needs 2 experts (2e6 bytes) per GPU; UltraEP's copies of expert 0 on GPUs 1, 2 and 3
  // make 3 there.
  hw.gpu.hbm_capacity_GB = 0.0025;
  CHECK_FALSE(hbm_overflow(StaticEp().plan(rec, ctx), model, hw));
  const auto message = hbm_overflow(plan, model, hw);
  REQUIRE(message);
  CHECK(message->find("GPU 1 needs 0.003 GB (3000000 bytes) for the weights of 3 routed experts") != std::string::npos);
  hw.gpu.hbm_capacity_GB = 0.0031;
  CHECK_FALSE(hbm_overflow(plan, model, hw));
}

TEST_CASE("UltraEP plans are valid and preserve every count on skewed counts, both placements") {
  const ModelSpec model = test::simple_model(32);
  const HardwareSpec hw = test::simple_hardware(2, 4);
  std::mt19937 rng(7);
  std::lognormal_distribution<double> popularity(0.0, 1.2);
  for (Placement placement : {Placement::contiguous, Placement::interleaved}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<double> weight(32);
      for (double& w : weight) w = popularity(rng);
      std::vector<std::vector<std::uint32_t>> rows(8, std::vector<std::uint32_t>(32));
      for (auto& row : rows)
        for (int e = 0; e < 32; ++e) row[e] = static_cast<std::uint32_t>(weight[e] * 300 * (trial % 3 + 1) / 10);
      const TraceRecord rec = record_of(rows);
      const BalancerContext ctx = context_for(model, hw, placement);
      UltraEpParams p;
      p.min_tokens_per_replica = 1;
      const Plan plan = UltraEp(p).plan(rec, ctx);
      check_invariants(plan, rec, ctx, p.spare_slots_per_gpu);
      const Plan st = StaticEp().plan(rec, ctx);
      CHECK(max_of(plan.tokens_per_gpu()) <= max_of(st.tokens_per_gpu()));
    }
  }
}

TEST_CASE("UltraEP reads its parameters strictly") {
  auto params_of = [](const std::string& text) { return ConfigMap(YAML::Load(text), "t.yaml", "balancer.params"); };
  ConfigMap defaults = params_of("{}");
  CHECK(make_ultraep(defaults) != nullptr);
  CHECK_NOTHROW(defaults.finish());
  ConfigMap set = params_of(
      "{spare_slots_per_gpu: 1, balance_threshold: 1.1, oracle_eps: 0, min_tokens_per_replica: 1, "
      "allow_zero_master_quota: true, locality_aware: false, planner_time_us: 12.5, grad_dtype: bf16}");
  auto balancer = make_ultraep(set);
  CHECK_NOTHROW(set.finish());
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(kHotRows);
  const Plan plan = balancer->plan(rec, context_for(model, hw));
  CHECK(plan.planner.duration_ps == 12'500'000);
  REQUIRE(!plan.transfers.empty());
  for (const Transfer& t : plan.transfers)
    if (t.kind == TransferKind::gradients) CHECK(t.bytes == 2'000'000);  // 1e6 parameters in BF16
  // The kernel's search has no iteration bound: the former key is unknown now.
  ConfigMap bound = params_of("{max_search_iterations: 8}");
  make_ultraep(bound);
  CHECK_THROWS_AS(bound.finish(), InputError);
  ConfigMap bad_dtype = params_of("{grad_dtype: fp64}");
  CHECK_THROWS_AS(make_ultraep(bad_dtype), InputError);
  ConfigMap low = params_of("{balance_threshold: 0.9}");
  CHECK_THROWS_AS(make_ultraep(low), InputError);
  ConfigMap negative = params_of("{spare_slots_per_gpu: -1}");
  CHECK_THROWS_AS(make_ultraep(negative), InputError);
  ConfigMap unknown = params_of("{spare_slot_per_gpu: 1}");
  make_ultraep(unknown);
  CHECK_THROWS_AS(unknown.finish(), InputError);
}

TEST_CASE("UltraEP restores its copies' weights before the expert backward: one more weight_sync per layer") {
  const ModelSpec model = test::simple_model(8);
  const HardwareSpec hw = test::simple_hardware(1, 4);
  const TraceRecord rec = record_of(kHotRows);
  const Plan plan = UltraEp(exact_params()).plan(rec, context_for(model, hw));
  // Three copies of expert 0 (GPUs 1, 2, 3; see the quota search above), 1e6 weight bytes each, moved
  // before the dispatch and again before the gradient dispatch.
  REQUIRE(plan.instances.size() == 11u);
  // Each rank's tokens (its row sums) feed the layer; the model has no shared expert.
  const LayerResult fwd = simulate_layer(hw, model, plan, {31, 24, 23, 18}, false);
  const LayerResult both = simulate_layer(hw, model, plan, {31, 24, 23, 18}, true);
  CHECK(fwd.weight_bytes == doctest::Approx(3e6));
  CHECK(both.weight_bytes == doctest::Approx(6e6));
  // The backward's weights sync is the first thing on every GPU's communication stream: GPU 0 sends
  // 1e6 bytes to each copy over its one NVLink port, 30 us + 1 us, and the gradient dispatch follows.
  Time_ps sync_end = -1, grad_dispatch_start = -1;
  for (const TimelineEvent& e : both.timeline.events) {
    if (e.gpu != 0 || e.track != Track::comm_kernel || e.pass != Pass::backward) continue;
    if (e.name == "weights sync") sync_end = e.end_ps;
    if (e.name == "grad dispatch") grad_dispatch_start = e.start_ps;
  }
  CHECK(sync_end == both.forward_ps + us_to_ps(31));
  CHECK(grad_dispatch_start == sync_end);
}

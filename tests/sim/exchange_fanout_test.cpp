// Distinct tokens per EP leg (ExchangeFanout): exact from token ids, and the expectation rule from
// counts, each against figures worked out by hand.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <utility>

#include "sim/balancers/static_ep.hpp"
#include "sim/replay/exchange_fanout.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

// 2 nodes x 2 GPUs, 8 experts (2 per GPU: experts 4, 5 on GPU 2 and 6, 7 on GPU 3), top-2. Rank 0 has
// two tokens: A -> {4, 5} (both on GPU 2) and B -> {4, 6} (GPU 2 and GPU 3).
struct TwoTokens {
  HardwareSpec hw = test::simple_hardware(2, 2);
  ModelSpec model = test::simple_model(8, 2);
  TraceRecord record;
  Plan plan;
  TwoTokens() {
    hw.ep_backend.internode_route = "rail_forward";
    record = test::record_of({{0, 0, 0, 0, 2, 1, 1, 0}, {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0},
                              {0, 0, 0, 0, 0, 0, 0, 0}});
    record.token_src_rank = {0, 0};
    record.token_experts = {4, 5, 4, 6};
    plan = StaticEp().plan(record, test::context_for(model, hw));
  }
};

double tokens_to(const std::vector<LegTokens>& legs, int src, int dst) {
  for (const LegTokens& leg : legs)
    if (leg.src == src && leg.dst == dst) return leg.tokens;
  return 0;
}

}  // namespace

TEST_CASE("per_expert copies are the plan's assignments") {
  const TwoTokens t;
  const ExchangeFanout f(t.plan, &t.record, t.model, TokenCopies::per_expert, 2);
  CHECK(tokens_to(f.gpu_legs(0), 0, 2) == 3);  // A's two assignments and B's first
  CHECK(tokens_to(f.gpu_legs(0), 0, 3) == 1);
  CHECK(f.node_legs(0).empty());
}

TEST_CASE("token ids give one copy per destination GPU, and per_node one per destination node") {
  const TwoTokens t;
  const ExchangeFanout per_gpu(t.plan, &t.record, t.model, TokenCopies::per_gpu, 2);
  CHECK(per_gpu.exact());
  CHECK(tokens_to(per_gpu.gpu_legs(0), 0, 2) == 2);  // A and B once each
  CHECK(tokens_to(per_gpu.gpu_legs(0), 0, 3) == 1);  // B
  CHECK(per_gpu.node_legs(0).empty());
  const ExchangeFanout per_node(t.plan, &t.record, t.model, TokenCopies::per_node, 2);
  CHECK(tokens_to(per_node.gpu_legs(0), 0, 2) == 2);
  CHECK(tokens_to(per_node.node_legs(0), 0, 1) == 2);  // A and B cross to node 1 once each
  CHECK(per_node.node_legs(0).size() == 1);
}

TEST_CASE("without token ids the copies are the expectation of independent slots") {
  TwoTokens t;
  t.record.token_src_rank.clear();
  t.record.token_experts.clear();
  const ExchangeFanout f(t.plan, &t.record, t.model, TokenCopies::per_node, 2);
  CHECK_FALSE(f.exact());
  // n = 2 tokens, K = 2. GPU 2 takes 3 of the 4 slots: 2 (1 - (1 - 3/4)^2) = 1.875; GPU 3 takes one:
  // 2 (1 - (3/4)^2) = 0.875; node 1 takes all four: 2 tokens.
  CHECK(tokens_to(f.gpu_legs(0), 0, 2) == doctest::Approx(1.875));
  CHECK(tokens_to(f.gpu_legs(0), 0, 3) == doctest::Approx(0.875));
  CHECK(tokens_to(f.node_legs(0), 0, 1) == doctest::Approx(2.0));
}

TEST_CASE("a plan whose routes do not match the token ids falls back to the expectation") {
  TwoTokens t;
  t.record.token_experts = {4, 5, 4, 7};  // B's second expert differs from the counts the plan was made from
  const ExchangeFanout f(t.plan, &t.record, t.model, TokenCopies::per_gpu, 2);
  CHECK_FALSE(f.exact());
  CHECK(tokens_to(f.gpu_legs(0), 0, 2) == doctest::Approx(1.875));
}

TEST_CASE("group-limited routing: a token reaches only the GPUs of its groups") {
  // 4 GPUs in 2 nodes, 8 experts in 4 groups of 2 (one group per GPU), top-2 within 1 group: every
  // token of rank 0 takes both experts of one group. 4 tokens, one expert slot each per expert.
  HardwareSpec hw = test::simple_hardware(2, 2);
  hw.ep_backend.internode_route = "rail_forward";
  ModelSpec model = test::simple_model(8, 2);
  model.routing.groups = 4;
  model.routing.groups_per_token = 1;
  const TraceRecord record = test::record_of({{1, 1, 1, 1, 1, 1, 1, 1}, {0, 0, 0, 0, 0, 0, 0, 0},
                                              {0, 0, 0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0, 0, 0}});
  const Plan plan = StaticEp().plan(record, test::context_for(model, hw));
  const ExchangeFanout f(plan, &record, model, TokenCopies::per_node, 2);
  // Each group holds a quarter of the slots: q = min(1, 1 x 1/4) = 1/4 of the tokens pick it and put
  // both slots in it, so each GPU receives exactly 4 x 1/4 = 1 token (independent slots would say
  // 4 (1 - (3/4)^2) = 1.75).
  for (int gpu = 1; gpu < 4; ++gpu) CHECK(tokens_to(f.gpu_legs(0), 0, gpu) == doctest::Approx(1.0));
  // Node 1 holds groups 2 and 3: 4 (1 - (1 - 1/4)^2) = 1.75 under the rule's independent groups, raised
  // to the bound A / K = 4 / 2 = 2 (a token puts at most K slots there), which is exact here.
  CHECK(tokens_to(f.node_legs(0), 0, 1) == doctest::Approx(2.0));
}

TEST_CASE("routes listed source by source and in any other order give the same expected copies") {
  // A plan listing its routes source by source is read one source at a time; any other order takes the
  // bucketed path. Assignments are whole numbers, so every sum is exact in any order and the two must
  // agree to the bit. 4 nodes x 2 GPUs, 16 experts, top-4, grouped routing on one case.
  HardwareSpec hw = test::simple_hardware(4, 2);
  hw.ep_backend.internode_route = "rail_forward";
  for (const bool grouped : {false, true}) {
    ModelSpec model = test::simple_model(16, 4);
    if (grouped) {
      model.routing.groups = 4;
      model.routing.groups_per_token = 2;
    }
    std::vector<std::vector<std::uint32_t>> rows(8, std::vector<std::uint32_t>(16));
    std::uint32_t x = 12345;
    for (auto& row : rows)
      for (std::uint32_t& c : row) c = (x = x * 1103515245u + 12345u) >> 28;  // 0 to 15
    const TraceRecord record = test::record_of(rows);
    const Plan ordered = StaticEp().plan(record, test::context_for(model, hw));
    for (std::size_t i = 1; i < ordered.routes.size(); ++i)
      REQUIRE(ordered.routes[i - 1].src_rank <= ordered.routes[i].src_rank);
    Plan reversed = ordered;
    std::reverse(reversed.routes.begin(), reversed.routes.end());
    const ExchangeFanout a(ordered, nullptr, model, TokenCopies::per_node, 2);
    const ExchangeFanout b(reversed, nullptr, model, TokenCopies::per_node, 2);
    for (const auto& [legs_a, legs_b] : {std::pair{a.gpu_legs(0), b.gpu_legs(0)}, std::pair{a.node_legs(0), b.node_legs(0)}}) {
      REQUIRE(legs_a.size() == legs_b.size());
      CHECK(!legs_a.empty());
      for (std::size_t i = 0; i < legs_a.size(); ++i) {
        CHECK(legs_a[i].src == legs_b[i].src);
        CHECK(legs_a[i].dst == legs_b[i].dst);
        CHECK(legs_a[i].tokens == legs_b[i].tokens);
      }
    }
  }
}

TEST_CASE("every leg of a wide source follows the rule to the bit, counts repeated or not") {
  // 16 GPUs, 512 experts (32 per GPU), top-8: a source's legs repeat a few counts, which the rule
  // works out once per source, and one count of 600 and more is past what it remembers. Each leg
  // must equal n_s (1 - (1 - A / (n_s K))^K), clamped to [A / K, min(A, n_s)], computed here the
  // same way.
  const HardwareSpec hw = test::simple_hardware(1, 16);
  const ModelSpec model = test::simple_model(512, 8);
  std::vector<std::vector<std::uint32_t>> rows(16, std::vector<std::uint32_t>(512));
  std::uint32_t x = 7;
  for (std::size_t s = 0; s < rows.size(); ++s)
    for (std::uint32_t& c : rows[s]) c = s == 3 ? 700 : ((x = x * 1103515245u + 12345u) >> 29);  // 0 to 7
  const TraceRecord record = test::record_of(rows);
  const Plan plan = StaticEp().plan(record, test::context_for(model, hw));
  const ExchangeFanout f(plan, nullptr, model, TokenCopies::per_gpu, 16);
  std::vector<std::vector<double>> to(16, std::vector<double>(16, 0.0));
  std::vector<double> total(16, 0.0);
  for (const TokenRoute& r : plan.routes) {
    total[r.src_rank] += static_cast<double>(r.tokens);
    to[r.src_rank][plan.instances[r.instance].gpu] += static_cast<double>(r.tokens);
  }
  std::size_t checked = 0;
  for (const LegTokens& leg : f.gpu_legs(0)) {
    const double k = 8;
    const double a = to[leg.src][leg.dst];
    const double tokens = total[leg.src] / k;
    const double in_group = 1.0 - std::pow(std::max(0.0, 1.0 - a / total[leg.src] / 1.0), k * 1.0 / 1.0);
    const double missed = 1.0 - 1.0 * in_group;
    CHECK(leg.tokens == std::clamp(tokens * (1.0 - missed), a / k, std::min(a, tokens)));
    ++checked;
  }
  CHECK(checked == 16 * 15);
}

TEST_CASE("every leg of a wide source under group-limited routing follows the rule to the bit") {
  // The same 16 GPUs, 512 experts and top-8, in 32 groups of 16 experts, 4 groups a token, placed
  // interleaved (expert e on GPU e mod 16): every group has one expert on each GPU, so a leg
  // multiplies 32 groups' terms, each over a part of its group. A source's groups have shares of
  // their own, and a count that repeats across sources has another term in each: what the rule
  // remembers for one source must not serve the next. With s's group g holding a_g of its slots, q_g =
  // min(1, 4 a_g), and A_dg of its slots on d's experts of g, a token misses d with probability
  // prod_g (1 - q_g (1 - (1 - A_dg / (T a_g))^(8 a_g / q_g))) (T: s's slots), and the leg is
  // n_s (1 - that), clamped to [A / 8, min(A, n_s)]: computed here the same way.
  const HardwareSpec hw = test::simple_hardware(1, 16);
  ModelSpec model = test::simple_model(512, 8);
  model.routing.groups = 32;
  model.routing.groups_per_token = 4;
  std::vector<std::vector<std::uint32_t>> rows(16, std::vector<std::uint32_t>(512));
  std::uint32_t x = 11;
  for (std::size_t s = 0; s < rows.size(); ++s)
    for (std::uint32_t& c : rows[s]) c = s == 3 ? 700 : ((x = x * 1103515245u + 12345u) >> 29);  // 0 to 7
  const TraceRecord record = test::record_of(rows);
  const Plan plan = StaticEp().plan(record, test::context_for(model, hw, Placement::interleaved));
  REQUIRE(plan.instances[17].gpu == 1);
  const ExchangeFanout f(plan, nullptr, model, TokenCopies::per_gpu, 16);
  constexpr int kGroups = 32;
  // Slots from each source: in all, per group, and per (target, group).
  std::vector<double> total(16, 0.0);
  std::vector<std::vector<double>> in_group(16, std::vector<double>(kGroups, 0.0));
  std::vector<std::vector<std::vector<double>>> to(16, std::vector<std::vector<double>>(16, std::vector<double>(kGroups, 0.0)));
  for (const TokenRoute& r : plan.routes) {
    const int expert = plan.instances[r.instance].expert;
    const int g = expert / 16;
    total[r.src_rank] += static_cast<double>(r.tokens);
    in_group[r.src_rank][g] += static_cast<double>(r.tokens);
    to[r.src_rank][plan.instances[r.instance].gpu][g] += static_cast<double>(r.tokens);
  }
  std::size_t checked = 0;
  for (const LegTokens& leg : f.gpu_legs(0)) {
    const double k = 8;
    const double t = total[leg.src];
    double missed = 1.0;
    double assigned = 0;
    for (int g = 0; g < kGroups; ++g) {
      const double a = to[leg.src][leg.dst][g];
      if (a == 0) continue;
      const double share = in_group[leg.src][g] / t;
      const double pick = std::min(1.0, 4 * share);
      const double reach = 1.0 - std::pow(std::max(0.0, 1.0 - a / t / share), k * share / pick);
      missed *= 1.0 - pick * reach;
      assigned += a;
    }
    const double tokens = t / k;
    CHECK(leg.tokens == std::clamp(tokens * (1.0 - missed), assigned / k, std::min(assigned, tokens)));
    ++checked;
  }
  CHECK(checked == 16 * 15);
}

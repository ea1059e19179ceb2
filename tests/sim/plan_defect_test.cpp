// find_plan_defect on a plan of many routes: every route defect is found, at the first defective
// route, whatever the value (boundaries, the most negative and most positive ints), and values just
// inside the bounds pass. A faster check of the routes (a wide plan has millions) must keep these.
#include <doctest/doctest.h>

#include <climits>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "sim/balancers/static_ep.hpp"
#include "sim/plan/plan.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

/// Static EP on 2 nodes of 2 GPUs, 8 experts, top-2: a valid plan with a few dozen routes.
Plan valid_plan() {
  const HardwareSpec hw = test::simple_hardware(2, 2);
  const ModelSpec model = test::simple_model(8, 2);
  std::vector<std::vector<std::uint32_t>> rows(4, std::vector<std::uint32_t>(8));
  for (std::size_t s = 0; s < rows.size(); ++s)
    for (std::size_t e = 0; e < 8; ++e) rows[s][e] = static_cast<std::uint32_t>(1 + (s * 8 + e) % 5);
  return StaticEp().plan(test::record_of(rows), test::context_for(model, hw));
}

}  // namespace

TEST_CASE("find_plan_defect finds every route defect, at the first defective route") {
  const Plan base = valid_plan();
  REQUIRE(base.routes.size() >= 20);
  REQUIRE_FALSE(find_plan_defect(base, 8, 2).has_value());
  struct Case {
    const char* field;
    std::function<void(TokenRoute&)> corrupt;
  };
  const std::vector<Case> bad = {
      {"src_rank", [](TokenRoute& r) { r.src_rank = 4; }},
      {"src_rank", [](TokenRoute& r) { r.src_rank = -1; }},
      {"src_rank", [](TokenRoute& r) { r.src_rank = INT_MIN; }},
      {"instance", [](TokenRoute& r) { r.instance = 8; }},
      {"instance", [](TokenRoute& r) { r.instance = -1; }},
      {"instance", [](TokenRoute& r) { r.instance = INT_MAX; }},
      {"tokens", [](TokenRoute& r) { r.tokens = -1; }},
      {"tokens", [](TokenRoute& r) { r.tokens = INT64_MIN; }},
      {"tokens", [](TokenRoute& r) { r.tokens = kMaxPlanTokens + 1; }},
      {"via_gpu", [](TokenRoute& r) { r.via_gpu = -2; }},
      {"via_gpu", [](TokenRoute& r) { r.via_gpu = 4; }},
      {"via_gpu", [](TokenRoute& r) { r.via_gpu = INT_MAX; }},
      {"via_gpu", [](TokenRoute& r) { r.via_gpu = INT_MIN; }},
      {"stage", [](TokenRoute& r) { r.stage = 1; }},
      {"stage", [](TokenRoute& r) { r.stage = -2; }},
      {"stage", [](TokenRoute& r) { r.stage = INT_MAX; }},
      {"stage", [](TokenRoute& r) { r.stage = -1; }},  // an EP route cannot be stage -1
      {"carrier", [](TokenRoute& r) { r.carrier = Carrier::none; }},
  };
  for (const Case& c : bad) {
    for (const std::size_t k : {std::size_t{0}, base.routes.size() / 2, base.routes.size() - 1}) {
      Plan plan = base;
      // The route must change GPU for the carrier and stage cases to be defects: take the first
      // such route from k on.
      std::size_t at = k;
      const auto moves = [&](const TokenRoute& r) { return plan.instances[r.instance].gpu != r.src_rank; };
      while (at < plan.routes.size() && !moves(plan.routes[at])) ++at;
      if (at == plan.routes.size()) continue;
      c.corrupt(plan.routes[at]);
      const auto defect = find_plan_defect(plan, 8, 2);
      CAPTURE(c.field);
      CAPTURE(at);
      REQUIRE(defect.has_value());
      CHECK(defect->place == "routes[" + std::to_string(at) + "]." + c.field);
    }
  }
  // A Copy Engine route that leaves its node: a route from GPU 0 to an instance on node 1.
  {
    Plan plan = base;
    std::size_t at = 0;
    while (plan.instances[plan.routes[at].instance].gpu / 2 == plan.routes[at].src_rank / 2) ++at;
    plan.routes[at].carrier = Carrier::copy_engine;
    const auto defect = find_plan_defect(plan, 8, 2);
    REQUIRE(defect.has_value());
    CHECK(defect->place == "routes[" + std::to_string(at) + "].carrier");
  }
  // Tokens that each fit but together pass 2^40: the route where the total passes it is named.
  {
    Plan plan = base;
    plan.routes[3].tokens = kMaxPlanTokens / 2 + 1;
    plan.routes[7].tokens = kMaxPlanTokens / 2;
    const auto defect = find_plan_defect(plan, 8, 2);
    REQUIRE(defect.has_value());
    CHECK(defect->place == "routes[7].tokens");
  }
}

TEST_CASE("find_plan_defect passes route values at the edge of their bounds") {
  Plan plan = valid_plan();
  plan.routes[0].tokens = 0;
  std::int64_t total = 0;
  for (const TokenRoute& r : plan.routes) total += r.tokens;
  plan.routes[1].tokens += kMaxPlanTokens - total;  // the total exactly 2^40
  // A route computed where it is: stage -1, carrier none, no via GPU, to its own GPU's instance.
  std::size_t own = 0;
  while (plan.instances[plan.routes[own].instance].gpu != plan.routes[own].src_rank) ++own;
  plan.routes[own].stage = -1;
  plan.routes[own].carrier = Carrier::none;
  // A two-phase route through a GPU of the destination's node: via_gpu at the last GPU.
  std::size_t far = 0;
  while (plan.instances[plan.routes[far].instance].gpu != 3 || plan.routes[far].src_rank == 3) ++far;
  plan.routes[far].via_gpu = 3;
  plan.routes[far].carrier = Carrier::none;  // the last hop starts on its own GPU
  CHECK_FALSE(find_plan_defect(plan, 8, 2).has_value());
}

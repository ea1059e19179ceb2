#include <doctest/doctest.h>

#include "sim/core/input_error.hpp"
#include "sim/plan/plan_json.hpp"

using namespace epsim;

TEST_CASE("a Plan survives JSON both ways, every field") {
  Plan plan;
  plan.balancer = "hand";
  plan.step = 3;
  plan.micro_batch = 2;
  plan.layer = 1;
  plan.num_gpus = 2;
  plan.exchange_stages = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {0, 1, InstanceKind::dynamic_expert},
                    {1, 1, InstanceKind::replica}};
  plan.routes = {{0, 0, 5, Carrier::none, -1, 0}, {1, 1, 7, Carrier::copy_engine, 0, 1},
                 {0, 2, 9, Carrier::ep_backend, -1, -1}};
  plan.transfers = {{TransferKind::gradients, PassKind::backward, 1, 1, 0, 1234, Carrier::copy_engine}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1, 2}}}};
  plan.planner = {PlannerSite::host_cpu, 3'000'000, PlannerStart::after_dispatch, 64};

  const Plan back = plan_from_json(plan_to_json(plan), "test");
  CHECK(plan_to_json(back) == plan_to_json(plan));
  CHECK(back.routes[1].via_gpu == 0);
  CHECK(back.routes[1].stage == 1);
  CHECK(back.routes[2].stage == -1);
  CHECK(back.planner.start == PlannerStart::after_dispatch);
  CHECK(back.gemm_order[1][0].instances == std::vector<int>{1, 2});
}

TEST_CASE("a plan of another version or with a bad field is refused with its place") {
  Plan plan;
  plan.num_gpus = 1;
  plan.gemm_order = {{}};
  nlohmann::json j = plan_to_json(plan);
  j["version"] = 99;
  CHECK_THROWS_AS(plan_from_json(j, "plans.jsonl:1"), InputError);
  j = plan_to_json(plan);
  j["planner"]["site"] = "moon";
  try {
    plan_from_json(j, "plans.jsonl:4");
    FAIL("accepted");
  } catch (const InputError& e) {
    CHECK(std::string(e.what()).find("plans.jsonl:4") != std::string::npos);
    CHECK(std::string(e.what()).find("moon") != std::string::npos);
  }
}

// The hw runner's plan loader (`epsim-hw run PLANS.jsonl`) reads through the same reader as
// `epsim validate`, so a plan file that would make the runner index outside its lists is refused
// before any task is extracted.
#include <doctest/doctest.h>

#include <fstream>
#include <stdexcept>
#include <string>

#include "hw/host/plan_tasks.hpp"
#include "sim/core/input_error.hpp"
#include "sim/plan/plan_json.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

namespace {

/// GPU 0 computes its own 5 tokens; rank 0 sends 3 tokens to GPU 1 on the EP backend.
Plan small_plan(std::uint32_t micro_batch) {
  Plan plan;
  plan.balancer = "hand";
  plan.micro_batch = micro_batch;
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert}};
  plan.routes = {{0, 0, 5, Carrier::none, -1, 0}, {0, 1, 3, Carrier::ep_backend, -1, 0}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1}}}};
  return plan;
}

std::string write_plans(const std::string& name, const std::vector<nlohmann::json>& plans) {
  const std::string path = (test::scratch_dir("hw_plan_loader") / name).string();
  std::ofstream out(path);
  for (const auto& p : plans) out << p.dump() << "\n";
  return path;
}

}  // namespace

TEST_CASE("epsim-hw's plan loader refuses a route to an instance the plan does not have") {
  // routes[1].instance = 7 made Plan::tokens_per_instance write past the end of its vector.
  nlohmann::json bad = plan_to_json(small_plan(1));
  bad["routes"][1]["instance"] = 7;
  const std::string path = write_plans("missing_instance.jsonl", {plan_to_json(small_plan(0)), bad});
  CHECK_THROWS_WITH_AS(hw::load_gpu_tasks(path, 0, 0, 64, 2),
                       (path + ":line 2, routes[1].instance: value 7 outside [0, 2) (the plan's instances)").c_str(),
                       InputError);
}

TEST_CASE("epsim-hw's plan loader refuses what epsim validate refuses: fractions, bad GEMM lists, repeats") {
  nlohmann::json fraction = plan_to_json(small_plan(0));
  fraction["routes"][0]["tokens"] = 2.5;
  std::string path = write_plans("fraction.jsonl", {fraction});
  CHECK_THROWS_WITH_AS(hw::load_gpu_tasks(path, 0, 0, 64, 2),
                       (path + ":line 1, routes[0].tokens: expected an integer, found a fraction: 2.5").c_str(),
                       InputError);
  nlohmann::json gemm = plan_to_json(small_plan(0));
  gemm["gemm_order"][1][0][0] = 0;  // GPU 1 computing GPU 0's instance
  path = write_plans("gemm.jsonl", {gemm});
  CHECK_THROWS_WITH_AS(hw::load_gpu_tasks(path, 0, 0, 64, 2),
                       (path + ":line 1, gemm_order[1][0][0]: instance 0 lives on GPU 0, not on GPU 1").c_str(),
                       InputError);
  path = write_plans("repeat.jsonl", {plan_to_json(small_plan(0)), plan_to_json(small_plan(0))});
  CHECK_THROWS_WITH_AS(hw::load_gpu_tasks(path, 0, 0, 64, 2),
                       (path + ":line 2: second plan for step 0, micro_batch 0, layer 0").c_str(), InputError);
}

TEST_CASE("epsim-hw's plan loader gives the runner one GPU's tasks of each checked plan, up to its limit") {
  const std::string path = write_plans("good.jsonl", {plan_to_json(small_plan(0)), plan_to_json(small_plan(1))});
  const auto all = hw::load_gpu_tasks(path, 0, 1, 64, 2);
  REQUIRE(all.size() == 2);
  const auto first = hw::load_gpu_tasks(path, 1, 1, 64, 2);
  REQUIRE(first.size() == 1);
  // Each plan's tasks, as extract_gpu_tasks makes them from the plan itself, in file order.
  for (std::uint32_t mb = 0; mb < 2; ++mb) {
    const hw::GpuTasks expected = hw::extract_gpu_tasks(small_plan(mb), 1, 64, 2);
    const hw::GpuTasks& loaded = all[mb];
    CHECK(loaded.micro_batch == mb);
    REQUIRE(loaded.gemms.size() == expected.gemms.size());
    for (std::size_t g = 0; g < loaded.gemms.size(); ++g) CHECK(loaded.gemms[g].tokens == expected.gemms[g].tokens);
    CHECK(loaded.copies.size() == expected.copies.size());
  }
  const hw::GpuTasks& tasks = first[0];
  REQUIRE(tasks.gemms.size() == 3);  // forward, data gradient, weight gradient of GPU 1's one group
  CHECK(tasks.gemms[0].tokens == std::vector<std::int64_t>{3});
  // A GPU the plans do not have is refused, as extract_gpu_tasks refuses it.
  CHECK_THROWS_AS(hw::load_gpu_tasks(path, 0, 2, 64, 2), std::invalid_argument);
}

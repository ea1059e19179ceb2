// The order in which the single-GPU runner's tasks (hw/host/plan_tasks.hpp) are built follows the
// simulator's: backward_first groups' backward first, the copies that wait for those GEMMs with them,
// and the Copy Engine weights that leave at the layer's start ahead of those that wait for the planner.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hw/host/plan_tasks.hpp"

using namespace epsim;
using namespace epsim::hw;

namespace {

// Two GPUs. GPU 1 computes expert 1 (instance 1, 8 tokens), a shadow of expert 0 (instance 2, 3
// tokens) and expert 2 (instance 3, 5 tokens from rank 0 by Copy Engine) in that forward order; the
// shadow's group may run its backward first, and its 100 gradient bytes go back by Copy Engine.
Plan shadow_plan(bool backward_first, TransferStart gradient_start) {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {0, 1, InstanceKind::dynamic_expert}, {2, 1, InstanceKind::static_expert}};
  plan.routes = {{0, 0, 4, Carrier::none, -1, 0}, {1, 1, 8, Carrier::none, -1, 0},
                 {1, 2, 3, Carrier::none, -1, -1}, {0, 3, 5, Carrier::copy_engine, -1, 0}};
  plan.transfers = {{TransferKind::gradients, PassKind::backward, Carrier::copy_engine, gradient_start, 2, 1, 0, 100}};
  GemmGroup shadow{1, {2}};
  shadow.backward_first = backward_first;
  plan.gemm_order = {{{0, {0}}}, {{1, {1}}, shadow, {1, {3}}}};
  validate_plan(plan, 3, 2);
  return plan;
}

std::vector<std::string> names(const GpuTasks& t) {
  std::vector<std::string> out;
  for (const auto& g : t.gemms) out.push_back(g.name + " " + std::to_string(g.instances.at(0)));
  return out;
}

}  // namespace

TEST_CASE("the runner's backward runs a backward_first group's data and weight gradient before the others") {
  const GpuTasks plain = extract_gpu_tasks(shadow_plan(false, TransferStart::after_dispatch), 1, 16, 2);
  // Named by group (g0..g2 of GPU 1's gemm_order) and, here, by first instance.
  CHECK(names(plain) == std::vector<std::string>{"gemm fwd g0 1", "gemm fwd g1 2", "gemm fwd g2 3", "gemm dgrad g0 1",
                                                 "gemm dgrad g1 2", "gemm dgrad g2 3", "gemm wgrad g0 1",
                                                 "gemm wgrad g1 2", "gemm wgrad g2 3"});
  const GpuTasks first = extract_gpu_tasks(shadow_plan(true, TransferStart::after_wgrad), 1, 16, 2);
  CHECK(names(first) == std::vector<std::string>{"gemm fwd g0 1", "gemm fwd g1 2", "gemm fwd g2 3", "gemm dgrad g1 2",
                                                 "gemm wgrad g1 2", "gemm dgrad g0 1", "gemm dgrad g2 3",
                                                 "gemm wgrad g0 1", "gemm wgrad g2 3"});
  // Backward copies: the input gradients of expert 2's Copy Engine route after its data gradient, the
  // shadow's gradients after its weight gradient; in the order those GEMMs end.
  auto backward_copies = [](const GpuTasks& t) {
    std::vector<std::pair<std::string, int>> out;
    for (const auto& c : t.copies)
      if (c.pass == Pass::backward) out.push_back({c.name, c.after_gemm});
    return out;
  };
  using Copies = std::vector<std::pair<std::string, int>>;
  CHECK(backward_copies(plain) == Copies{{"input grads", 5}, {"grads e0", 7}});
  CHECK(backward_copies(first) == Copies{{"grads e0", 4}, {"input grads", 6}});
}

TEST_CASE("the runner's Copy Engine weights: layer-start ones first, then those after the planner, then tokens") {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {0, 1, InstanceKind::dynamic_expert}, {2, 1, InstanceKind::static_expert}};
  plan.routes = {{0, 0, 4, Carrier::none, -1, 0}, {0, 2, 3, Carrier::copy_engine, -1, 0},
                 {1, 1, 2, Carrier::none, -1, 0}, {1, 3, 2, Carrier::none, -1, 0}};
  // Listed late first: after the planner (expert 0), at the layer's start (expert 2, expert 0 again).
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::after_dispatch, 2,
                     0, 1, 10},
                    {TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::before_dispatch, 2,
                     0, 1, 20},
                    {TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::prefetch, 2, 0, 1,
                     30}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1, 2, 3}}}};
  validate_plan(plan, 3, 2);
  const GpuTasks g0 = extract_gpu_tasks(plan, 0, 16, 2);
  std::vector<std::pair<std::string, std::int64_t>> copies;
  for (const auto& c : g0.copies) copies.push_back({c.name, c.bytes});
  // 3 tokens * 16 * 2 bytes = 96 bytes of tokens, after every weight copy.
  CHECK(copies == std::vector<std::pair<std::string, std::int64_t>>{
                      {"weights e0", 20}, {"weights e0", 30}, {"weights e0", 10}, {"tokens", 96}});
}

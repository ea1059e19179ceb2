// The plan the validation tests share and its simulated timeline.
#pragma once

#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

// The hand-built plan of these tests: FEPLB's two-phase shape on the simple 2-GPU cluster
// (layer_run_test's worked example, plus local tokens for expert 1) with a shared expert, so that its timeline holds
// every task kind.
namespace epsim::test {

inline Plan validation_plan() {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {
      {0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert}, {0, 1, InstanceKind::dynamic_expert}};
  plan.routes = {
      {0, 0, 100, Carrier::none, -1, 0}, {1, 1, 50, Carrier::none, -1, 0}, {1, 2, 100, Carrier::copy_engine, 0, 0}};
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::after_dispatch, 2,
                     0, 1, 1'000'000},
                    {TransferKind::gradients, PassKind::backward, Carrier::copy_engine, TransferStart::after_dispatch,
                     2, 1, 0, 1'000'000}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1}}, {1, {2}}}};
  plan.planner = {PlannerSite::host_cpu, 10 * kPsPerUs, PlannerStart::after_dispatch, 16};
  return plan;
}

/// The simulator's timeline of `plan` on simple_hardware with simple_model(2, 1, 1), both passes.
inline std::vector<TimelineEvent> validation_events(const Plan& plan) {
  return simulate_layer(simple_hardware(), simple_model(2, 1, 1), plan, {100, 150}, true).timeline.events;
}

}  // namespace epsim::test

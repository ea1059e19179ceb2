// The order of a GPU's grouped GEMMs: groups launched on arrival (GemmGroup::on_arrival) and groups
// that wait for the planner (GemmGroup::after_planner), worked by hand on the round-number cluster of
// simple_cluster.hpp (2 us of GEMM per token, NVLink 0.1 byte/ps + 1 us, Copy Engine 0.05 byte/ps +
// 2 us per copy, 1000 bytes per token).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

constexpr Time_ps us = kPsPerUs;

// Two GPUs in one node. GPU 1 holds instance 1 (expert 1, rank 1's 100 tokens), instance 3 (expert 3,
// rank 1's 100 tokens) and instance 2, a copy of expert 0 computing 50 tokens rank 0 sends by EP
// (1.5 us), whose weights the Copy Engine brings from the layer's start: 2 + 20 us, in at 22 us.
// GPU 0 holds instance 0 (expert 0, rank 0's 100 tokens). `gpu1`: GPU 1's GEMM groups.
Plan late_weights_plan(std::vector<GemmGroup> gpu1) {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {0, 1, InstanceKind::dynamic_expert}, {3, 1, InstanceKind::static_expert}};
  plan.routes = {{0, 0, 100, Carrier::none, -1, 0}, {1, 1, 100, Carrier::none, -1, 0},
                 {1, 3, 100, Carrier::none, -1, 0}, {0, 2, 50, Carrier::ep_backend, -1, 0}};
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::before_dispatch, 2,
                     0, 1, 1'000'000}};
  plan.gemm_order = {{{0, {0}}}, std::move(gpu1)};
  validate_plan(plan, 4, 2);
  return plan;
}

GemmGroup on_arrival(int gpu, int instance) {
  GemmGroup g{gpu, {instance}};
  g.on_arrival = true;
  return g;
}

/// (start, end) of `gpu`'s kernels named `name`, in the order they ran.
std::vector<std::pair<Time_ps, Time_ps>> kernels(const LayerResult& r, int gpu, const std::string& name) {
  std::vector<std::pair<Time_ps, Time_ps>> out;
  for (const TimelineEvent& e : r.timeline.events)
    if (e.gpu == gpu && e.track == Track::compute && e.name == name) out.push_back({e.start_ps, e.end_ps});
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<Time_ps> durations(const std::vector<std::pair<Time_ps, Time_ps>>& spans) {
  std::vector<Time_ps> out;
  for (const auto& [start, end] : spans) out.push_back(end - start);
  return out;
}

}  // namespace

TEST_CASE("an on_arrival group goes ahead of an unstarted earlier group at the next kernel boundary") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(4);
  // Plan order on GPU 1: expert 1, expert 3, the copy (on arrival). Its weights arrive at 22 us while
  // expert 1 runs (1.5 to 201.5 us): no preemption, but at 201.5 it goes ahead of expert 3.
  const LayerResult r = simulate_layer(hw, model, late_weights_plan({{1, {1}}, {1, {3}}, on_arrival(1, 2)}),
                                       {150, 200}, false);
  const auto ran = kernels(r, 1, "gemm fwd");
  REQUIRE(ran.size() == 3);
  CHECK(ran[0] == std::make_pair(1 * us + us / 2, 201 * us + us / 2));    // expert 1
  CHECK(ran[1] == std::make_pair(201 * us + us / 2, 301 * us + us / 2));  // the copy's 50 tokens
  CHECK(ran[2] == std::make_pair(301 * us + us / 2, 501 * us + us / 2));  // expert 3
  // Without the mark it waits for its turn, last.
  const LayerResult in_order =
      simulate_layer(hw, model, late_weights_plan({{1, {1}}, {1, {3}}, {1, {2}}}), {150, 200}, false);
  CHECK(durations(kernels(in_order, 1, "gemm fwd")) == std::vector<Time_ps>{200 * us, 200 * us, 100 * us});
}

TEST_CASE("an on_arrival group whose inputs are not in does not hold up the groups listed after it") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(4);
  // The copy is listed first but its weights arrive at 22 us: expert 1 runs from 1.5 us, then the copy
  // (201.5 to 301.5), then expert 3 (to 501.5).
  const LayerResult r = simulate_layer(hw, model, late_weights_plan({on_arrival(1, 2), {1, {1}}, {1, {3}}}),
                                       {150, 200}, false);
  const auto ran = kernels(r, 1, "gemm fwd");
  REQUIRE(ran.size() == 3);
  CHECK(ran[0] == std::make_pair(1 * us + us / 2, 201 * us + us / 2));
  CHECK(ran[1] == std::make_pair(201 * us + us / 2, 301 * us + us / 2));
  CHECK(r.gemm_finish_fwd_ps[1] == 501 * us + us / 2);
  // In plan order the copy holds the stream until 22 us: 122, 322, 522 us.
  const LayerResult in_order =
      simulate_layer(hw, model, late_weights_plan({{1, {2}}, {1, {1}}, {1, {3}}}), {150, 200}, false);
  CHECK(kernels(in_order, 1, "gemm fwd").front() == std::make_pair(22 * us, 122 * us));
  CHECK(in_order.gemm_finish_fwd_ps[1] == 522 * us);
}

TEST_CASE("the backward runs data and weight gradients in the forward's actual order") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(4);
  const LayerResult r = simulate_layer(hw, model, late_weights_plan({{1, {1}}, {1, {3}}, on_arrival(1, 2)}),
                                       {150, 200}, true);
  // The forward ran expert 1 (200 us), the copy (100 us), expert 3 (200 us); the data gradients follow
  // that order with nothing else on GPU 1's SMs (the gradient combine waits for all three).
  CHECK(durations(kernels(r, 1, "gemm dgrad")) == std::vector<Time_ps>{200 * us, 100 * us, 200 * us});
  const auto wgrads = kernels(r, 1, "gemm wgrad");
  REQUIRE(wgrads.size() == 3);
  // Weight gradients in the same order; the first overlaps the gradient combine's kernel (20 of 100
  // SMs for 1.5 us: 0.3 us lost).
  CHECK(wgrads[0].second - wgrads[0].first == 200 * us + 300'000);
  CHECK(wgrads[1].second - wgrads[1].first == 100 * us);
  CHECK(wgrads[2].second - wgrads[2].first == 200 * us);
}

namespace {

// FEPLB's split expert on two GPUs: GPU 0 computes expert 0's home share (50 tokens from rank 1, by
// EP in 1.5 us), listed first, then expert 2 (rank 0's 100 tokens); GPU 1 computes expert 1.
Plan split_home_plan(bool after_planner, PlannerStart planner_start) {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {2, 0, InstanceKind::static_expert}};
  plan.routes = {{1, 0, 50, Carrier::ep_backend, -1, 0}, {0, 2, 100, Carrier::none, -1, 0},
                 {1, 1, 100, Carrier::none, -1, 0}};
  GemmGroup home{0, {0}};
  home.after_planner = after_planner;
  plan.gemm_order = {{home, {0, {2}}}, {{1, {1}}}};
  plan.planner = {PlannerSite::host_cpu, 10 * kPsPerUs, planner_start, 16};
  validate_plan(plan, 3, 2);
  return plan;
}

}  // namespace

TEST_CASE("an after_planner group starts no earlier than its node's planner ends") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(3);
  // Dispatch done at 1.5 us on both GPUs; counts to host 2 us + 16 bytes at 0.05 B/ps (320 ps); planner
  // 10 us: 13.50032 us. The home share runs from there (100 us), then expert 2 (200 us).
  const LayerResult r = simulate_layer(hw, model, split_home_plan(true, PlannerStart::after_dispatch), {100, 150}, false);
  CHECK(kernels(r, 0, "gemm fwd").front().first == 13 * us + us / 2 + 320);
  CHECK(r.gemm_finish_fwd_ps[0] == 313 * us + us / 2 + 320);
  // Unmarked, it starts as soon as its tokens are in, before the planner has decided its share.
  const LayerResult early =
      simulate_layer(hw, model, split_home_plan(false, PlannerStart::after_dispatch), {100, 150}, false);
  CHECK(kernels(early, 0, "gemm fwd").front().first == 1 * us + us / 2);
  // With the planner before the dispatch everything already waits for it (10 us, then 1.5 us of
  // dispatch): the mark changes nothing.
  const LayerResult before = simulate_layer(hw, model, split_home_plan(true, PlannerStart::before_dispatch), {100, 150}, false);
  const LayerResult before_unmarked =
      simulate_layer(hw, model, split_home_plan(false, PlannerStart::before_dispatch), {100, 150}, false);
  CHECK(kernels(before, 0, "gemm fwd").front().first == 11 * us + us / 2);
  CHECK(before.forward_ps == before_unmarked.forward_ps);
}

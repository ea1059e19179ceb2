// The backward's order and its weight and gradient moves: groups whose whole backward runs first
// (GemmGroup::backward_first), gradients reduced right after their weight-gradient GEMM on a stream of
// their own (TransferStart::after_wgrad), and weights restored before the gradient dispatch (backward
// transfers with start before_dispatch). Worked by hand on the round-number cluster of
// simple_cluster.hpp: 2 us of GEMM per token, NVLink 0.1 byte/ps with 1 us latency, 1000 bytes per
// token, 100 SMs of which an EP-backend kernel holds 20 (a GEMM beside one runs at 80%).
#include <doctest/doctest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "sim/plan/plan_json.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

constexpr Time_ps us = kPsPerUs;

// FasterMoE's shape on two GPUs, every token local. Instance 0: expert 0 on its owner GPU 0 (rank 0's
// 100 tokens); instance 1: expert 1 on GPU 1 (rank 1's 100 tokens); instance 2: a shadow of expert 0
// on GPU 1 (rank 1's 50 tokens). The shadow's 1e6 gradient bytes go back to the owner on the EP
// backend. With `fastermoe_backward` the shadow groups (instances 0 and 2) run their backward first
// and the gradients leave after_wgrad; without, the plan is the engine's default.
Plan shadow_plan(bool fastermoe_backward) {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {0, 1, InstanceKind::dynamic_expert}};
  plan.routes = {{0, 0, 100, Carrier::none, -1, -1}, {1, 1, 100, Carrier::none, -1, 0},
                 {1, 2, 50, Carrier::none, -1, -1}};
  plan.transfers = {{TransferKind::gradients, PassKind::backward, Carrier::ep_backend,
                     fastermoe_backward ? TransferStart::after_wgrad : TransferStart::after_dispatch, 2, 1, 0,
                     1'000'000}};
  GemmGroup owner{0, {0}};
  GemmGroup shadow{1, {2}};
  owner.backward_first = shadow.backward_first = fastermoe_backward;
  plan.gemm_order = {{owner}, {{1, {1}}, shadow}};
  validate_plan(plan, 2, 2);
  return plan;
}

/// (start, end) of `gpu`'s events on `track` named `name`, in the order they ran.
std::vector<std::pair<Time_ps, Time_ps>> spans(const LayerResult& r, int gpu, Track track, const std::string& name) {
  std::vector<std::pair<Time_ps, Time_ps>> out;
  for (const TimelineEvent& e : r.timeline.events)
    if (e.gpu == gpu && e.track == track && e.name == name) out.push_back({e.start_ps, e.end_ps});
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("a backward_first group runs its whole backward first, and its after_wgrad reduce overlaps the rest") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(2);
  const LayerResult r = simulate_layer(hw, model, shadow_plan(true), {100, 150}, true);
  // Forward: nothing crosses a GPU; GPU 1 runs expert 1 (200 us) then the shadow (100 us): 300 us.
  REQUIRE(r.forward_ps == 300 * us);
  const Time_ps b = 300 * us;
  // GPU 1: the shadow's data gradient [B, B+100] and weight gradient [B+100, B+200], then expert 1's.
  const auto dgrads = spans(r, 1, Track::compute, "gemm dgrad");
  const auto wgrads = spans(r, 1, Track::compute, "gemm wgrad");
  REQUIRE(dgrads.size() == 2);
  REQUIRE(wgrads.size() == 2);
  CHECK(dgrads[0] == std::make_pair(b, b + 100 * us));
  CHECK(wgrads[0] == std::make_pair(b + 100 * us, b + 200 * us));
  // The reduce leaves GPU 1 at B+200: 1 us + 1e6 bytes at 0.1 B/ps = 11 us, on its own stream.
  const auto reduce = spans(r, 1, Track::comm_kernel, "grad reduce e0");
  REQUIRE(reduce.size() == 1);
  CHECK(reduce[0] == std::make_pair(b + 200 * us, b + 211 * us));
  // Expert 1's data gradient runs beside it from B+200, at 80% for 11 us (2.2 us lost), then its
  // weight gradient: B+602.2 us. The owner joins the reduce after its own weight gradient (B+400),
  // when the bytes are already in: it holds no SMs.
  CHECK(dgrads[1] == std::make_pair(b + 200 * us, b + 402 * us + 200'000));
  CHECK(wgrads[1] == std::make_pair(b + 402 * us + 200'000, b + 602 * us + 200'000));
  CHECK(spans(r, 0, Track::comm_kernel, "grad reduce e0").empty());
  CHECK(r.backward_ps == 602 * us + 200'000);
  CHECK(r.gradient_bytes == doctest::Approx(1e6));
}

TEST_CASE("without backward_first and after_wgrad the shadow's backward and its gradients come last") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(2);
  const LayerResult r = simulate_layer(hw, model, shadow_plan(false), {100, 150}, true);
  REQUIRE(r.forward_ps == 300 * us);
  const Time_ps b = 300 * us;
  // GPU 1: data gradients of expert 1 (200 us) and the shadow (100 us), weight gradients likewise:
  // B+600; only then the gradient collective on the communication stream, 11 us.
  const auto wgrads = spans(r, 1, Track::compute, "gemm wgrad");
  REQUIRE(wgrads.size() == 2);
  CHECK(wgrads[1] == std::make_pair(b + 500 * us, b + 600 * us));
  const auto gradients = spans(r, 1, Track::comm_kernel, "gradients");
  REQUIRE(gradients.size() == 1);
  CHECK(gradients[0] == std::make_pair(b + 600 * us, b + 611 * us));
  CHECK(r.backward_ps == 611 * us);
}

namespace {

// UltraEP's shape on two GPUs: instance 2 is a copy of expert 0 on GPU 1 computing 50 tokens rank 0
// sends by EP; its 1e6 weight bytes are synchronised before the dispatch, its 2e6 gradient bytes
// (FP32) go back after the gradient combine, and with `restore` its weights are synchronised again
// before the gradient dispatch.
Plan replica_plan(bool restore) {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {0, 1, InstanceKind::dynamic_expert}};
  plan.routes = {{0, 0, 100, Carrier::none, -1, 0}, {1, 1, 100, Carrier::none, -1, 0},
                 {0, 2, 50, Carrier::ep_backend, -1, 0}};
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::ep_backend, TransferStart::before_dispatch, 2,
                     0, 1, 1'000'000},
                    {TransferKind::gradients, PassKind::backward, Carrier::ep_backend, TransferStart::after_dispatch, 2,
                     1, 0, 2'000'000}};
  if (restore)
    plan.transfers.push_back({TransferKind::weights, PassKind::backward, Carrier::ep_backend,
                              TransferStart::before_dispatch, 2, 0, 1, 1'000'000});
  plan.gemm_order = {{{0, {0}}}, {{1, {1, 2}}}};
  validate_plan(plan, 2, 2);
  return plan;
}

}  // namespace

TEST_CASE("backward weights before the dispatch: a weights sync that the gradient dispatch waits for") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(2);
  const LayerResult with = simulate_layer(hw, model, replica_plan(true), {150, 100}, true);
  const LayerResult without = simulate_layer(hw, model, replica_plan(false), {150, 100}, true);
  // Forward: weights sync 11 us, dispatch 1.5 us, GPU 1's 150 tokens 300 us, combine 1.5 us.
  REQUIRE(with.forward_ps == 314 * us);
  REQUIRE(without.forward_ps == 314 * us);
  const Time_ps b = 314 * us;
  // The backward's weights sync runs first on both GPUs, 11 us, then the gradient dispatch 1.5 us.
  const auto sync = spans(with, 1, Track::comm_kernel, "weights sync");
  REQUIRE(sync.size() == 2);
  CHECK(sync[1] == std::make_pair(b, b + 11 * us));
  CHECK(spans(with, 1, Track::comm_kernel, "grad dispatch").at(0).first == b + 11 * us);
  // GPU 1's data gradient (300 us) starts once the gradients are in: B+12.5. Its gradient combine
  // (from B+312.5, 1.5 us) slows its weight gradient by 0.3 us: B+612.8. GPU 0's combine waits from
  // B+212.5 for GPU 1's outputs until B+314 (101.5 us at 80%: GPU 0's weight gradient ends B+432.8).
  // The gradients then leave GPU 1 at B+612.8: 1 us + 2e6 bytes at 0.1 B/ps = 21 us: B+633.8.
  CHECK(spans(with, 1, Track::compute, "gemm dgrad").at(0).first == b + 12 * us + 500'000);
  CHECK(with.backward_ps == 633 * us + 800'000);
  // Without the restore everything starts 11 us earlier.
  CHECK(with.backward_ps - without.backward_ps == 11 * us);
  CHECK(with.weight_bytes == doctest::Approx(2e6));
  CHECK(without.weight_bytes == doctest::Approx(1e6));
}

TEST_CASE("a data-gradient GEMM whose weights are restored waits for them even without exchanged tokens") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(2);
  Plan plan = replica_plan(true);
  // The copy computes rank 1's own 50 tokens instead: no token crosses, only the weights do.
  plan.routes = {{0, 0, 100, Carrier::none, -1, 0}, {1, 1, 100, Carrier::none, -1, 0},
                 {1, 2, 50, Carrier::none, -1, -1}};
  plan.gemm_order = {{{0, {0}}}, {{1, {2}}, {1, {1}}}};
  validate_plan(plan, 2, 2);
  const LayerResult r = simulate_layer(hw, model, plan, {100, 150}, true);
  // Forward: the weights sync takes 11 us and the (empty) dispatch follows it; GPU 1 runs the copy
  // (100 us) once its weights are in, then expert 1 (200 us): 311 us.
  REQUIRE(r.forward_ps == 311 * us);
  const Time_ps b = r.forward_ps;
  // Backward on GPU 1: the copy's data gradient, computed from local tokens, still waits for its
  // restored weights (11 us), then expert 1's.
  const auto dgrads = spans(r, 1, Track::compute, "gemm dgrad");
  REQUIRE(dgrads.size() == 2);
  CHECK(dgrads[0] == std::make_pair(b + 11 * us, b + 111 * us));
  CHECK(dgrads[1] == std::make_pair(b + 111 * us, b + 311 * us));
}

TEST_CASE("backward transfer starts a plan may and may not use") {
  Plan plan = replica_plan(true);
  CHECK_FALSE(find_plan_defect(plan, 2, 2).has_value());
  auto defect_at = [&](std::size_t k) {
    const auto defect = find_plan_defect(plan, 2, 2);
    REQUIRE(defect.has_value());
    CHECK(defect->place == "transfers[" + std::to_string(k) + "].start");
  };
  // Gradients after the weight gradient: allowed backward, not forward.
  plan.transfers[1].start = TransferStart::after_wgrad;
  CHECK_FALSE(find_plan_defect(plan, 2, 2).has_value());
  plan.transfers[0].start = TransferStart::after_wgrad;
  defect_at(0);
  plan.transfers[0].start = TransferStart::before_dispatch;
  // Weights after the weight gradient, gradients before the gradient dispatch, a backward prefetch,
  // and a backward restore by Copy Engine are all refused.
  plan.transfers[2].start = TransferStart::after_wgrad;
  defect_at(2);
  plan.transfers[2].start = TransferStart::before_dispatch;
  plan.transfers[1].start = TransferStart::before_dispatch;
  defect_at(1);
  plan.transfers[1].start = TransferStart::prefetch;
  defect_at(1);
  plan.transfers[1].start = TransferStart::after_dispatch;
  plan.transfers[2].carrier = Carrier::copy_engine;
  defect_at(2);
}

TEST_CASE("backward_first and after_wgrad survive the plan's JSON form") {
  const Plan plan = shadow_plan(true);
  const nlohmann::json j = plan_to_json(plan);
  CHECK(j["transfers"][0]["start"] == "after_wgrad");
  CHECK(j["gemm_order"][1][1]["backward_first"] == true);
  // An unmarked group stays a plain list, as plans were written before backward_first.
  CHECK(j["gemm_order"][1][0] == nlohmann::json::array({1}));
  const Plan back = plan_from_json(j, "t.json", "");
  CHECK(back.transfers[0].start == TransferStart::after_wgrad);
  CHECK(back.gemm_order[1][1].backward_first);
  CHECK_FALSE(back.gemm_order[1][0].backward_first);
  CHECK(back.gemm_order[0][0].backward_first);
  CHECK(plan_to_json(back) == j);
}

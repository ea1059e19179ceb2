// When weight transfers leave (Transfer::start), worked by hand on the round-number cluster of
// simple_cluster.hpp: NVLink 0.1 byte/ps with 1 us latency, Copy Engine 0.05 byte/ps with 2 us per
// copy, 2 us of GEMM per token, 1000 bytes per token.
#include <doctest/doctest.h>

#include <string>

#include "sim/replay/layer_graph.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

constexpr Time_ps us = kPsPerUs;

// Two GPUs in one node. Instance 0: expert 0 on GPU 0; instance 1: expert 1 on GPU 1; instance 2: a
// copy of expert 0 on GPU 1. Rank 0 keeps 100 tokens for expert 0 and sends 50 to the copy by EP;
// rank 1 keeps 100 for expert 1. `weights` brings the copy's weights; `gpu1` is GPU 1's GEMM order.
Plan replica_plan(const Transfer& weights, std::vector<GemmGroup> gpu1) {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {0, 1, InstanceKind::replica}};
  plan.routes = {{0, 0, 100, Carrier::none, -1, 0}, {1, 1, 100, Carrier::none, -1, 0},
                 {0, 2, 50, Carrier::ep_backend, -1, 0}};
  plan.transfers = {weights};
  plan.gemm_order = {{{0, {0}}}, std::move(gpu1)};
  validate_plan(plan, 2, 2);
  return plan;
}

Transfer weights_to_gpu1(double bytes, Carrier carrier, TransferStart start) {
  return {TransferKind::weights, PassKind::forward, carrier, start, 2, 0, 1, static_cast<std::int64_t>(bytes)};
}

const TimelineEvent& event(const LayerResult& r, int gpu, Track track, const std::string& name) {
  for (const TimelineEvent& e : r.timeline.events)
    if (e.gpu == gpu && e.track == track && e.name == name) return e;
  FAIL("no event " << name << " on GPU " << gpu);
  return r.timeline.events.front();
}

}  // namespace

TEST_CASE("EP weights synchronised before the dispatch delay each GPU's dispatch by latency + bytes / bandwidth") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  const Plan plan = replica_plan(weights_to_gpu1(1e6, Carrier::ep_backend, TransferStart::before_dispatch),
                                 {{1, {1}}, {1, {2}}});
  const LayerResult r = simulate_layer(hw, model, plan, {150, 100}, false);
  // Weight sync 0 -> 1: 1e6 bytes at 0.1 B/ps = 10 us + 1 us latency: both GPUs' parts end at 11 us,
  // and only then do their dispatches start (50 tokens 0 -> 1: 0.5 + 1 us, to 12.5 us).
  CHECK(event(r, 0, Track::comm_kernel, "weights sync").end_ps == 11 * us);
  CHECK(event(r, 0, Track::comm_kernel, "dispatch").start_ps == 11 * us);
  CHECK(event(r, 1, Track::comm_kernel, "dispatch").start_ps == 11 * us);
  // GPU 0: 100 tokens, 200 us from 12.5. GPU 1: its own 100 tokens then the copy's 50: 300 us.
  CHECK(r.gemm_finish_fwd_ps[0] == 212 * us + us / 2);
  CHECK(r.gemm_finish_fwd_ps[1] == 312 * us + us / 2);
  // The combine brings the 50 outputs back: 1.5 us.
  CHECK(r.forward_ps == 314 * us);
  CHECK(r.weight_bytes == doctest::Approx(1e6));
}

TEST_CASE("Copy Engine weights before the dispatch leave at the layer's start, not after the planner") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  auto run = [&](TransferStart start) {
    Plan plan = replica_plan(weights_to_gpu1(1e6, Carrier::copy_engine, start), {{1, {2}}, {1, {1}}});
    plan.planner = {PlannerSite::host_cpu, 10 * us, PlannerStart::after_dispatch, 16};
    return simulate_layer(hw, model, plan, {150, 100}, false);
  };
  // Before the dispatch: the copy runs from 0 (2 us + 1e6 bytes at 0.05 B/ps = 22 us). GPU 1 runs the
  // copy's 50 tokens from 22 us (100 us), then its own 100 tokens (200 us): 322 us.
  const LayerResult early = run(TransferStart::before_dispatch);
  CHECK(event(early, 0, Track::copy_engine, "weights e0").start_ps == 0);
  CHECK(event(early, 0, Track::copy_engine, "weights e0").end_ps == 22 * us);
  CHECK(early.gemm_finish_fwd_ps[1] == 322 * us);
  // After the dispatch (as the planner decides): dispatch done 1.5 us, counts to host 2 us + 16 bytes
  // at 0.05 B/ps (320 ps), planner 10 us: 13.50032 us; the copy 22 us more: 35.50032 us, then 300 us.
  const LayerResult late = run(TransferStart::after_dispatch);
  CHECK(event(late, 0, Track::copy_engine, "weights e0").start_ps == 13 * us + us / 2 + 320);
  CHECK(late.gemm_finish_fwd_ps[1] == 335 * us + us / 2 + 320);
}

TEST_CASE("a weight prefetch runs beside the dispatch, sharing its links, and its GEMM waits for it") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  const Plan plan =
      replica_plan(weights_to_gpu1(1e5, Carrier::ep_backend, TransferStart::prefetch), {{1, {2}}, {1, {1}}});
  const LayerResult r = simulate_layer(hw, model, plan, {150, 100}, false);
  // Both flows leave GPU 0 at 0 and share its NVLink port (and GPU 1's) from 1 us at 0.05 B/ps each:
  // the dispatch's 5e4 bytes arrive at 2 us (1.5 us alone), the prefetch then has the port to itself
  // for its last 5e4 bytes: 2.5 us (2 us alone).
  CHECK(event(r, 0, Track::nvlink_out, "dispatch 0->1").end_ps == 2 * us);
  CHECK(event(r, 0, Track::nvlink_out, "weights prefetch 0->1").end_ps == 2 * us + us / 2);
  // GPU 1 runs the copy's 50 tokens once the weights are in: 2.5 + 100, then its own 100: 302.5 us.
  CHECK(r.gemm_finish_fwd_ps[1] == 302 * us + us / 2);
  // GPU 0 starts at 2 us while the prefetch kernel still holds 20 of its 100 SMs until 2.5 us: 0.1 us
  // lost, 202.1 us.
  CHECK(r.routed_gemm_fwd_ps[0] == 200 * us + 100'000);
  CHECK(r.gemm_finish_fwd_ps[0] == 202 * us + 100'000);
  CHECK(r.forward_ps == 304 * us);
  CHECK(r.weight_bytes == doctest::Approx(1e5));
}

TEST_CASE("a backward transfer that does not leave after the weight-gradient GEMM is a plan defect") {
  Plan plan = replica_plan(weights_to_gpu1(1e5, Carrier::ep_backend, TransferStart::prefetch), {{1, {1}}, {1, {2}}});
  plan.transfers.push_back({TransferKind::gradients, PassKind::backward, Carrier::ep_backend,
                            TransferStart::after_dispatch, 2, 1, 0, 100});
  CHECK_FALSE(find_plan_defect(plan, 2, 2).has_value());
  for (const TransferStart start : {TransferStart::before_dispatch, TransferStart::prefetch}) {
    plan.transfers[1].start = start;
    const auto defect = find_plan_defect(plan, 2, 2);
    REQUIRE(defect.has_value());
    CHECK(defect->place == "transfers[1].start");
  }
}

TEST_CASE("ep_transfer_bytes sums a start's EP-backend transfers per (src, dst), and is empty when there are none") {
  Plan plan = replica_plan(weights_to_gpu1(1e6, Carrier::ep_backend, TransferStart::before_dispatch), {{1, {1}}, {1, {2}}});
  plan.transfers.push_back(weights_to_gpu1(5e5, Carrier::ep_backend, TransferStart::before_dispatch));
  plan.transfers.push_back(weights_to_gpu1(7e5, Carrier::copy_engine, TransferStart::before_dispatch));
  plan.transfers.push_back(weights_to_gpu1(9e5, Carrier::ep_backend, TransferStart::after_dispatch));
  const auto before = ep_transfer_bytes(plan, 2, PassKind::forward, TransferStart::before_dispatch);
  REQUIRE(before.size() == 2);
  CHECK(before[0][1] == 1.5e6);  // both EP transfers 0 -> 1; the Copy Engine one is not the backend's
  CHECK(before[1][0] == 0);
  CHECK(ep_transfer_bytes(plan, 2, PassKind::forward, TransferStart::after_dispatch)[0][1] == 9e5);
  // Nothing leaves at the prefetch or in the backward: no matrix at all.
  CHECK(ep_transfer_bytes(plan, 2, PassKind::forward, TransferStart::prefetch).empty());
  CHECK(ep_transfer_bytes(plan, 2, PassKind::backward, TransferStart::before_dispatch).empty());
}

#include <doctest/doctest.h>

#include <initializer_list>
#include <utility>
#include <vector>

#include "sim/balancers/static_ep.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

// 2 ranks, 2 experts (expert 0 on GPU 0, expert 1 on GPU 1), top-1.
// rank 0 -> expert 0: 100 tokens (local), rank 0 -> expert 1: 50 tokens, rank 1 -> expert 1: 100 (local).
Plan two_gpu_plan(const ModelSpec& model, const HardwareSpec& hw) {
  TraceRecord rec;
  rec.counts = {100, 50, 0, 100};
  BalancerContext c;
  c.num_gpus = 2;
  c.gpus_per_node = 2;
  c.model = &model;
  c.hardware = &hw;
  return StaticEp().plan(rec, c);
}

constexpr Time_ps us = kPsPerUs;

}  // namespace

TEST_CASE("forward of a layer: dispatch, GEMMs, combine, worked by hand") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  const Plan plan = two_gpu_plan(model, hw);
  const LayerResult r = simulate_layer(hw, model, plan, {150, 100}, /*backward=*/false);
  // Dispatch 0->1: 50 tokens * 1000 bytes over 100 GB/s = 0.5 us, + 1 us latency -> 1.5 us.
  // GPU 0: 100 tokens * 2 us = 200 us of GEMM from 1.5 us; GPU 1: 150 tokens = 300 us from 1.5 us.
  CHECK(r.routed_gemm_fwd_ps[0] == 200 * us);
  CHECK(r.routed_gemm_fwd_ps[1] == 300 * us);
  CHECK(r.gemm_finish_fwd_ps[0] == 201 * us + us / 2);
  CHECK(r.gemm_finish_fwd_ps[1] == 301 * us + us / 2);
  // Combine 1->0 (50 tokens back) starts when GPU 1 is done: 301.5 + 1.5 = 303 us.
  CHECK(r.forward_ps == 303 * us);
  CHECK(r.backward_ps == 0);
  // Payload on the EP backend: 50 tokens there and back.
  CHECK(r.ep_token_bytes == doctest::Approx(100'000));
}

TEST_CASE("backward: gradient dispatch, data then weight gradients, gradient combine overlapped") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  const LayerResult r = simulate_layer(hw, model, two_gpu_plan(model, hw), {150, 100}, /*backward=*/true);
  CHECK(r.forward_ps == 303 * us);
  // Gradient dispatch 1.5 us; GPU 1: dgrad 300 us (to 301.5), then wgrad 300 us. The gradient
  // combine (1 -> 0 after GPU 1's dgrad: 301.5 + 1.5 = 303 us) overlaps the wgrad, but its kernel holds
  // 20 of 100 SMs for those 1.5 us, so the wgrad loses 0.3 us: 301.5 + 300 + 0.3 = 601.8 us.
  CHECK(r.backward_ps == 601 * us + 800'000);
  CHECK(r.layer_ps() == 904 * us + 800'000);
  CHECK(r.ep_token_bytes == doctest::Approx(200'000));
}

TEST_CASE("a GEMM overlapping a communication kernel runs on the SMs left to it") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model(2, 1, /*shared_experts=*/1);
  const LayerResult r = simulate_layer(hw, model, two_gpu_plan(model, hw), {150, 100}, false);
  // GPU 0's shared expert: 150 tokens * 2 us = 300 us of work from t = 0, while the dispatch kernel
  // holds 20 of 100 SMs until 1.5 us: 1.2 us of progress by then, so it ends at 1.5 + 298.8 = 300.3 us.
  // The routed GEMM follows on the same stream: 300.3 + 200 = 500.3 us.
  CHECK(r.gemm_finish_fwd_ps[0] == 500 * us + 300'000);
  CHECK(r.routed_gemm_fwd_ps[0] == 200 * us);
}

namespace {

// Two-phase dispatch on one node, worked by hand (FEPLB's shape): rank 1's 100 tokens for expert 0
// go by EP to its home GPU 0, then by Copy Engine to a dynamic instance on GPU 1, whose weights the
// Copy Engine brings too once the host planner (after the dispatch, 10 us) has decided.
Plan two_phase_plan() {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert},
                    {0, 1, InstanceKind::dynamic_expert}};
  plan.routes = {{0, 0, 100, Carrier::none, -1, 0}, {1, 2, 100, Carrier::copy_engine, 0, 0}};
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::after_dispatch, 2,
                     0, 1, 1'000'000},
                    {TransferKind::gradients, PassKind::backward, Carrier::copy_engine, TransferStart::after_dispatch,
                     2, 1, 0, 1'000'000}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1}}, {1, {2}}}};
  plan.planner = {PlannerSite::host_cpu, 10 * kPsPerUs, PlannerStart::after_dispatch, 16};
  return plan;
}

}  // namespace

TEST_CASE("two-phase dispatch: EP to the home GPU, planner on the host, Copy Engine to the helper") {
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  const Plan plan = two_phase_plan();
  validate_plan(plan, 2, 2);
  const LayerResult r = simulate_layer(hw, model, plan, {100, 100}, true);
  // Dispatch 1 -> 0: 1e5 bytes at 0.1 B/ps = 1 us + 1 us latency: 2 us. GPU 0's static GEMM (its own
  // 100 tokens, 200 us) runs from 2 us while the planner works: it is not held up by it.
  CHECK(r.routed_gemm_fwd_ps[0] == 200 * us);
  // Planner: counts to host 16 B at 50 GB/s (320 ps) + 2 us latency -> 4.00032 us, + 10 us -> 14.00032.
  // GPU 0's Copy Engine (FIFO, 50 GB/s, 2 us per copy): weights 1e6 B: 2 + 20 us -> 36.00032; then the
  // tokens 1e5 B: 2 + 2 us -> 40.00032. GPU 1 computes them: 200 us -> 240.00032.
  CHECK(r.gemm_finish_fwd_ps[1] == 240 * us + 320);
  // Outputs back by GPU 1's Copy Engine: 4 us -> 244.00032; GPU 0 then combines to rank 1: 2 us.
  CHECK(r.forward_ps == 246 * us + 320);
  CHECK(r.ep_token_bytes == doctest::Approx(4e5));  // 1e5 each way, both passes
  CHECK(r.ce_token_bytes == doctest::Approx(4e5));
  CHECK(r.weight_bytes == doctest::Approx(1e6));
  CHECK(r.gradient_bytes == doctest::Approx(1e6));
  // Backward: gradient dispatch 2 us; output grads to GPU 1 by Copy Engine 4 us (6); dgrad 200 us (206);
  // input grads back 4 us (210); GPU 0 (dgrad done at 202) combines at 210 to 212 while its wgrad runs
  // (0.4 us lost). GPU 1's combine kernel holds 20% of its SMs from 206 to 212 during its wgrad: 1.2 us
  // lost, wgrad ends at 407.2; its gradients go home by Copy Engine: 2 + 20 us -> 429.2 us.
  CHECK(r.backward_ps == 429 * us + 200'000);
}

namespace {

// A plan written by hand of static instances (expert, GPU) on `gpus` GPUs of one node, checked.
Plan hand_plan(int gpus, const std::vector<std::pair<int, int>>& instances, std::initializer_list<TokenRoute> routes,
               std::vector<std::vector<GemmGroup>> gemm_order) {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = gpus;
  for (const auto& [expert, gpu] : instances) plan.instances.push_back({expert, gpu, InstanceKind::static_expert});
  plan.routes = routes;
  plan.gemm_order = std::move(gemm_order);
  validate_plan(plan, gpus, gpus);
  return plan;
}

}  // namespace

TEST_CASE("tokens a GPU passes on by Copy Engine leave it only once the dispatch has brought them") {
  // Two-phase, without a planner: rank 1's 100 tokens for expert 0 go by EP to GPU 0, then by Copy
  // Engine to a second copy of expert 0 on GPU 1.
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  const Plan plan = hand_plan(2, {{0, 0}, {1, 1}, {0, 1}},
                              {{0, 0, 100, Carrier::none, -1, 0}, {1, 2, 100, Carrier::copy_engine, 0, 0}},
                              {{{0, {0}}}, {{1, {1}}, {1, {2}}}});
  const LayerResult r = simulate_layer(hw, model, plan, {100, 100}, false);
  // The EP leg 1 -> 0: 1e5 bytes at 0.1 byte/ps, 1 us, after 1 us of latency: in GPU 0 at 2 us. Only
  // then does GPU 0's Copy Engine send them on: 2 us of latency and 2 us at 0.05 byte/ps, in GPU 1
  // at 6 us. GPU 1 computes them in 200 us: 206 us. (Sent at the layer's start, before they were
  // there, they would be in at 4 us and done at 204 us.)
  CHECK(r.gemm_finish_fwd_ps[1] == 206 * us);
  CHECK(r.routed_gemm_fwd_ps[1] == 200 * us);
}

TEST_CASE("tokens a Copy Engine brings straight from their source hold their GEMM to the copy, not to the dispatch") {
  // One node of 3 GPUs, expert e at home on GPU e, and a second copy of expert 0 on GPU 1.
  // GPU 0 sends 100 tokens to that copy by Copy Engine, straight (no EP leg before it); GPU 2 sends
  // 5,000 tokens to expert 1 on GPU 1 by EP. GPU 1 computes the copy's tokens first.
  const HardwareSpec hw = test::simple_hardware(1, 3);
  const ModelSpec model = test::simple_model(3);
  const Plan plan = hand_plan(3, {{0, 0}, {1, 1}, {2, 2}, {0, 1}},
                              {{0, 0, 100, Carrier::none, -1, 0}, {0, 3, 100, Carrier::copy_engine, -1, 0},
                               {2, 1, 5000, Carrier::ep_backend, -1, 0}},
                              {{{0, {0}}}, {{1, {3}}, {1, {1}}}, {{2, {2}}}});
  const LayerResult r = simulate_layer(hw, model, plan, {200, 5100, 0}, false);
  // GPU 0 moves nothing by EP, so its dispatch is done at once and its Copy Engine sends the 100
  // tokens then: 1e5 bytes at 50 GB/s (0.05 byte/ps) is 2 us, after 2 us of latency: in at 4 us.
  // GPU 2's 5e6 bytes to GPU 1 start after 1 us of latency at GPU 1's NVLink port's 0.1 byte/ps,
  // but from 2 to 4 us the copy takes half of that port: 1e5 bytes later, GPU 1's dispatch is in
  // at 1 + 50 + 1 = 52 us, and its kernel holds 20 of its 100 SMs until then. The copy's GEMM
  // (100 tokens, 200 us) runs from 4 us at 80% to 52 us (38.4 us of work done), then at full
  // speed: it ends at 213.6 us. Expert 1's 5,000 tokens follow: 10,000 us, to 10,213.6 us. (Held to
  // the dispatch, the copy's GEMM would start at 52 us and expert 1's end at 10,252 us.)
  CHECK(r.gemm_finish_fwd_ps[1] == 10'213 * us + 600'000);
  CHECK(r.routed_gemm_fwd_ps[1] == 10'209 * us + 600'000);
}

TEST_CASE("200000 exchange stages run without one nested call per stage") {
  // Stages 0..199998 carry nothing and pass through at once; only the last one moves tokens. Each
  // stage that ends at once used to start the next from inside its own completion, one stack frame
  // chain per stage, until the stack overflowed.
  const HardwareSpec hw = test::simple_hardware();
  const ModelSpec model = test::simple_model();
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.exchange_stages = 200'000;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::static_expert}};
  plan.routes = {{0, 1, 10, Carrier::ep_backend, -1, 199'999}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1}}}};
  validate_plan(plan, 2, 2);
  const LayerResult r = simulate_layer(hw, model, plan, {10, 0}, /*backward=*/true);
  // Dispatch 0 -> 1: 10 tokens * 1000 bytes at 0.1 B/ps = 0.1 us + 1 us latency = 1.1 us; GPU 1
  // computes them in 20 us (21.1 us); the combine brings them back in 1.1 us: 22.2 us.
  CHECK(r.gemm_finish_fwd_ps[1] == 21 * us + 100'000);
  CHECK(r.forward_ps == 22 * us + 200'000);
  // Backward: gradient dispatch 1.1 us, data gradient 20 us (21.1), weight gradient 20 us, slowed by
  // the gradient combine's kernel holding 20 of 100 SMs from 21.1 to 22.2 us (0.22 us lost): 41.32 us.
  CHECK(r.backward_ps == 41 * us + 320'000);
  CHECK(r.ep_token_bytes == doctest::Approx(4e4));  // 1e4 bytes each way, both passes
}

#include <doctest/doctest.h>

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

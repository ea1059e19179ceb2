// The non-MoE part of a layer against hand-worked numbers on round-number hardware: 1 TFLOP/s peak
// (1e6 FLOP per us) and, unless a test says otherwise, HBM so fast that memory terms vanish.
#include <doctest/doctest.h>

#include "sim/step/non_moe_cost.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

HardwareSpec flat_hardware(double efficiency) {
  HardwareSpec hw = test::simple_hardware();
  hw.gemm.efficiency = {{1, efficiency}, {2, efficiency}};
  hw.gpu.hbm_GBps = 1e6;  // 1e9 bytes per us
  return hw;
}

ModelSpec projection_only_model() {
  ModelSpec m = test::simple_model();
  m.non_moe.layers = 2;
  m.non_moe.attention_params = 1'000'000;
  m.non_moe.attention_gemm_calls = 2;
  return m;
}

}  // namespace

TEST_CASE("a non-MoE part that is one GEMM of known FLOPs at a known efficiency takes exactly that time") {
  HardwareSpec hw = flat_hardware(0.5);
  hw.gemm.launch_us = 3;
  const ModelSpec model = projection_only_model();
  const StepSpec step{StepMode::training, 1, StepOverlap::none};
  const NonMoeCost cost(hw, model, step);
  // 2 * 1e6 params * 1000 tokens = 2e9 FLOP at 0.5 * 1e6 FLOP/us = 4000 us, plus 2 launches of 3 us.
  CHECK(cost.projections_us(1000) == doctest::Approx(4006.0));
  // BF16 weights 2e6 bytes + activations 2 * 1000 tokens * 1000 bytes = 4e6 bytes: 0.004 us at
  // 1e9 bytes/us, 2000 us at 2e3 bytes/us (still below compute), 8000 us at 5e2 bytes/us.
  hw.gpu.hbm_GBps = 2;
  CHECK(cost.projections_us(1000) == doctest::Approx(4006.0));
  hw.gpu.hbm_GBps = 0.5;
  CHECK(cost.projections_us(1000) == doctest::Approx(8006.0));
  CHECK(cost.projections_us(0) == 0);
}

TEST_CASE("an FP8 projection runs against the FP8 peak and curve") {
  HardwareSpec hw = flat_hardware(0.5);
  hw.gpu.fp8_peak_TFLOPs = 2.0;
  hw.gemm.fp8_efficiency = {{1, 0.25}, {2, 0.25}};
  ModelSpec model = projection_only_model();
  model.non_moe.gemm = Dtype::fp8;
  const StepSpec step{StepMode::prefill, 1, StepOverlap::none};
  // 2e9 FLOP at 0.25 * 2e6 FLOP/us = 4000 us.
  CHECK(NonMoeCost(hw, model, step).projections_us(1000) == doctest::Approx(4000.0));
}

TEST_CASE("attention scores cost the causal mean context in training and prefill, the whole cache in decode") {
  const HardwareSpec hw = flat_hardware(1.0);
  ModelSpec model = projection_only_model();
  model.non_moe.attention_flops_per_position = 1000;
  // Training over sequences of 3: a token attends to (3 + 1) / 2 = 2 positions on average.
  // 100 tokens * 2 positions * 1000 FLOP = 2e5 FLOP = 0.2 us.
  const StepSpec training{StepMode::training, 3, StepOverlap::none};
  CHECK(NonMoeCost(hw, model, training).context_positions() == 2.0);
  CHECK(NonMoeCost(hw, model, training).scores_us(100) == doctest::Approx(0.2));
  const StepSpec decode{StepMode::decode, 3, StepOverlap::none};
  CHECK(NonMoeCost(hw, model, decode).context_positions() == 3.0);
  CHECK(NonMoeCost(hw, model, decode).scores_us(100) == doctest::Approx(0.3));
}

TEST_CASE("decode reads the KV cache: bytes over HBM bandwidth") {
  HardwareSpec hw = flat_hardware(1.0);
  hw.gpu.hbm_GBps = 1;  // 1e3 bytes per us
  ModelSpec model = projection_only_model();
  model.non_moe.attention_flops_per_position = 1;
  model.non_moe.kv_cache_bytes_per_position = 100;
  const StepSpec decode{StepMode::decode, 50, StepOverlap::none};
  // 4 sequences, one new token each, read 50 positions of 100 bytes: 20,000 bytes = 20 us; their
  // 4 * 50 * 1 FLOP take 0.0002 us.
  CHECK(NonMoeCost(hw, model, decode).scores_us(4) == doctest::Approx(20.0));
  // Training and prefill keep K and V on chip: no cache read.
  const StepSpec prefill{StepMode::prefill, 50, StepOverlap::none};
  CHECK(NonMoeCost(hw, model, prefill).scores_us(4) == doctest::Approx(4 * 25.5 * 1 / 1e6));
}

TEST_CASE("a MoE layer's non-MoE part adds projections, scores, norms and router, backward is twice forward") {
  HardwareSpec hw = flat_hardware(1.0);
  hw.gpu.hbm_GBps = 1;  // 1e3 bytes per us
  ModelSpec model = projection_only_model();
  model.non_moe.attention_flops_per_position = 1000;
  const StepSpec training{StepMode::training, 3, StepOverlap::none};
  const NonMoeCost cost(hw, model, training);
  const double tokens = 10;
  // Projections: 2e7 FLOP = 20 us; BF16 weights 2e6 bytes + 2 * 10 * 1000 = 2.02e6 bytes = 2020 us:
  // memory bound.
  CHECK(cost.projections_us(tokens) == doctest::Approx(2020.0));
  // Scores: 10 * 2 * 1000 = 2e4 FLOP = 0.02 us.
  CHECK(cost.scores_us(tokens) == doctest::Approx(0.02));
  // Norms and residual adds: 10 * hidden 1000 * 1 byte per token = 1e4 bytes * 10 tokens = 100 us.
  CHECK(cost.elementwise_us(tokens) == doctest::Approx(100.0));
  // Router: 1000 x 2 experts: 4e4 FLOP = 0.04 us; 2000 weight bytes = 2 us.
  CHECK(cost.router_us(tokens) == doctest::Approx(2.0));
  const PassTime_us layer = cost.moe_layer(tokens);
  CHECK(layer.forward == doctest::Approx(2020.0 + 0.02 + 100.0 + 2.0));
  CHECK(layer.backward == doctest::Approx(2 * layer.forward));
  // Inference has no backward pass.
  const StepSpec prefill{StepMode::prefill, 3, StepOverlap::none};
  CHECK(NonMoeCost(hw, model, prefill).moe_layer(tokens).backward == 0);
}

TEST_CASE("a dense layer runs its FFN instead of a router, the head runs once per pass") {
  HardwareSpec hw = flat_hardware(0.5);
  ModelSpec model = projection_only_model();
  model.non_moe.attention_params = 0;
  model.non_moe.attention_gemm_calls = 0;
  model.non_moe.elementwise_bytes_per_token = 1e-9;  // nothing to speak of
  model.non_moe.dense_layers = 1;
  model.non_moe.dense_ffn_size = 4000;
  model.non_moe.vocab_size = 500;
  const StepSpec prefill{StepMode::prefill, 1, StepOverlap::none};
  const NonMoeCost cost(hw, model, prefill);
  // FFN of two 1000 x 4000 matrices: 2 * 2 * 1000 * 4000 * 100 tokens = 1.6e9 FLOP at 5e5 FLOP/us.
  CHECK(cost.dense_ffn_us(100) == doctest::Approx(3200.0).epsilon(1e-6));
  CHECK(cost.dense_layer(100).forward == doctest::Approx(3200.0).epsilon(1e-6));
  // Head: 2 * 500 * 1000 * 100 = 1e8 FLOP = 200 us.
  CHECK(cost.head(100).forward == doctest::Approx(200.0).epsilon(1e-6));
  model.non_moe.vocab_size = 0;
  CHECK(NonMoeCost(hw, model, prefill).head(100).forward == 0);
}

TEST_CASE("a dense GEMM reads the efficiency curve at its rows, in log2, clamped at both ends") {
  HardwareSpec hw = test::simple_hardware();
  hw.gemm.efficiency = {{128, 0.25}, {512, 0.5}};
  CHECK(dense_gemm_efficiency(hw, Dtype::bf16, 64) == doctest::Approx(0.25));
  CHECK(dense_gemm_efficiency(hw, Dtype::bf16, 256) == doctest::Approx(0.375));  // halfway between 2^7 and 2^9
  CHECK(dense_gemm_efficiency(hw, Dtype::bf16, 4096) == doctest::Approx(0.5));
  // 256 rows, 3e6 FLOP at 0.375 * 1e6 FLOP/us = 8 us, plus 3 launches of 2 us.
  hw.gemm.launch_us = 2;
  CHECK(dense_gemm_us(hw, Dtype::bf16, 3, 256, 3e6, 0) == doctest::Approx(14.0));
  hw.gpu.fp8_peak_TFLOPs = 2.0;
  hw.gemm.fp8_efficiency = {{128, 0.5}, {512, 1.0}};
  // FP8: 0.75 * 2e6 FLOP/us.
  CHECK(dense_gemm_us(hw, Dtype::fp8, 0, 256, 3e6, 0) == doctest::Approx(2.0));
}

// The bundled DeepSeek-V3 model file loads with the published shapes, and its phases move the bytes
// they should.
#include <doctest/doctest.h>

#include "sim/config/loaders.hpp"
#include "sim/replay/sim_context.hpp"
#include "tests/sim/simple_cluster.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

TEST_CASE("models/deepseek-v3.yaml: DeepSeek-V3's MoE layer as released") {
  const ModelSpec m = load_model((test::source_dir() / "models" / "deepseek-v3.yaml").string());
  CHECK(m.hidden_size == 7168);
  CHECK(m.expert_ffn_size == 2048);
  CHECK(m.num_experts == 256);
  CHECK(m.top_k == 8);
  CHECK(m.shared_experts == 1);
  CHECK(m.shared_expert_ffn_size == 2048);
  CHECK(m.gated_ffn);
  CHECK(m.dtype_bytes == 2);
  CHECK(m.moe_layers == 4);
  CHECK(m.routing.groups == 8);
  CHECK(m.routing.groups_per_token == 4);
  CHECK(m.routing.limited());
  CHECK(m.precision.dispatch == Dtype::fp8);
  CHECK(m.precision.combine == Dtype::bf16);
  CHECK(m.precision.grad_dispatch == Dtype::fp8);
  CHECK(m.precision.grad_combine == Dtype::bf16);
  CHECK(m.precision.gemm == Dtype::fp8);
  // One expert: 3 x 7168 x 2048 x 2 bytes = 88 MB.
  CHECK(m.expert_weight_bytes() == 88'080'384);
  HardwareSpec hw = test::simple_hardware();
  hw.gpu.fp8_peak_TFLOPs = 2;  // its GEMMs are FP8
  hw.gemm.fp8_efficiency = {{1, 1.0}};
  const SimContext ctx(hw, m, 2);
  CHECK(ctx.token_bytes(TokenPhase::dispatch) == 7392);  // 7168 + 56 scales x 4 bytes
  CHECK(ctx.token_bytes(TokenPhase::combine) == 14336);
  CHECK(ctx.token_bytes(TokenPhase::grad_dispatch) == 7392);
  CHECK(ctx.token_bytes(TokenPhase::grad_combine) == 14336);
}

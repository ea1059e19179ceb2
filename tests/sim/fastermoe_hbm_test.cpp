// FasterMoE's shadow copies take HBM: every GPU that receives a shadowed expert's weights holds them
// until that layer's backward (v1 keeps the broadcast buffer in ctx.shadows for the gradient), so
// the HBM check (hbm_fit.hpp) counts them like any other instance, and a plan whose shadows do not
// fit is refused. simple_model's expert is 2 x 1000 x 500 one-byte elements = 1e6 bytes.
#include <doctest/doctest.h>

#include "sim/balancers/fastermoe.hpp"
#include "sim/balancers/hbm_fit.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

TEST_CASE("FasterMoE's shadow copies count against HBM") {
  ModelSpec model = test::simple_model(8);
  model.moe_layers = 2;
  HardwareSpec hw = test::simple_hardware(1, 4);
  // Expert 0 (home GPU 0, with expert 1) hot from every rank: the paper policy shadows it
  // (t_model 10 us against 2 us per token), the prototype policy nothing here (see below).
  TraceRecord rec;
  rec.counts.assign(4 * 8, 1);
  for (int s = 0; s < 4; ++s) rec.counts[static_cast<std::size_t>(s) * 8] = 100;
  const BalancerContext ctx = test::context_for(model, hw);
  FasterMoeOptions shadowing;
  FasterMoeOptions none;
  none.policy = ShadowPolicy::none;
  const Plan with_shadow = FasterMoe(shadowing).plan(rec, ctx);
  const Plan without = FasterMoe(none).plan(rec, ctx);
  validate_plan(with_shadow, 8, 4);
  REQUIRE_FALSE(with_shadow.transfers.empty());

  // Without shadows each GPU holds its two experts: 2 x 1e6 x 2 layers = 4e6 bytes. With expert 0
  // shadowed, GPUs 1..3 hold a third: 6e6 bytes (GPU 1 is the first of them).
  const HbmNeed base = largest_hbm_need(without, model);
  CHECK(base.routed_experts == 2);
  CHECK(base.bytes == doctest::Approx(4e6));
  const HbmNeed need = largest_hbm_need(with_shadow, model);
  CHECK(need.gpu == 1);
  CHECK(need.routed_experts == 3);
  CHECK(need.bytes == doctest::Approx(6e6));

  // 5 MB of HBM: the static layout fits, the shadowed plan does not and is refused with its GPU.
  hw.gpu.hbm_capacity_GB = 0.005;
  CHECK_FALSE(hbm_overflow(without, model, hw));
  const auto refused = hbm_overflow(with_shadow, model, hw);
  REQUIRE(refused);
  CHECK(refused->find("GPU 1 needs 0.006 GB (6000000 bytes) for the weights of 3 routed experts") != std::string::npos);
  // 6 MB: both fit.
  hw.gpu.hbm_capacity_GB = 0.006;
  CHECK_FALSE(hbm_overflow(with_shadow, model, hw));
}

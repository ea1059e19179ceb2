// The HBM check of a plan's expert weights, by hand: the simple model's expert is 2 matrices of
// 1000 x 500 one-byte elements = 1e6 bytes.
#include "sim/balancers/hbm_fit.hpp"

#include <doctest/doctest.h>

#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

TEST_CASE("hbm_fit: distinct experts per GPU x weight bytes x moe_layers against the capacity") {
  ModelSpec model = test::simple_model(4, 1, /*shared_experts=*/1);  // shared expert: 1e6 bytes too
  model.moe_layers = 3;
  HardwareSpec hw = test::simple_hardware(1, 2);
  Plan plan;
  plan.num_gpus = 2;
  // GPU 0: experts 0 and 1, and a second instance of expert 1 (weights held once); GPU 1: expert 2.
  plan.instances = {{0, 0, InstanceKind::static_expert},
                    {1, 0, InstanceKind::static_expert},
                    {1, 0, InstanceKind::replica},
                    {2, 1, InstanceKind::static_expert}};
  const HbmNeed need = largest_hbm_need(plan, model);
  CHECK(need.gpu == 0);
  CHECK(need.routed_experts == 2);
  CHECK(need.bytes == doctest::Approx(9e6));  // (2 routed + 1 shared) x 1e6 x 3 layers

  hw.gpu.hbm_capacity_GB = 0.009;  // exactly 9e6 bytes: fits
  CHECK_FALSE(hbm_overflow(plan, model, hw));
  hw.gpu.hbm_capacity_GB = 0.008;
  const auto message = hbm_overflow(plan, model, hw);
  REQUIRE(message);
  CHECK(*message ==
        "the plan does not fit in HBM: GPU 0 needs 0.009 GB (9000000 bytes) for the weights of 2 routed experts and 1 "
        "shared x 3 MoE layers of model simple, more than gpu.hbm_capacity_GB = 0.008 GB of hardware simple");
}

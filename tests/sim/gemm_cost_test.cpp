#include <doctest/doctest.h>

#include <cmath>

#include "sim/hardware/gemm_cost.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

TEST_CASE("grouped GEMM time is FLOPs over efficiency times peak, per expert") {
  HardwareSpec hw = test::simple_hardware();
  ModelSpec model = test::simple_model();
  GemmCost cost(hw, model);
  // 100 tokens * 2e6 FLOP at 1 FLOP/ps = 2e8 ps; weights (1e6 bytes) + activations at 1000 bytes/ps
  // are far below that.
  CHECK(cost.grouped_time_ps({100}, model.expert_ffn_size) == 200'000'000);
  // Experts add up; an expert without tokens costs nothing (not even its weight read).
  CHECK(cost.grouped_time_ps({100, 0, 50}, model.expert_ffn_size) == 300'000'000);
  CHECK(cost.grouped_time_ps({0, 0}, model.expert_ffn_size) == 0);
}

TEST_CASE("rows are padded to the alignment and efficiency is interpolated in log2 of rows") {
  HardwareSpec hw = test::simple_hardware();
  hw.gemm.row_alignment = 128;
  hw.gemm.efficiency = {{128, 0.25}, {512, 0.5}};
  ModelSpec model = test::simple_model();
  GemmCost cost(hw, model);
  CHECK(cost.padded(1) == 128);
  CHECK(cost.padded(128) == 128);
  CHECK(cost.padded(129) == 256);
  CHECK(cost.efficiency(64) == doctest::Approx(0.25));    // clamped below
  CHECK(cost.efficiency(256) == doctest::Approx(0.375));  // log2 256 = 8, halfway between 7 and 9
  CHECK(cost.efficiency(4096) == doctest::Approx(0.5));   // clamped above
  // 100 tokens pad to 128 rows at 25%: 128 * 2e6 / 0.25 = 1.024e9 ps.
  CHECK(cost.grouped_time_ps({100}, model.expert_ffn_size) == 1'024'000'000);
}

TEST_CASE("a small expert GEMM is bounded by reading its weights from HBM") {
  HardwareSpec hw = test::simple_hardware();
  hw.gpu.hbm_GBps = 1000;  // 1 byte per ps
  hw.gemm.launch_us = 2;
  ModelSpec model = test::simple_model();
  GemmCost cost(hw, model);
  // 1 token: compute 2e6 ps; bytes = weights 2*1000*500 = 1e6 + activations 1*(2*1000 + 2*500) = 3000
  // -> 1,003,000 ps... below compute, so compute wins: 2 us + 2 us launch.
  CHECK(cost.grouped_time_ps({1}, model.expert_ffn_size) == 4'000'000);
  hw.gpu.hbm_GBps = 100;  // 0.1 byte per ps: memory floor 10,030,000 ps
  CHECK(cost.grouped_time_ps({1}, model.expert_ffn_size) == 2'000'000 + 10'030'000);
}

// GemmCost per GEMM dtype: FP8 runs against the FP8 peak and curve and streams one byte per element;
// an FP8 GEMM on hardware without FP8 figures is refused. Numbers worked out by hand.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "sim/hardware/gemm_cost.hpp"

using namespace epsim;

namespace {

HardwareSpec dtype_hardware(double hbm_GBps) {
  HardwareSpec hw;
  hw.name = "dtype";
  hw.gpu.bf16_peak_TFLOPs = 1000;
  hw.gpu.fp8_peak_TFLOPs = 2000;
  hw.gpu.hbm_GBps = hbm_GBps;
  hw.gemm.row_alignment = 128;
  hw.gemm.launch_us = 0;
  hw.gemm.efficiency = {{1, 0.5}, {2, 0.5}};
  hw.gemm.fp8_efficiency = {{1, 0.25}, {2, 0.25}};
  return hw;
}

ModelSpec dtype_model(Dtype gemm) {
  ModelSpec m;
  m.hidden_size = 1024;
  m.expert_ffn_size = 512;
  m.gated_ffn = true;
  m.dtype_bytes = 2;
  m.precision.gemm = gemm;
  return m;
}

}  // namespace

TEST_CASE("an FP8 GEMM runs against the FP8 peak and efficiency curve") {
  const HardwareSpec hw = dtype_hardware(1e9);  // HBM never limits
  // 128 rows x 3 matrices of 1024 x 512: 2 * 3 * 1024 * 512 * 128 = 402653184 FLOPs.
  const std::vector<std::int64_t> rows{128};
  const ModelSpec bf16 = dtype_model(Dtype::bf16), fp8 = dtype_model(Dtype::fp8);
  // BF16: 402653184 / (0.5 * 1000 FLOP/ps) = 805306.4 ps; FP8: / (0.25 * 2000) = the same 805306.4 ps.
  CHECK(GemmCost(hw, bf16).grouped_time_ps(rows, 512) == 805307);
  CHECK(GemmCost(hw, fp8).grouped_time_ps(rows, 512) == 805307);
  HardwareSpec faster = hw;
  faster.gemm.fp8_efficiency = {{1, 0.5}, {2, 0.5}};  // 402653184 / 1000 = 402653.2 ps
  CHECK(GemmCost(faster, fp8).grouped_time_ps(rows, 512) == 402654);
  CHECK(GemmCost(faster, fp8).efficiency(128) == 0.5);
}

TEST_CASE("HBM bytes of an FP8 GEMM use one byte per element") {
  HardwareSpec hw = dtype_hardware(1000);  // 1 byte per ps
  hw.gpu.bf16_peak_TFLOPs = hw.gpu.fp8_peak_TFLOPs = 1e9;  // compute never limits
  const std::vector<std::int64_t> rows{128};
  // Weights 3 * 1024 * 512 = 1572864 elements; activations 128 * (2 * 1024 + 2 * 2 * 512) = 524288.
  CHECK(GemmCost(hw, dtype_model(Dtype::fp8)).grouped_time_ps(rows, 512) == 2097152);
  CHECK(GemmCost(hw, dtype_model(Dtype::bf16)).grouped_time_ps(rows, 512) == 2 * 2097152);
  CHECK(GemmCost(hw, dtype_model(Dtype::fp8)).hbm_fraction(rows, 512) == 1.0);
}

TEST_CASE("an FP8 GEMM on hardware without an FP8 peak or curve is refused") {
  HardwareSpec no_peak = dtype_hardware(1000);
  no_peak.gpu.fp8_peak_TFLOPs = 0;
  HardwareSpec no_curve = dtype_hardware(1000);
  no_curve.gemm.fp8_efficiency.clear();
  const ModelSpec fp8 = dtype_model(Dtype::fp8);
  CHECK_THROWS_WITH_AS(GemmCost(no_peak, fp8), doctest::Contains("gpu.fp8_peak_TFLOPs and gemm.fp8_efficiency"),
                       std::invalid_argument);
  CHECK_THROWS_AS(GemmCost(no_curve, fp8), std::invalid_argument);
  CHECK_NOTHROW(GemmCost(no_peak, dtype_model(Dtype::bf16)));
  // The free roofline the calibration fits through is the same function.
  const HardwareSpec hw = dtype_hardware(1e9);
  CHECK(gemm_roofline_us(hw, Dtype::fp8, 128, 402653184.0, 0) == doctest::Approx(0.805306368).epsilon(1e-12));
}

// The calibration fits recover the parameters synthetic measurements were generated from: exactly
// without noise, within tolerance (and within a few standard errors) with a small deterministic noise.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hw/calibration/calibration_fit.hpp"
#include "hw/calibration/linear_fit.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/core/input_error.hpp"
#include "sim/hardware/gemm_cost.hpp"
#include "tests/hw/synthetic_measurements.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

namespace {

/// The synthetic set, written and read back as a user's file would be.
Measurements load_synthetic(const test::CalibrationTruth& truth, double noise, const std::string& name,
                            int draw = 0) {
  const auto dir = test::scratch_dir(name);
  const std::string path = (dir / "measurements.yaml").string();
  std::ofstream(path) << test::synthetic_measurements_yaml(truth, noise, draw);
  return load_measurements(path);
}

Calibration fit_synthetic(const test::CalibrationTruth& truth, double noise, const std::string& name) {
  return fit_measurements({load_synthetic(truth, noise, name)}, truth.hw);
}

/// |fitted - truth| <= rel * truth.
void check_close(const FittedValue& v, double truth, double rel) {
  CAPTURE(v.value);
  CAPTURE(truth);
  CHECK(std::abs(v.value - truth) <= rel * std::abs(truth));
}

ModelSpec expert_model() {
  ModelSpec m;
  m.hidden_size = 6144;
  m.expert_ffn_size = 2048;
  m.gated_ffn = true;
  m.dtype_bytes = 2;
  return m;
}

}  // namespace

TEST_CASE("a line and a proportional fit give exact parameters and standard errors") {
  const LinearFit line = fit_line({1, 2, 3, 4}, {3, 5, 7, 9});
  CHECK(line.coef(0) == doctest::Approx(1.0).epsilon(1e-12));
  CHECK(line.coef(1) == doctest::Approx(2.0).epsilon(1e-12));
  CHECK(line.stderr_(0) < 1e-9);
  CHECK(line.rel_rms < 1e-12);
  CHECK(line.points == 4);
  // Two points for two parameters: exact, but no error estimate.
  const LinearFit two = fit_line({1, 2}, {3, 5});
  CHECK(std::isnan(two.stderr_(1)));
  const LinearFit prop = fit_proportional({1, 2, 4}, {2.2, 3.8, 8.0});
  CHECK(prop.coef(0) == doctest::Approx(2.0).epsilon(0.05));
  CHECK(prop.stderr_(0) > 0);
  CHECK_THROWS_AS(fit_line({3, 3, 3}, {1, 2, 3}), std::invalid_argument);
  // By hand: y = c x on (1, 1), (1, 2), (1, 4), each residual relative to its y. With u = x / y = 1,
  // 1/2, 1/4: c = sum u / sum u^2 = 1.75 / 1.3125 = 4/3; residuals 1 - c u = -1/3, 1/3, 2/3, their
  // squares summing to 2/3; RMS sqrt(2/3 / 3); standard error sqrt(2/3 / (3 - 1) / 1.3125).
  const LinearFit hand = fit_proportional({1, 1, 1}, {1, 2, 4});
  CHECK(hand.coef(0) == doctest::Approx(4.0 / 3.0));
  CHECK(hand.rel_rms == doctest::Approx(std::sqrt(2.0 / 9.0)));
  CHECK(hand.stderr_(0) == doctest::Approx(std::sqrt(1.0 / 3.0 / 1.3125)));
  // A line through three points: the RMS is over the points, not the degrees of freedom.
  const std::vector<double> x = {1, 2, 4}, y = {2, 5, 8};
  const LinearFit noisy = fit_line(x, y);
  double sum = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = (y[i] - noisy.coef(0) - noisy.coef(1) * x[i]) / y[i];
    sum += r * r;
  }
  CHECK(noisy.rel_rms == doctest::Approx(std::sqrt(sum / 3)));
  CHECK(noisy.rel_rms > 0.01);
}

TEST_CASE("noise-free synthetic measurements are recovered exactly") {
  const test::CalibrationTruth truth;
  const Calibration cal = fit_synthetic(truth, 0.0, "calib-exact");
  CHECK(cal.warnings.empty());

  const CopyFit* ce = cal.copy(CopyKind::ce_peer);
  REQUIRE(ce != nullptr);
  check_close(ce->alpha_us, 2.5, 1e-9);
  check_close(ce->beta_GBps, 390, 1e-9);
  CHECK(ce->alpha_us.points == 10);
  CHECK(ce->rel_rms < 1e-12);
  check_close(cal.copy(CopyKind::ce_local)->beta_GBps, truth.local_beta_GBps, 1e-9);
  check_close(cal.copy(CopyKind::h2d)->alpha_us, truth.h2d_alpha_us, 1e-9);
  check_close(cal.copy(CopyKind::d2h)->beta_GBps, truth.d2h_beta_GBps, 1e-9);
  CHECK(cal.copy(CopyKind::sm_copy) == nullptr);

  REQUIRE(cal.all_to_all_intra);
  CHECK_FALSE(cal.all_to_all_inter);
  check_close(cal.all_to_all_intra->latency_us, truth.a2a_latency_us, 1e-9);
  check_close(cal.all_to_all_intra->bw_GBps, truth.a2a_bw_GBps, 1e-9);

  REQUIRE(cal.gemm);
  const GemmFit& g = *cal.gemm;
  check_close(g.launch_us, truth.hw.gemm.launch_us, 1e-6);
  check_close(g.hbm_GBps, truth.hw.gpu.hbm_GBps, 1e-9);
  CHECK(g.launch_us.points == 32);  // started at the 16 smallest-rows points, then fitted on all 32
  REQUIRE(g.efficiency.size() == truth.hw.gemm.efficiency.size());
  // 128 rows are memory bound here: the fit can only give the lower bound that keeps them on the HBM floor.
  CHECK(g.efficiency[0].memory_bound);
  CHECK(g.efficiency[0].efficiency.value < truth.hw.gemm.efficiency[0].efficiency);
  for (std::size_t i = 1; i < g.efficiency.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE(g.efficiency[i].memory_bound);
    CHECK(g.efficiency[i].padded_rows == truth.hw.gemm.efficiency[i].tokens_per_expert);
    check_close(g.efficiency[i].efficiency, truth.hw.gemm.efficiency[i].efficiency, 1e-9);
  }
  CHECK(g.rel_rms < 1e-8);  // times are whole picoseconds

  REQUIRE(cal.contention);
  check_close(cal.contention->hbm_traffic_factor, truth.hbm_traffic_factor, 1e-9);
  CHECK(cal.contention->hbm_traffic_factor.points == 5);   // the compute-bound GEMM did not slow down
  CHECK(cal.contention->points_without_slowdown == 1);
}

TEST_CASE("a local copy loads its GPU's HBM twice per byte: at half a peer copy's rate it fits the same factor") {
  // epsim-hw bench contention copies inside the GPU (read and write on the GEMM's own HBM); the
  // simulator's factor is per side of a peer copy. The synthetic points are peer copies with factor 1.6;
  // the same slowdowns from local copies at half the rate are the same HBM load, so the same 1.6.
  const test::CalibrationTruth truth;
  Measurements m = load_synthetic(truth, 0.0, "calib-local-copy");
  REQUIRE(!m.gemm_with_copy.empty());
  const Calibration peer = fit_measurements({m}, truth.hw);
  for (auto& p : m.gemm_with_copy) {
    CHECK(p.copy == CopyKind::ce_peer);
    p.copy = CopyKind::ce_local;
    p.copy_GBps /= 2;
  }
  const Calibration local = fit_measurements({m}, truth.hw);
  REQUIRE(peer.contention);
  REQUIRE(local.contention);
  check_close(peer.contention->hbm_traffic_factor, truth.hbm_traffic_factor, 1e-9);
  check_close(local.contention->hbm_traffic_factor, truth.hbm_traffic_factor, 1e-9);
  // Read as peer copies, the local ones would have fitted twice the factor (what the H100 and H200
  // contention rows gave before the copy's kind was read: 1.98 and 1.93).
  for (auto& p : m.gemm_with_copy) p.copy = CopyKind::ce_peer;
  check_close(fit_measurements({m}, truth.hw).contention->hbm_traffic_factor, truth.hbm_traffic_factor * 2, 1e-9);
}

TEST_CASE("the fitted hardware reproduces every synthetic GEMM time through GemmCost") {
  const test::CalibrationTruth truth;
  const Calibration cal = fit_synthetic(truth, 0.0, "calib-gemmcost");
  const HardwareSpec fitted = apply_calibration(truth.hw, cal);
  const ModelSpec model = expert_model();
  const GemmCost want(truth.hw, model);
  const GemmCost got(fitted, model);
  for (int tokens : {1, 64, 128, 200, 256, 512, 1000, 1024, 2048, 4096, 8192})
    for (int experts : {1, 8}) {
      CAPTURE(tokens);
      const std::vector<std::int64_t> rows(experts, tokens);
      const double a = static_cast<double>(want.grouped_time_ps(rows, 2048));
      const double b = static_cast<double>(got.grouped_time_ps(rows, 2048));
      CHECK(std::abs(a - b) <= 1e-6 * a);
      CHECK(got.hbm_fraction(rows, 2048) == doctest::Approx(want.hbm_fraction(rows, 2048)).epsilon(1e-6));
    }
}

TEST_CASE("noisy synthetic measurements are recovered within tolerance and their standard errors") {
  const test::CalibrationTruth truth;
  const Calibration cal = fit_synthetic(truth, 0.003, "calib-noisy");  // +-0.3% on every time
  const CopyFit* ce = cal.copy(CopyKind::ce_peer);
  REQUIRE(ce != nullptr);
  check_close(ce->alpha_us, 2.5, 0.005);
  check_close(ce->beta_GBps, 390, 0.005);
  CHECK(ce->rel_rms > 0);
  CHECK(ce->rel_rms < 0.004);
  auto within_errors = [](const FittedValue& v, double truth) {
    CAPTURE(v.value);
    CAPTURE(v.stderr_);
    CHECK(v.stderr_ > 0);
    CHECK(std::abs(v.value - truth) <= 4 * v.stderr_);
  };
  within_errors(ce->alpha_us, 2.5);
  within_errors(ce->beta_GBps, 390);
  check_close(cal.copy(CopyKind::h2d)->beta_GBps, truth.h2d_beta_GBps, 0.005);
  check_close(cal.all_to_all_intra->latency_us, truth.a2a_latency_us, 0.005);
  check_close(cal.all_to_all_intra->bw_GBps, truth.a2a_bw_GBps, 0.005);

  REQUIRE(cal.gemm);
  check_close(cal.gemm->hbm_GBps, truth.hw.gpu.hbm_GBps, 0.005);
  check_close(cal.gemm->launch_us, truth.hw.gemm.launch_us, 0.02);
  within_errors(cal.gemm->hbm_GBps, truth.hw.gpu.hbm_GBps);
  within_errors(cal.gemm->launch_us, truth.hw.gemm.launch_us);
  for (std::size_t i = 1; i < cal.gemm->efficiency.size(); ++i) {
    CAPTURE(i);
    check_close(cal.gemm->efficiency[i].efficiency, truth.hw.gemm.efficiency[i].efficiency, 0.005);
  }
  REQUIRE(cal.contention);
  check_close(cal.contention->hbm_traffic_factor, truth.hbm_traffic_factor, 0.01);
  CHECK(cal.contention->hbm_traffic_factor.stderr_ > 0);
}

TEST_CASE("all-to-all beyond one node is fitted apart and not mapped onto NVLink") {
  test::CalibrationTruth truth;
  truth.hw.gpus_per_node = 4;  // the 8-rank points now span two nodes
  const Calibration cal = fit_synthetic(truth, 0.0, "calib-a2a-inter");
  REQUIRE(cal.all_to_all_intra);
  REQUIRE(cal.all_to_all_inter);
  CHECK(cal.all_to_all_intra->latency_us.points == 7);
  CHECK(cal.all_to_all_inter->latency_us.points == 7);
  const HardwareSpec hw = apply_calibration(truth.hw, cal);
  CHECK(hw.nvlink.latency_us == doctest::Approx(truth.a2a_latency_us));
}

TEST_CASE("FP8 and BF16 GEMM calls of every layout are recovered per dtype with 0.5% noise") {
  const test::CalibrationTruth truth;
  const Measurements calls = test::synthetic_gemm_calls(truth, 0.005, "calls.yaml");
  const Calibration cal = fit_measurements({calls}, truth.hw);
  REQUIRE(cal.gemm);
  const GemmFit& g = *cal.gemm;
  check_close(g.hbm_GBps, truth.hw.gpu.hbm_GBps, 0.02);
  check_close(g.launch_us, truth.hw.gemm.launch_us, 0.15);
  REQUIRE(g.fp8_efficiency.size() == truth.hw.gemm.fp8_efficiency.size());
  CHECK(g.fp8_efficiency[0].memory_bound);  // 64 rows: on the HBM floor
  for (std::size_t i = 1; i < g.fp8_efficiency.size(); ++i) {
    CAPTURE(i);
    CHECK_FALSE(g.fp8_efficiency[i].memory_bound);
    CHECK(g.fp8_efficiency[i].padded_rows == truth.hw.gemm.fp8_efficiency[i].tokens_per_expert);
    check_close(g.fp8_efficiency[i].efficiency, truth.hw.gemm.fp8_efficiency[i].efficiency, 0.02);
    CHECK(g.fp8_efficiency[i].efficiency.stderr_ > 0);
  }
  // BF16: 128 rows are memory bound for these shapes; 256 rows and up are recovered.
  REQUIRE(g.efficiency.size() == truth.hw.gemm.efficiency.size());
  for (std::size_t i = 1; i < g.efficiency.size(); ++i) {
    CAPTURE(i);
    check_close(g.efficiency[i].efficiency, truth.hw.gemm.efficiency[i].efficiency, 0.02);
  }
  CHECK(g.rel_rms < 0.008);
  // One residual per point, each within the noise, through the simulator's own roofline.
  REQUIRE(cal.residuals.size() == calls.gemm.size());
  for (const auto& r : cal.residuals) {
    CAPTURE(r.where);
    CHECK(r.series == "gemm");
    CHECK(std::abs(r.residual()) < 0.015);
  }
  const HardwareSpec fitted = apply_calibration(truth.hw, cal);
  CHECK(fitted.gemm.fp8_efficiency.size() == truth.hw.gemm.fp8_efficiency.size());
  for (const auto& p : calls.gemm)
    CHECK(predict_gemm_call_us(p, fitted) == doctest::Approx(predict_gemm_call_us(p, truth.hw)).epsilon(0.02));
}

TEST_CASE("FP8 GEMM points on a base without an FP8 peak: one InputError naming the file and the point") {
  const test::CalibrationTruth truth;
  HardwareSpec base = truth.hw;
  base.gpu.fp8_peak_TFLOPs = 0;
  base.gemm.fp8_efficiency.clear();
  const Measurements calls = test::synthetic_gemm_calls(truth, 0.0, "calls.yaml");
  try {
    fit_measurements({calls}, base);
    FAIL("expected an InputError");
  } catch (const InputError& e) {
    CHECK(e.file() == "calls.yaml");
    CHECK(e.place() == "2:5");
    CHECK(std::string(e.what()).find("gpu.fp8_peak_TFLOPs") != std::string::npos);
  }
}

TEST_CASE("EP dispatch/combine: SM-bound and link-bound NVLink points and RDMA points recovered with 0.5% noise") {
  const test::CalibrationTruth truth;
  const Measurements ep = test::synthetic_ep_comm(truth, 0.005, true, "ep.yaml");
  HardwareSpec base = truth.hw;  // start far from the truth: the fit must not lean on it
  base.ep_backend.nvlink_efficiency = 0.5;
  base.ep_backend.ib_efficiency = 0.5;
  base.ep_backend.sm_GBps = 0;
  base.ep_backend.dispatch_fixed_us = base.ep_backend.combine_fixed_us = 0;
  const Calibration cal = fit_measurements({ep}, base);
  REQUIRE(cal.ep_nvlink);
  REQUIRE(cal.ep_rdma);
  const EpCommFit& nv = *cal.ep_nvlink;
  CHECK_FALSE(nv.internode);
  check_close(nv.efficiency, 0.8, 0.02);
  check_close(nv.sm_GBps, 20, 0.02);
  check_close(nv.dispatch_fixed_us, 15, 0.05);
  check_close(nv.combine_fixed_us, 25, 0.05);
  CHECK(nv.points == 24);
  // Each within four of its standard errors of the truth: an error in the parameter's own unit (the
  // efficiency and the SM rate are fitted as logarithms, whose errors are relative).
  const std::pair<const FittedValue*, double> truths[] = {
      {&nv.efficiency, 0.8}, {&nv.sm_GBps, 20}, {&nv.dispatch_fixed_us, 15}, {&nv.combine_fixed_us, 25}};
  for (const auto& truth_pair : truths) {
    const FittedValue& v = *truth_pair.first;
    CAPTURE(v.value);
    CAPTURE(v.stderr_);
    CHECK(v.stderr_ > 0);
    CHECK(std::abs(v.value - truth_pair.second) <= 4 * v.stderr_);
    CHECK(v.points == 24);
  }
  const EpCommFit& ib = *cal.ep_rdma;
  CHECK(ib.internode);
  check_close(ib.efficiency, 0.85, 0.02);
  CHECK(ib.sm_GBps.points == 0);  // taken from the NVLink fit
  CHECK(ib.dispatch_fixed_us.points == 0);
  const HardwareSpec hw = apply_calibration(base, cal);
  CHECK(hw.ep_backend.nvlink_efficiency == doctest::Approx(0.8).epsilon(0.02));
  CHECK(hw.ep_backend.ib_efficiency == doctest::Approx(0.85).epsilon(0.02));
  CHECK(hw.ep_backend.sm_GBps == doctest::Approx(20).epsilon(0.02));
  CHECK(hw.ep_backend.dispatch_fixed_us == doctest::Approx(15).epsilon(0.05));
  REQUIRE(cal.residuals.size() == ep.ep_comm.size());
  for (const auto& r : cal.residuals) {
    CAPTURE(r.setting);
    CHECK(std::abs(r.residual()) < 0.015);
  }
}

TEST_CASE("the EP fit's standard errors are the spread of its values over repeated measurements") {
  // The same 24 NVLink points measured 8 times over, each with other errors of 0.5%: the values the
  // fit gives scatter by about the standard error it reports for one set, in the parameter's own
  // unit. The efficiency and the SM rate are fitted as logarithms; their errors, relative there,
  // are reported times the value (the SM rate's would otherwise be 20 x too small).
  const test::CalibrationTruth truth;
  HardwareSpec base = truth.hw;
  base.ep_backend.nvlink_efficiency = 0.5;
  base.ep_backend.sm_GBps = 0;
  base.ep_backend.dispatch_fixed_us = base.ep_backend.combine_fixed_us = 0;
  constexpr int kDraws = 8;
  std::vector<std::vector<double>> values(4);
  std::vector<double> reported(4, 0.0);
  for (int draw = 1; draw <= kDraws; ++draw) {
    const Calibration cal = fit_measurements({test::synthetic_ep_comm(truth, 0.005, false, "ep.yaml", draw)}, base);
    REQUIRE(cal.ep_nvlink);
    const EpCommFit& nv = *cal.ep_nvlink;
    const FittedValue* fitted[] = {&nv.efficiency, &nv.sm_GBps, &nv.dispatch_fixed_us, &nv.combine_fixed_us};
    for (std::size_t k = 0; k < 4; ++k) {
      values[k].push_back(fitted[k]->value);
      reported[k] += fitted[k]->stderr_ / kDraws;  // the mean reported over the draws
    }
  }
  for (std::size_t k = 0; k < 4; ++k) {
    double mean = 0;
    for (const double v : values[k]) mean += v / kDraws;
    double var = 0;
    for (const double v : values[k]) var += (v - mean) * (v - mean) / (kDraws - 1);
    CAPTURE(k);
    CAPTURE(mean);
    CAPTURE(reported[k]);
    CAPTURE(std::sqrt(var));
    CHECK(reported[k] > std::sqrt(var) / 3);
    CHECK(reported[k] < std::sqrt(var) * 3);
  }
}

TEST_CASE("EP points that are all link bound leave sm_GBps at the base value, with a warning") {
  const test::CalibrationTruth truth;
  Measurements ep = test::synthetic_ep_comm(truth, 0.003, false, "ep.yaml");
  std::vector<EpCommPoint> link_bound;
  for (const auto& p : ep.ep_comm)
    if (p.sms == 0 || p.sms >= 24) link_bound.push_back(p);
  ep.ep_comm = link_bound;
  HardwareSpec base = truth.hw;
  base.ep_backend.sm_GBps = 33;
  const Calibration cal = fit_measurements({ep}, base);
  REQUIRE(cal.ep_nvlink);
  CHECK(cal.ep_nvlink->sm_GBps.points == 0);
  check_close(cal.ep_nvlink->efficiency, 0.8, 0.01);
  CHECK(apply_calibration(base, cal).ep_backend.sm_GBps == 33);
  bool warned = false;
  for (const auto& w : cal.warnings) warned = warned || w.find("sm_GBps is kept from the base") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("published copy rates are fitted like timed copies") {
  Measurements m;
  m.file = "copies.yaml";
  // alpha 2 us, beta 400 GB/s; the large copy given as a rate (its time bytes / rate, as the reader derives it).
  for (double bytes : {1024.0, 1e9}) {
    CopyPoint p;
    p.kind = CopyKind::ce_peer;
    p.bytes = bytes;
    p.median_us = 2 + bytes / 400e3;
    if (bytes > 1e6) p.published_GBps = bytes / p.median_us / 1e3;
    p.where = "copies.yaml:3:5";
    m.copy.push_back(p);
  }
  const test::CalibrationTruth truth;
  const Calibration cal = fit_measurements({m}, truth.hw);
  REQUIRE(cal.copy(CopyKind::ce_peer));
  check_close(cal.copy(CopyKind::ce_peer)->alpha_us, 2, 1e-6);
  check_close(cal.copy(CopyKind::ce_peer)->beta_GBps, 400, 1e-6);
  REQUIRE(cal.residuals.size() == 2);
  CHECK(std::abs(cal.residuals[1].residual()) < 1e-9);
}

TEST_CASE("one size only: refused by default, fixed cost from the base when asked (published rates)") {
  Measurements m;
  m.file = "rates.yaml";
  CopyPoint p;
  p.kind = CopyKind::ce_peer;
  p.bytes = 4e8;
  p.published_GBps = 400;
  p.median_us = 1e6;  // 4e8 bytes at 400 GB/s
  p.where = "rates.yaml:9:5";
  m.copy = {p};
  test::CalibrationTruth truth;
  truth.hw.copy_engine.fixed_cost_us = 2;
  CHECK_THROWS_WITH_AS(fit_measurements({m}, truth.hw), doctest::Contains("rates.yaml:9:5: copy ce_peer: need at least two"),
                       InputError);
  FitOptions options;
  options.one_size_fixed_from_base = true;
  const Calibration cal = fit_measurements({m}, truth.hw, options);
  const CopyFit* c = cal.copy(CopyKind::ce_peer);
  REQUIRE(c != nullptr);
  CHECK(c->alpha_us.points == 0);
  CHECK(c->alpha_us.value == 2);
  // (1e6 - 2) us for 4e8 bytes: 4e8 / (999998 * 1e3) GB/s.
  CHECK(c->beta_GBps.value == doctest::Approx(4e8 / 999998e3).epsilon(1e-12));
  CHECK(apply_calibration(truth.hw, cal).copy_engine.fixed_cost_us == 2);
  CHECK_FALSE(cal.warnings.empty());
}

TEST_CASE("compute-bound GEMM points only: hbm_GBps and launch_us stay at the base values") {
  // Best-shape matmuls (MAMF-like): large M, compute bound; they say nothing about HBM.
  test::CalibrationTruth truth;
  Measurements m;
  m.file = "peak.yaml";
  for (Dtype d : {Dtype::bf16, Dtype::fp8}) {
    GemmCallPoint p;
    p.m = 8192;
    p.n = 8192;
    p.k = 8192;
    p.dtype = d;
    p.median_us = predict_gemm_call_us(p, truth.hw);
    p.where = "peak.yaml:5:5";
    m.gemm.push_back(p);
  }
  HardwareSpec base = truth.hw;
  base.gpu.hbm_GBps = 2500;
  const Calibration cal = fit_measurements({m}, base);
  REQUIRE(cal.gemm);
  CHECK(cal.gemm->hbm_GBps.points == 0);
  CHECK(cal.gemm->launch_us.points == 0);
  const HardwareSpec hw = apply_calibration(base, cal);
  CHECK(hw.gpu.hbm_GBps == 2500);
  // Each dtype's curve becomes the one knot it measured, which reproduces its time.
  REQUIRE(hw.gemm.efficiency.size() == 1);
  CHECK(hw.gemm.efficiency[0].tokens_per_expert == 8192);
  CHECK(hw.gemm.efficiency[0].efficiency == doctest::Approx(0.75).epsilon(1e-6));  // the truth at 8192 rows
  REQUIRE(hw.gemm.fp8_efficiency.size() == 1);
  CHECK(hw.gemm.fp8_efficiency[0].efficiency == doctest::Approx(0.65).epsilon(1e-6));  // clamped above 4096
  for (const auto& p : m.gemm) CHECK(predict_gemm_call_us(p, hw) == doctest::Approx(p.median_us).epsilon(1e-6));
}

TEST_CASE("EP points with one SM count: the link efficiency takes the rate, sm_GBps is not fitted") {
  const test::CalibrationTruth truth;
  Measurements ep = test::synthetic_ep_comm(truth, 0.003, false, "ep.yaml");
  std::vector<EpCommPoint> same_sms;
  for (const auto& p : ep.ep_comm)
    if (p.sms == 24) same_sms.push_back(p);
  REQUIRE(same_sms.size() >= 4);
  ep.ep_comm = same_sms;
  const Calibration cal = fit_measurements({ep}, truth.hw);
  REQUIRE(cal.ep_nvlink);
  CHECK(cal.ep_nvlink->sm_GBps.points == 0);
  check_close(cal.ep_nvlink->efficiency, 0.8, 0.01);  // 24 SMs x 20 GB/s = 480 > 360: link bound in truth
  bool warned = false;
  for (const auto& w : cal.warnings) warned = warned || w.find("every point has 24 SMs") != std::string::npos;
  CHECK(warned);
}

TEST_CASE("gemm_with_copy rows whose copy ran on the SMs are left out of the HBM-sharing fit, with a warning") {
  // The synthetic rows follow HBM sharing with factor 1.6. Two of them are made to say copy_on_sms and
  // given a slowdown no HBM sharing explains (x5): the factor must still be the truth, from the others.
  const test::CalibrationTruth truth;
  Measurements m = load_synthetic(truth, 0.0, "calib-copy-on-sms");
  REQUIRE(m.gemm_with_copy.size() == 6);
  const Calibration all = fit_measurements({m}, truth.hw);
  REQUIRE(all.contention);
  const int used_before = all.contention->hbm_traffic_factor.points;
  for (int i : {0, 1}) {
    m.gemm_with_copy[i].copy_on_sms = true;
    m.gemm_with_copy[i].gemm_with_copy_us = 5 * m.gemm_with_copy[i].gemm_us;
  }
  m.gemm_with_copy[2].copy_on_sms = false;  // probed and found on a Copy Engine: used as before
  const Calibration some = fit_measurements({m}, truth.hw);
  REQUIRE(some.contention);
  check_close(some.contention->hbm_traffic_factor, truth.hbm_traffic_factor, 1e-9);
  CHECK(some.contention->hbm_traffic_factor.points == used_before - 2);
  CHECK(some.contention->points_copy_on_sms == 2);
  const auto warned = [](const Calibration& c, const std::string& text) {
    for (const auto& w : c.warnings)
      if (w.find(text) != std::string::npos) return true;
    return false;
  };
  CHECK(warned(some, "gemm_with_copy: 2 rows' copies ran on the SMs"));
  CHECK(warned(some, "left out of the hbm_traffic_factor fit"));

  // Every row a copy kernel: no fit, the base's factor stays, and the calibration still succeeds.
  for (auto& p : m.gemm_with_copy) p.copy_on_sms = true;
  const Calibration none = fit_measurements({m}, truth.hw);
  CHECK_FALSE(none.contention);
  CHECK(warned(none, "every row's copy ran on the SMs"));
  CHECK(warned(none, "hbm_traffic_factor kept from the base"));
  REQUIRE(none.gemm);  // the other fits are unaffected
  CHECK(apply_calibration(truth.hw, none).copy_engine.hbm_traffic_factor == truth.hw.copy_engine.hbm_traffic_factor);
}

TEST_CASE("the copy, all-to-all, GEMM and contention fits' standard errors are the spread of their values over repeated measurements") {
  // The synthetic set measured 8 times over, each time with other errors of 0.5%: each value the fits
  // give scatters by about the standard error they report for one set. A value whose reported error
  // were off by a factor of 3 either way would tell a user a false precision (or none).
  const test::CalibrationTruth truth;
  constexpr int kDraws = 8;
  std::map<std::string, std::vector<double>> values;
  std::map<std::string, double> reported;  // the mean over the draws
  for (int draw = 1; draw <= kDraws; ++draw) {
    const Calibration cal =
        fit_measurements({load_synthetic(truth, 0.005, "calib-spread-" + std::to_string(draw), draw)}, truth.hw);
    std::vector<std::pair<std::string, const FittedValue*>> fitted;
    for (const CopyFit& c : cal.copies) {
      fitted.emplace_back(std::string(to_string(c.kind)) + " alpha_us", &c.alpha_us);
      fitted.emplace_back(std::string(to_string(c.kind)) + " beta_GBps", &c.beta_GBps);
    }
    REQUIRE(cal.all_to_all_intra);
    fitted.emplace_back("all_to_all latency_us", &cal.all_to_all_intra->latency_us);
    fitted.emplace_back("all_to_all bw_GBps", &cal.all_to_all_intra->bw_GBps);
    REQUIRE(cal.gemm);
    fitted.emplace_back("gemm launch_us", &cal.gemm->launch_us);
    fitted.emplace_back("gemm hbm_GBps", &cal.gemm->hbm_GBps);
    for (const EfficiencyFit& e : cal.gemm->efficiency)
      if (!e.memory_bound) fitted.emplace_back("eta at " + std::to_string(e.padded_rows), &e.efficiency);
    REQUIRE(cal.contention);
    fitted.emplace_back("hbm_traffic_factor", &cal.contention->hbm_traffic_factor);
    for (const auto& f : fitted) {
      values[f.first].push_back(f.second->value);
      reported[f.first] += f.second->stderr_ / kDraws;
    }
  }
  CHECK(values.size() >= 12);
  for (const auto& v : values) {
    const std::string& name = v.first;
    REQUIRE(v.second.size() == static_cast<std::size_t>(kDraws));
    double mean = 0;
    for (const double x : v.second) mean += x / kDraws;
    double var = 0;
    for (const double x : v.second) var += (x - mean) * (x - mean) / (kDraws - 1);
    const double spread = std::sqrt(var);
    CAPTURE(name);
    CAPTURE(mean);
    CAPTURE(reported[name]);
    CAPTURE(spread);
    CHECK(reported[name] > spread / 3);
    CHECK(reported[name] < spread * 3);
  }
}

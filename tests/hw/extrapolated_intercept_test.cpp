// A fitted fixed cost is flagged as extrapolated when its points' sizes span under 16 x and it is
// more than a third of their fastest point's time (hw/calibration/extrapolated_intercept.hpp): by
// the rule alone, in a copy fit worked out by hand, and on the published sets it was made for.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "hw/calibration/calibration_fit.hpp"
#include "hw/calibration/extrapolated_intercept.hpp"
#include "hw/calibration/hardware_writer.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/config/loaders.hpp"
#include "tests/test_paths.hpp"

namespace epsim {
namespace {

bool says(const std::vector<std::string>& lines, const std::string& part) {
  for (const auto& line : lines)
    if (line.find(part) != std::string::npos) return true;
  return false;
}

/// A ce_peer copy series: t = alpha_us + bytes / (400 GB/s), one point per size.
Measurements copies(double alpha_us, const std::vector<double>& sizes) {
  Measurements m;
  m.file = "copies.yaml";
  int line = 3;
  for (double bytes : sizes) {
    CopyPoint p;
    p.kind = CopyKind::ce_peer;
    p.bytes = bytes;
    p.median_us = alpha_us + bytes / 400e3;
    p.where = "copies.yaml:" + std::to_string(line++) + ":5";
    m.copy.push_back(p);
  }
  return m;
}

Calibration fit_published(const std::string& file, const std::string& hardware) {
  const auto src = test::source_dir();
  return fit_measurements({load_measurements((src / "models/measurements" / file).string())},
                          load_hardware((src / "models" / hardware).string()));
}

}  // namespace

TEST_CASE("the extrapolated-intercept rule: a narrow span and a large share of the fastest point") {
  // Hybrid-EP's H100 RDMA dispatch: 3,913.4 us from sizes spanning 9.05 x, its fastest point 3,537 us.
  const std::string hybrid = extrapolated_intercept(3913.4, 1.0, 9.05, 3537.11);
  CHECK(hybrid.find("spanning 9.05 x") != std::string::npos);
  CHECK(hybrid.find("111% of the fastest point's 3537 us") != std::string::npos);
  // TensorRT-LLM's dispatch: 17 us of a 17.6 us fastest point, but from sizes spanning 2,304 x.
  CHECK(extrapolated_intercept(17.0, 1.0, 2304.0, 17.6).empty());
  // DeepEP's H200 RDMA dispatch: 131.8 us from 1.94 x, but 17% of its fastest point (790 us).
  CHECK(extrapolated_intercept(131.79, 1.0, 1.939, 790.09).empty());
  // At the bounds: a span of 16 x exactly, or a third of the fastest point exactly, is not flagged.
  CHECK(extrapolated_intercept(100, 1, 16, 150).empty());
  CHECK_FALSE(extrapolated_intercept(100, 1, 15.99, 150).empty());
  CHECK(extrapolated_intercept(100, 1, 2, 300).empty());
  CHECK_FALSE(extrapolated_intercept(100.01, 1, 2, 300).empty());
  // A negative fixed cost is no overhead to doubt (the fits hold it at 0 and say so); sizes or times
  // that are not positive give nothing to measure against.
  CHECK(extrapolated_intercept(-500, 1, 2, 300).empty());
  CHECK(extrapolated_intercept(100, 0, 2, 300).empty());
  CHECK(extrapolated_intercept(100, -1, 2, 300).empty());
  CHECK(extrapolated_intercept(100, 1, 2, 0).empty());
}

TEST_CASE("a copy fit's fixed cost from two close sizes is flagged but not from a wide sweep") {
  const HardwareSpec base = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  // 1 and 2 GB with 2,000 us fixed: 4,500 and 7,000 us. The line gives alpha 2,000 us exactly, 44% of
  // the fastest point, from sizes 2 x apart.
  {
    const Calibration cal = fit_measurements({copies(2000, {1e9, 2e9})}, base);
    const CopyFit* c = cal.copy(CopyKind::ce_peer);
    REQUIRE(c != nullptr);
    CHECK(c->alpha_us.value == doctest::Approx(2000).epsilon(1e-9));
    CHECK(c->alpha_us.note.find("spanning 2 x, and 44% of the fastest point's 4500 us") != std::string::npos);
    CHECK(says(cal.warnings, "copy ce_peer: the fixed cost 2000 us is extrapolated to zero bytes"));
  }
  // 1,000 us fixed on the same sizes: 3,500 and 6,000 us, 29% of the fastest: not flagged.
  {
    const Calibration cal = fit_measurements({copies(1000, {1e9, 2e9})}, base);
    CHECK(cal.copy(CopyKind::ce_peer)->alpha_us.note.empty());
    CHECK_FALSE(says(cal.warnings, "extrapolated"));
  }
  // 2,000 us fixed from 1 MB to 1 GB: the 1 MB copy (2,002.5 us) shows it nearly bare.
  {
    const Calibration cal = fit_measurements({copies(2000, {1e6, 1e8, 1e9})}, base);
    CHECK(cal.copy(CopyKind::ce_peer)->alpha_us.value == doctest::Approx(2000).epsilon(1e-9));
    CHECK(cal.copy(CopyKind::ce_peer)->alpha_us.note.empty());
    CHECK_FALSE(says(cal.warnings, "extrapolated"));
  }
}

TEST_CASE("Hybrid-EP's H100 RDMA fixed costs are flagged and written so but not TensorRT-LLM's") {
  const Calibration hybrid = fit_published("hybrid-ep-h100-sxm.yaml", "h100-sxm-8.yaml");
  REQUIRE(hybrid.ep_rdma);
  const EpCommFit& rdma = *hybrid.ep_rdma;
  // 54 points at 4,096 tokens a rank: the bytes move with the EP degree and the dtype alone.
  CHECK(rdma.dispatch_fixed_us.value > 3000);
  CHECK(rdma.dispatch_fixed_us.note.find("spanning 9.05 x") != std::string::npos);
  CHECK(rdma.combine_fixed_us.note.find("spanning 4.67 x") != std::string::npos);
  CHECK(says(hybrid.warnings, "ep_comm (RDMA): the dispatch fixed cost"));
  CHECK(says(hybrid.warnings, "ep_comm (RDMA): the combine fixed cost"));
  const std::string yaml = calibrated_hardware_yaml(
      load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string()), "h100-sxm-8.yaml", hybrid, "cal");
  CHECK(yaml.find("extrapolated to zero bytes from sizes spanning 9.05 x") != std::string::npos);

  // 1 to 2,048 tokens a rank: the smallest messages show the fixed costs (17 and 28 us) nearly bare.
  const Calibration trtllm = fit_published("trtllm-one-sided-gb200-nvl72.yaml", "gb200-nvl72.yaml");
  REQUIRE(trtllm.ep_nvlink);
  CHECK(trtllm.ep_nvlink->dispatch_fixed_us.points > 0);
  CHECK(trtllm.ep_nvlink->dispatch_fixed_us.note.empty());
  CHECK(trtllm.ep_nvlink->combine_fixed_us.note.empty());
  CHECK_FALSE(says(trtllm.warnings, "extrapolated"));
}

}  // namespace epsim

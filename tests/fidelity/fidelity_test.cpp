// epsim fidelity on a tiny measurement set written here: the preset column equals the times worked out
// by hand from the preset's own numbers, leave-one-out refits without the point (and so differs from
// the whole-set fit where the point pulls the fit), the summary's median and max are right, the file
// is byte-identical across runs, and a bad row stops the command with one error and no file.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "hw/calibration/fidelity_summary.hpp"
#include "hw/calibration/fidelity_table.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/config/loaders.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;
namespace fs = std::filesystem;

namespace {

constexpr double kMiB = 1048576.0;

/// Copy Engine peer copies on the line t = 3 + bytes / 200 GB/s, except the 64 MiB one (360 us, off
/// the line): the leave-one-out fit of that point is the line itself.
double on_line_us(double bytes) { return 3.0 + bytes / 200e3; }

struct GemmRow {
  int experts;
  int rows;
  double factor;  ///< measured = preset time x factor
};
const GemmRow kGemmRows[] = {{8, 128, 1.03}, {16, 128, 0.98}, {8, 1024, 1.05}, {16, 1024, 0.96}};

/// The preset's grouped-GEMM time worked out by hand: launch + max(FLOPs / (eta * peak), bytes / hbm),
/// hidden 4096, ffn 2048, 3 BF16 matrices; `rows` must be a knot of the preset's efficiency curve.
double gemm_by_hand_us(const HardwareSpec& hw, int experts, int rows) {
  double eta = -1;
  for (const auto& k : hw.gemm.efficiency)
    if (k.tokens_per_expert == rows) eta = k.efficiency;
  REQUIRE(eta > 0);
  const double h = 4096, f = 2048;
  const double flops = 2.0 * 3 * h * f * rows * experts;
  const double bytes = experts * (3 * h * f * 2 + rows * 2.0 * (2 * h + 2 * 2 * f));
  return hw.gemm.launch_us + std::max(flops / (eta * hw.gpu.bf16_peak_TFLOPs * 1e6), bytes / (hw.gpu.hbm_GBps * 1e3));
}

std::string fmt(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

/// A scratch folder with models/h100-sxm-8.yaml (the shipped preset) and set.yaml.
fs::path tiny_set(const std::string& name, const std::string& bad_row = "") {
  const fs::path dir = test::scratch_dir(name);
  fs::create_directories(dir / "models");
  fs::copy_file(test::source_dir() / "models" / "h100-sxm-8.yaml", dir / "models" / "h100-sxm-8.yaml");
  const HardwareSpec hw = load_hardware((dir / "models" / "h100-sxm-8.yaml").string());
  std::ostringstream y;
  y << "kind: measurements\n"
       "header:\n  gpu: NVIDIA H100 80GB HBM3\n  driver: \"550.54.15\"\n  cuda: \"12.4\"\n"
       "  sm_clock_MHz: 1980\n  mem_clock_MHz: 2619\n  date: 2026-11-20\n  tool: hand-made\n"
       "copy:\n";
  for (double mib : {1.0, 4.0, 16.0})
    y << "  - {kind: ce_peer, bytes: " << fmt("%.0f", mib * kMiB) << ", median_us: " << fmt("%.6f", on_line_us(mib * kMiB))
      << "}\n";
  y << "  - {kind: ce_peer, bytes: " << fmt("%.0f", 64 * kMiB) << ", median_us: 360}\n" << bad_row;
  y << "grouped_gemm:\n";
  for (const GemmRow& g : kGemmRows)
    y << "  - {experts: " << g.experts << ", tokens_per_expert: " << g.rows
      << ", hidden_size: 4096, ffn_size: 2048, matrices: 3, dtype_bytes: 2, median_us: "
      << fmt("%.6f", gemm_by_hand_us(hw, g.experts, g.rows) * g.factor) << "}\n";
  test::write_file(dir / "set.yaml", y.str());
  return dir;
}

const FidelityRow& row_with(const std::vector<FidelityRow>& rows, const std::string& prefix) {
  for (const FidelityRow& r : rows)
    if (r.point.setting.rfind(prefix, 0) == 0) return r;
  FAIL("no row " << prefix);
  return rows.front();
}

}  // namespace

TEST_CASE("fidelity: preset predictions are the hand-worked times, leave-one-out refits without the point") {
  const fs::path dir = tiny_set("fidelity_rows");
  const HardwareSpec hw = load_hardware((dir / "models" / "h100-sxm-8.yaml").string());
  const std::vector<FidelityRow> rows =
      fidelity_rows({load_measurements((dir / "set.yaml").string())}, (dir / "models").string(), "h100-sxm-8");
  REQUIRE(rows.size() == 8);

  // Copy Engine peer copy on the preset: fixed cost, then the bytes at the engine's bandwidth (below
  // the NVLink port's, so the engine's cap binds).
  REQUIRE(hw.copy_engine.bw_GBps < hw.nvlink.port_bw_GBps);
  const FidelityRow& big = row_with(rows, "Copy Engine to a peer (NVLink), 64 MiB");
  CHECK(big.point.measured_us == 360);
  REQUIRE(big.preset.ok);
  CHECK(big.preset.us == doctest::Approx(hw.copy_engine.fixed_cost_us + 64 * kMiB / (hw.copy_engine.bw_GBps * 1e3)).epsilon(1e-6));
  // Without the 64 MiB point the three others lie on t = 3 + bytes / 200 GB/s exactly.
  REQUIRE(big.loo.ok);
  CHECK(big.loo.us == doctest::Approx(on_line_us(64 * kMiB)).epsilon(1e-6));
  // With it, the fit is pulled towards 360 us: the fitted prediction is not the leave-one-out one.
  REQUIRE(big.fitted.ok);
  CHECK(big.fitted.us > big.loo.us + 1.0);
  CHECK(big.fitted.us < 360.0);

  // A grouped GEMM on the preset: the roofline worked out by hand.
  const FidelityRow& gemm = row_with(rows, "grouped GEMM BF16, 16 experts x 1024 rows");
  REQUIRE(gemm.preset.ok);
  CHECK(gemm.preset.us == doctest::Approx(gemm_by_hand_us(hw, 16, 1024)).epsilon(1e-6));
  CHECK(gemm.point.kind == FidelityKind::gemm);
}

TEST_CASE("fidelity: the summary's median and max of |error| per kind and column") {
  std::vector<FidelityRow> rows;
  const double predicted[] = {101, 97, 110, 150};  // errors +1%, -3%, +10%, +50%
  for (double p : predicted) {
    FidelityRow r;
    r.point.kind = FidelityKind::dispatch;
    r.point.measured_us = 100;
    r.preset = {p, true, ""};
    r.loo = {0, false, "only point of its kind"};
    rows.push_back(r);
  }
  FidelityRow other;
  other.point.kind = FidelityKind::combine;
  other.point.measured_us = 10;
  other.preset = {12, true, ""};
  rows.push_back(other);

  const ErrorStats s = error_stats(rows, FidelityKind::dispatch, FidelityColumn::preset);
  CHECK(s.rows == 4);
  CHECK(s.predicted == 4);
  CHECK(s.median == doctest::Approx(0.065));  // mean of 3% and 10%
  CHECK(s.max == doctest::Approx(0.5));
  CHECK_FALSE(s.meets_target());
  rows.pop_back();
  rows.pop_back();  // 1%, 3%, 10%: median 3%, max 10%
  const ErrorStats three = error_stats(rows, FidelityKind::dispatch, FidelityColumn::preset);
  CHECK(three.median == doctest::Approx(0.03));
  CHECK(three.max == doctest::Approx(0.10));
  CHECK(three.meets_target());
  const ErrorStats loo = error_stats(rows, FidelityKind::dispatch, FidelityColumn::loo);
  CHECK(loo.rows == 3);
  CHECK(loo.predicted == 0);
  CHECK_FALSE(loo.meets_target());
}

TEST_CASE("epsim fidelity writes the table, byte-identical on a rerun, and replaces it only with --force") {
  const fs::path dir = tiny_set("fidelity_cli");
  const HardwareSpec hw = load_hardware((dir / "models" / "h100-sxm-8.yaml").string());
  const std::string args = "fidelity set.yaml --models models --hardware h100-sxm-8 --no-deepseek -o out/fidelity.md";
  const auto first = test::run_epsim(args, dir);
  REQUIRE_MESSAGE(first.status == 0, first.err);
  CHECK(first.err.find("wrote out/fidelity.md in") != std::string::npos);
  const std::string text = test::read_file(dir / "out" / "fidelity.md");

  // The 64 MiB row: measured, preset (hand-worked), then the leave-one-out line value.
  const std::size_t at = text.find("| Copy Engine to a peer (NVLink), 64 MiB, h100-sxm-8 | 360.0 | ");
  REQUIRE(at != std::string::npos);
  const std::string line = text.substr(at, text.find('\n', at) - at);
  const double preset = hw.copy_engine.fixed_cost_us + 64 * kMiB / (hw.copy_engine.bw_GBps * 1e3);
  CHECK(line.find("| 360.0 | " + fmt("%.1f", preset) + " | " + fmt("%+.1f%%", 100 * (preset - 360) / 360) + " |") !=
        std::string::npos);
  CHECK(line.find("| " + fmt("%.1f", on_line_us(64 * kMiB)) + " | " +
                  fmt("%+.1f%%", 100 * (on_line_us(64 * kMiB) - 360) / 360) + " |") != std::string::npos);
  CHECK(text.find("## Summary") != std::string::npos);
  CHECK(text.find("| Copy | 4 |") != std::string::npos);
  CHECK(text.find("| GEMM | 4 |") != std::string::npos);

  // Same inputs, same bytes; an existing file is kept without --force.
  const auto refused = test::run_epsim(args, dir);
  CHECK(refused.status == 2);
  CHECK(refused.err.find("--force") != std::string::npos);
  const auto second = test::run_epsim(args + " --force", dir);
  REQUIRE_MESSAGE(second.status == 0, second.err);
  CHECK(test::read_file(dir / "out" / "fidelity.md") == text);
  CHECK(test::leftovers(dir / "out").empty());
}

TEST_CASE("epsim fidelity: a measurement file with a bad row is one error and leaves no output") {
  const fs::path dir = tiny_set("fidelity_bad_row", "  - {kind: ce_peer, bytes: 1048576, median_us: -4}\n");
  const auto r = test::run_epsim("fidelity set.yaml --models models --hardware h100-sxm-8 --no-deepseek -o out.md", dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("set.yaml:") != std::string::npos);
  CHECK(r.err.find("median_us") != std::string::npos);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_FALSE(fs::exists(dir / "out.md"));
  CHECK(test::leftovers(dir).empty());
}

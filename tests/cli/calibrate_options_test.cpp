// `epsim calibrate`'s command line as a user types it: what is missing is named before anything is
// read, an existing output is refused before the fit, and --points and -q change what is printed.
// The measurements are the published pplx-kernels figures (4 ep_comm points on one H100 node).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

const fs::path kSource = source_dir();
const std::string kPplx = quoted(kSource / "models" / "measurements" / "pplx-kernels-h100-sxm.yaml");
const std::string kBase = quoted(kSource / "models" / "h100-sxm-8.yaml");

}  // namespace

TEST_CASE("epsim calibrate: no measurement file, no --base or no -o is named, and nothing is written") {
  const fs::path dir = scratch_dir("calibrate_options_missing");
  struct Case {
    std::string args;
    const char* message;
  };
  for (const Case& c : {Case{"--base " + kBase + " -o out.yaml", "missing MEASUREMENTS.yaml"},
                        Case{kPplx + " -o out.yaml", "missing --base HARDWARE.yaml"},
                        Case{kPplx + " --base " + kBase, "missing -o OUT.yaml"}}) {
    CAPTURE(c.args);
    const CliResult r = run_epsim("calibrate " + c.args, dir);
    CHECK(r.status == 2);
    CHECK(r.err == std::string("epsim: error: command line: ") + c.message + " (see epsim calibrate --help)\n");
    CHECK(r.out.empty());
  }
  CHECK(fs::is_empty(dir));
}

TEST_CASE("epsim calibrate: an existing output is refused before the measurements are read") {
  const fs::path dir = scratch_dir("calibrate_options_existing");
  write_file(dir / "out.yaml", "the user's hardware file\n");
  // The measurements do not exist: the output is named first, so nothing was fitted for nothing.
  const CliResult r = run_epsim("calibrate missing.yaml --base " + kBase + " -o out.yaml", dir);
  CHECK(r.status == 2);
  CHECK(r.err ==
        "epsim: error: out.yaml: the output file already exists; pass --force to replace it or choose another output\n");
  CHECK(read_file(dir / "out.yaml") == "the user's hardware file\n");
}

TEST_CASE("epsim calibrate: every point is listed with --points alone, and -q prints nothing") {
  const fs::path dir = scratch_dir("calibrate_options_output");
  const std::string args = "calibrate " + kPplx + " --base " + kBase + " --force -o out.yaml";
  const CliResult plain = run_epsim(args, dir);
  const CliResult points = run_epsim(args + " --points", dir);
  const CliResult quiet = run_epsim(args + " -q", dir);
  REQUIRE(plain.status == 0);
  REQUIRE(points.status == 0);
  REQUIRE(quiet.status == 0);
  CHECK(says(plain.out, "ep_comm: 4 pts, median |res|"));
  CHECK_FALSE(says(plain.out, "measured/model us"));
  // One line of times per point: pplx's dispatch and combine at 1 and 128 tokens.
  std::size_t listed = 0;
  for (std::size_t at = points.out.find("measured/model us"); at != std::string::npos;
       at = points.out.find("measured/model us", at + 1))
    ++listed;
  CHECK(listed == 4);
  CHECK(quiet.out.empty());
  CHECK(quiet.err.empty());
  CHECK(says(read_file(dir / "out.yaml"), "name: out"));
}

TEST_CASE("epsim calibrate: a series' median and largest residual are those of the points it lists") {
  // DeepEP's published PCIe figures on an H100 base (4 ep_comm points): the residuals listed by
  // --points, in %, are -6.27, -7.55, +3.82 and +0.84, so the median |residual| is (3.82 + 6.27) / 2 =
  // 5.045 (an even count: the mean of the middle two) and the largest is -7.55, below zero.
  const fs::path dir = scratch_dir("calibrate_options_residuals");
  const std::string pcie = quoted(kSource / "models" / "measurements" / "deepep-pcie-h20.yaml");
  const CliResult r = run_epsim("calibrate " + pcie + " --base " + kBase + " -o out.yaml --points", dir);
  REQUIRE(r.status == 0);
  std::vector<double> listed;
  for (std::size_t at = r.out.find("measured/model us"); at != std::string::npos;
       at = r.out.find("measured/model us", at + 1)) {
    const std::size_t percent = r.out.find('%', at);
    const std::size_t start = r.out.rfind(' ', percent) + 1;
    listed.push_back(std::stod(r.out.substr(start, percent - start)));
  }
  CHECK(listed == std::vector<double>{-6.27, -7.55, 3.82, 0.84});
  const std::string summary = "ep_comm: 4 pts, median |res| ";
  const std::size_t median_at = r.out.find(summary);
  REQUIRE(median_at != std::string::npos);
  const double median = std::stod(r.out.substr(median_at + summary.size()));
  CHECK(median == doctest::Approx(5.045).epsilon(0.002));  // (to the listed residuals' two decimals)
  const std::size_t max_at = r.out.find(", max ", median_at);
  REQUIRE(max_at != std::string::npos);
  CHECK(std::stod(r.out.substr(max_at + 6)) == doctest::Approx(-7.55).epsilon(0.001));
}

TEST_CASE("epsim calibrate: a copy measured at one size keeps the base file's fixed cost") {
  // nvbandwidth's H200 copies: one size each, so the fixed cost cannot be fitted; it is the base
  // file's 2.5 us, and the bandwidth alone comes from the point.
  const fs::path dir = scratch_dir("calibrate_options_one_size");
  const std::string copies = quoted(kSource / "models" / "measurements" / "copy-nvbandwidth-h200.yaml");
  const CliResult r = run_epsim("calibrate " + copies + " --base " + kBase + " -o out.yaml", dir);
  REQUIRE(r.status == 0);
  CHECK(says(r.out, "copy ce_peer: alpha kept 2.5 us, beta 397.13 +- n/a GB/s (1 pts)"));
  CHECK(says(r.out, "warning: copy ce_peer: one size only; the fixed cost 2.5 us is kept from the base file"));
}

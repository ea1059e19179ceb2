// The strict reader of kind: measurements files, on the fixtures in tests/fixtures/measurements
// (each bad fixture says on its first line what is wrong).
#include "hw/calibration/measurements.hpp"

#include <doctest/doctest.h>

#include <string>

#include "hw/calibration/calibration_fit.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

namespace {

std::string fixture(const std::string& name) {
  return (test::source_dir() / "tests/fixtures/measurements" / name).string();
}

template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

std::string load_error(const std::string& name) {
  return error_of([&] { load_measurements(fixture(name)); });
}

bool starts_with(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

}  // namespace

TEST_CASE("a measurements file loads with its header and every series") {
  const Measurements m = load_measurements(fixture("small.yaml"));
  CHECK(m.file == fixture("small.yaml"));
  CHECK(m.header.gpu == "NVIDIA H100 80GB HBM3 (synthetic example)");
  CHECK(m.header.driver == "550.54.15");
  CHECK(m.header.cuda == "12.4");
  CHECK(m.header.sm_clock_MHz == 1980);
  CHECK(m.header.mem_clock_MHz == 2619);
  CHECK(m.header.date == "2026-11-20");
  REQUIRE(m.copy.size() == 7);
  CHECK(m.copy[0].kind == CopyKind::ce_peer);
  CHECK(m.copy[0].bytes == 65536);
  CHECK(m.copy[0].median_us == 2.668);
  CHECK(m.copy[0].repetitions == 50);
  CHECK(m.copy[0].where == fixture("small.yaml") + ":12:5");
  CHECK(m.copy[4].kind == CopyKind::h2d);
  REQUIRE(m.all_to_all.size() == 3);
  CHECK(m.all_to_all[2].ranks == 8);
  CHECK(m.grouped_gemm.empty());
  CHECK(m.gemm_with_copy.empty());
}

TEST_CASE("the synthetic example file holds every series") {
  const Measurements m = load_measurements(fixture("synthetic-h100.yaml"));
  CHECK(m.copy.size() == 40);
  CHECK(m.all_to_all.size() == 14);
  CHECK(m.grouped_gemm.size() == 32);
  CHECK(m.gemm_with_copy.size() == 6);
  CHECK(m.gemm_with_copy[0].copy_GBps == 100);
  CHECK(m.grouped_gemm[0].shape.matrices == 3);
}

TEST_CASE("malformed measurement files are refused with file:line:col") {
  CHECK(load_error("bad-unknown-key.yaml") ==
        fixture("bad-unknown-key.yaml") + ":6:37: unknown key 'median_usec' in copy[1]; did you mean 'median_us'?");
  CHECK(load_error("bad-negative-time.yaml") ==
        fixture("bad-negative-time.yaml") + ":5:46: copy[0].median_us: expected a number > 0, got -2.5");
  CHECK(load_error("bad-wrong-type.yaml") ==
        fixture("bad-wrong-type.yaml") +
            ":5:32: all_to_all[0].bytes_per_pair: expected a number, got the string '262144'");
  CHECK(load_error("bad-empty-series.yaml") ==
        fixture("bad-empty-series.yaml") +
            ":4:1: grouped_gemm: empty series (give at least one point, or leave the key out)");
  const std::string none = load_error("bad-no-series.yaml");
  CHECK(starts_with(none, fixture("bad-no-series.yaml") + ":2:1: no measurement series"));
  CHECK(load_error("bad-copy-kind.yaml") ==
        fixture("bad-copy-kind.yaml") + ":5:12: copy[0].kind: expected one of ce_local, ce_peer, h2d, d2h, sm_copy, "
                                        "got 'ce_peers'; did you mean 'ce_peer'?");
  CHECK(load_error("bad-header.yaml") == fixture("bad-header.yaml") + ":3:1: missing key 'cuda' in header");
  CHECK(starts_with(error_of([] { load_measurements(fixture("missing.yaml")); }),
                    fixture("missing.yaml") + ": cannot open"));
  // A hardware file is not a measurements file.
  CHECK(error_of([] { load_measurements((test::source_dir() / "models/h100-sxm-8.yaml").string()); })
            .find("expected kind: measurements, got 'hardware'") != std::string::npos);
}

TEST_CASE("a series that cannot determine its parameters is refused at its first point") {
  const Measurements m = load_measurements(fixture("bad-one-size.yaml"));
  const HardwareSpec base = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  CHECK(error_of([&] { fit_measurements({m}, base); }) ==
        fixture("bad-one-size.yaml") +
            ":5:5: copy ce_peer: need at least two different sizes to separate the fixed cost from the bandwidth");
}

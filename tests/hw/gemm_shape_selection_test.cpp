// Fitting the GEMM curve to chosen expert shapes (`epsim calibrate --gemm-shapes`): the list read
// strictly, the points kept and left out counted by hand, and the command's output and refusals on
// epsim's own H100 suite (2 dtypes x 28 row counts: 7168 x 2048 with 1, 8 and 32 experts is 168
// points, 4096 x 1536 with 8 and 32 experts 112).
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "hw/calibration/gemm_shape_selection.hpp"
#include "hw/calibration/measurements.hpp"
#include "sim/core/input_error.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace epsim {
namespace {

GemmPoint expert_point(int hidden, int ffn, std::int64_t rows, const std::string& where) {
  GemmPoint p;
  p.shape.experts = 8;
  p.shape.tokens_per_expert = rows;
  p.shape.hidden_size = hidden;
  p.shape.ffn_size = ffn;
  p.shape.matrices = 3;
  p.shape.dtype_bytes = 2;
  p.median_us = 100;
  p.where = where;
  return p;
}

/// Two sets: the first with 4096 x 1536 at 1 row count, then 6144 x 2048 at 2, and a single GEMM call;
/// the second with 6144 x 2048 at 1 row count and a copy.
std::vector<Measurements> two_sets() {
  Measurements a;
  a.file = "a.yaml";
  a.grouped_gemm = {expert_point(4096, 1536, 128, "a.yaml:3:5"), expert_point(6144, 2048, 128, "a.yaml:4:5"),
                    expert_point(6144, 2048, 4096, "a.yaml:5:5")};
  a.gemm.emplace_back();
  Measurements b;
  b.file = "b.yaml";
  b.grouped_gemm = {expert_point(6144, 2048, 512, "b.yaml:3:5")};
  b.copy.emplace_back();
  return {a, b};
}

}  // namespace

TEST_CASE("the --gemm-shapes list is read as HIDDENxFFN items and refuses anything else by name") {
  const std::vector<ExpertShape> one = parse_expert_shapes("6144x2048", "--gemm-shapes");
  REQUIRE(one.size() == 1);
  CHECK(one[0].hidden_size == 6144);
  CHECK(one[0].ffn_size == 2048);
  // A shape named twice counts once, in the order first named.
  const std::vector<ExpertShape> three = parse_expert_shapes("7168x2048,4096x1536,7168x2048", "--gemm-shapes");
  REQUIRE(three.size() == 2);
  CHECK(to_string(three[0]) == "7168x2048");
  CHECK(to_string(three[1]) == "4096x1536");
  for (const char* bad : {"6144", "6144x", "x2048", "6144x0", "0x2048", "6144x2048x1", "-6144x2048", "+6144x2048",
                          "6144 x 2048", "6144X2048", "1234567890x2048", ""}) {
    CAPTURE(bad);
    const std::string expected =
        std::string("command line:--gemm-shapes: '") + bad + "' is not HIDDENxFFN (two positive integers, e.g. 6144x2048)";
    CHECK_THROWS_WITH_AS(parse_expert_shapes(bad, "--gemm-shapes"), doctest::Contains(expected.c_str()), InputError);
  }
  // In a list, the item is named and the list after it.
  CHECK_THROWS_WITH_AS(parse_expert_shapes("6144x2048,,7168x2048", "--gemm-shapes"),
                       doctest::Contains("'' is not HIDDENxFFN (two positive integers, e.g. 6144x2048) in "
                                         "'6144x2048,,7168x2048'"),
                       InputError);
}

TEST_CASE("select_gemm_shapes keeps the expert points of the shapes named and drops the others and every call") {
  std::vector<Measurements> sets = two_sets();
  const GemmShapeSelection s = select_gemm_shapes(sets, {ExpertShape{6144, 2048}}, "--gemm-shapes");
  CHECK(s.kept == 3);      // two in a.yaml, one in b.yaml
  CHECK(s.left_out == 2);  // a.yaml's 4096 x 1536 point and its single call
  CHECK(s.absent.empty());
  REQUIRE(sets[0].grouped_gemm.size() == 2);
  CHECK(sets[0].grouped_gemm[0].where == "a.yaml:4:5");  // in the files' order
  CHECK(sets[0].grouped_gemm[1].where == "a.yaml:5:5");
  CHECK(sets[0].gemm.empty());
  CHECK(sets[1].grouped_gemm.size() == 1);
  CHECK(sets[1].copy.size() == 1);  // other series untouched

  std::vector<Measurements> again = two_sets();
  const GemmShapeSelection with_absent =
      select_gemm_shapes(again, {ExpertShape{7168, 2048}, ExpertShape{4096, 1536}}, "--gemm-shapes");
  CHECK(with_absent.kept == 1);
  CHECK(with_absent.left_out == 4);
  REQUIRE(with_absent.absent.size() == 1);
  CHECK(to_string(with_absent.absent[0]) == "7168x2048");

  std::vector<Measurements> none = two_sets();
  CHECK_THROWS_WITH_AS(select_gemm_shapes(none, {ExpertShape{7168, 2048}}, "--gemm-shapes"),
                       doctest::Contains("command line:--gemm-shapes: no grouped_gemm point of shape 7168x2048 "
                                         "(the files have: 4096x1536, 6144x2048)"),
                       InputError);
}

TEST_CASE("epsim calibrate --gemm-shapes on epsim's H100 suite: what is fitted is said and a shape not measured is refused") {
  const std::filesystem::path dir = test::scratch_dir("calibrate_gemm_shapes");
  const std::filesystem::path src = test::source_dir();
  const std::string args = "calibrate " + test::quoted(src / "models/measurements/epsim-suite-h100-sxm.yaml") + " --base " +
                           test::quoted(src / "models/h100-sxm-8.yaml") + " --force -o ";
  const test::CliResult one = test::run_epsim(args + "one.yaml --gemm-shapes 7168x2048", dir);
  CHECK(one.status == 0);
  CHECK(test::says(one.out, "gemm: fitted to the 168 grouped_gemm points of shape 7168x2048 (--gemm-shapes); "
                            "112 other GEMM points left out"));
  CHECK(test::says(one.out, "  gemm (168 pts): "));
  CHECK(test::says(one.out, "grouped_gemm: 168 pts, median |res|"));
  const test::CliResult pooled = test::run_epsim(args + "pooled.yaml", dir);
  CHECK(test::says(pooled.out, "  gemm (280 pts): "));
  CHECK_FALSE(test::says(pooled.out, "--gemm-shapes"));

  const test::CliResult partly = test::run_epsim(args + "partly.yaml --gemm-shapes 6144x2048,4096x1536", dir);
  CHECK(partly.status == 0);
  CHECK(test::says(partly.out, "fitted to the 112 grouped_gemm points of shapes 6144x2048, 4096x1536"));
  CHECK(test::says(partly.out, "warning: gemm: no grouped_gemm point of shape 6144x2048 (--gemm-shapes)"));

  const test::CliResult absent = test::run_epsim(args + "absent.yaml --gemm-shapes 6144x2048", dir);
  test::check_refused(absent, "command line:--gemm-shapes: no grouped_gemm point of shape 6144x2048 (the files have: "
                              "4096x1536, 7168x2048)");
  CHECK_FALSE(std::filesystem::exists(dir / "absent.yaml"));
  // A malformed list is refused before any file is read: here the measurements do not exist.
  const test::CliResult malformed =
      test::run_epsim("calibrate nowhere.yaml --base nowhere-either.yaml -o x.yaml --gemm-shapes 6144", dir);
  test::check_refused(malformed, "command line:--gemm-shapes: '6144' is not HIDDENxFFN");
}

}  // namespace epsim

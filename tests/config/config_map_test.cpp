// ConfigMap on inline YAML: types, ranges, consumption, typos and positions. Lines and columns in the
// expected messages are 1-based positions in the strings below.
#include "sim/config/config_map.hpp"

#include <doctest/doctest.h>

#include <string>

#include "sim/core/input_error.hpp"

namespace {

using epsim::ConfigMap;
using epsim::InputError;

ConfigMap map_of(const std::string& text, const std::string& path = "") {
  return ConfigMap(YAML::Load(text), "t.yaml", path);
}

/// The message of the InputError that `f` throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

constexpr double kPositive = 1e-300;
constexpr double kHuge = 1e308;

}  // namespace

TEST_CASE("ConfigMap reads every type and finish() accepts a fully consumed mapping") {
  ConfigMap m = map_of("s: hello\nd: 2.5\ni: -3\nb: true\nc: direct\nsub: {x: 1}\n");
  CHECK(m.get_string("s") == "hello");
  CHECK(m.get_double("d", 0, 10) == doctest::Approx(2.5));
  CHECK(m.get_int("i", -10, 10) == -3);
  CHECK(m.get_bool("b"));
  CHECK(m.get_choice("c", {"rail_forward", "direct"}) == "direct");
  ConfigMap sub = m.get_map("sub");
  CHECK(sub.get_int("x", 0, 5) == 1);
  sub.finish();
  CHECK_NOTHROW(m.finish());
}

TEST_CASE("Optional getters fall back when the key is absent and check it when present") {
  ConfigMap m = map_of("present: 7\n");
  CHECK(m.get_int_or("present", 1, 0, 10) == 7);
  CHECK(m.get_int_or("absent", 1, 0, 10) == 1);
  CHECK(m.get_double_or("absent_d", 0.5, 0, 1) == doctest::Approx(0.5));
  CHECK(m.get_string_or("absent_s", "x") == "x");
  CHECK_FALSE(m.get_bool_or("absent_b", false));
  CHECK(m.get_choice_or("absent_c", "a", {"a", "b"}) == "a");
  CHECK_FALSE(m.get_map_opt("absent_m").has_value());
  CHECK(m.get_raw("absent_r").IsNull());
  CHECK_NOTHROW(m.finish());
  ConfigMap bad = map_of("n: 11\n");
  CHECK(error_of([&] { bad.get_int_or("n", 1, 0, 10); }) ==
        "t.yaml:1:4: n: expected an integer in [0, 10], got 11");
}

TEST_CASE("Wrong types are named with the key path and the value as written") {
  ConfigMap m = map_of("a: 1\nnvlink:\n  port_bw_GBps: fast\n");
  ConfigMap nv = m.get_map("nvlink");
  CHECK(error_of([&] { nv.get_double("port_bw_GBps", kPositive, kHuge); }) ==
        "t.yaml:3:17: nvlink.port_bw_GBps: expected a number, got 'fast'");
  CHECK(error_of([&] { m.get_map("a"); }) ==
        "t.yaml:1:4: a: expected a mapping (nested key: value lines), got '1'");
}

TEST_CASE("get_int rejects fractions and words, quoted numbers are strings") {
  ConfigMap m = map_of("f: 2.5\nw: abc\nq: \"5\"\nl: [1]\nbig: 99999999999999999999\n");
  CHECK(error_of([&] { m.get_int("f", 0, 10); }) == "t.yaml:1:4: f: expected an integer, got '2.5'");
  CHECK(error_of([&] { m.get_int("w", 0, 10); }) == "t.yaml:2:4: w: expected an integer, got 'abc'");
  CHECK(error_of([&] { m.get_int("q", 0, 10); }) == "t.yaml:3:4: q: expected an integer, got the string '5'");
  CHECK(error_of([&] { m.get_int("l", 0, 10); }) == "t.yaml:4:4: l: expected an integer, got a sequence");
  CHECK(error_of([&] { m.get_int("big", 0, 10); }) ==
        "t.yaml:5:6: big: integer out of range, got 99999999999999999999");
}

TEST_CASE("Ranges are written readably, zero is rejected where a value must be positive") {
  ConfigMap m = map_of("zero: 0\neff: 1.5\nneg: -1\nlarge: 3000000000\nnan: .nan\n");
  CHECK(error_of([&] { m.get_double("zero", kPositive, kHuge); }) ==
        "t.yaml:1:7: zero: expected a number > 0, got 0");
  CHECK(error_of([&] { m.get_double("eff", kPositive, 1.0); }) ==
        "t.yaml:2:6: eff: expected a number in (0, 1], got 1.5");
  CHECK(error_of([&] { m.get_double("neg", 0, kHuge); }) ==
        "t.yaml:3:6: neg: expected a number >= 0, got -1");
  CHECK(error_of([&] { m.get_int("neg", 1, 2147483647); }) ==
        "t.yaml:3:6: neg: expected an integer >= 1, got -1");
  CHECK(error_of([&] { m.get_int("large", 1, 2147483647); }) ==
        "t.yaml:4:8: large: expected an integer in [1, 2147483647], got 3000000000");
  CHECK(error_of([&] { m.get_double("nan", 0, 1); }) == "t.yaml:5:6: nan: expected a number, got '.nan'");
}

TEST_CASE("get_bool accepts true and false only") {
  ConfigMap m = map_of("t: true\nf: false\ny: yes\nc: True\n");
  CHECK(m.get_bool("t"));
  CHECK_FALSE(m.get_bool("f"));
  CHECK(error_of([&] { m.get_bool("y"); }) == "t.yaml:3:4: y: expected true or false, got 'yes'");
  CHECK(error_of([&] { m.get_bool("c"); }) == "t.yaml:4:4: c: expected true or false, got 'True'");
}

TEST_CASE("get_choice names the choices and guesses a near miss") {
  ConfigMap m = map_of("route: rail-forward\nother: ring\n");
  CHECK(error_of([&] {
          m.get_choice("route", {"rail_forward", "direct"});
        }) ==
        "t.yaml:1:8: route: expected one of rail_forward, direct, got 'rail-forward'; did you mean "
        "'rail_forward'?");
  CHECK(error_of([&] {
          m.get_choice("other", {"rail_forward", "direct"});
        }) == "t.yaml:2:8: other: expected one of rail_forward, direct, got 'ring'");
}

TEST_CASE("finish() names the first unknown key, the allowed keys and a likely typo") {
  ConfigMap top = map_of("nvlink:\n  port_bw_GBps: 450\n  bandwith_GBps: 400\n  latency_us: 1\n");
  ConfigMap nv = top.get_map("nvlink");
  nv.get_double("port_bw_GBps", kPositive, kHuge);
  nv.get_double("latency_us", 0, kHuge);
  CHECK(error_of([&] { nv.finish(); }) ==
        "t.yaml:3:3: unknown key 'bandwith_GBps' in nvlink (expected one of: latency_us, port_bw_GBps)");

  ConfigMap m = map_of("seed: 1\nplacment: interleaved\n");
  m.get_int("seed", 0, 10);
  m.get_string_or("placement", "contiguous");
  CHECK(error_of([&] { m.finish(); }) ==
        "t.yaml:2:1: unknown key 'placment' (expected one of: placement, seed); did you mean 'placement'?");
}

TEST_CASE("A missing required key is reported at its mapping, or as the typo that hides it") {
  ConfigMap top = map_of("name: x\ngpu:\n  bf16_peak_TFLOPs: 989\n");
  ConfigMap gpu = top.get_map("gpu");
  CHECK(error_of([&] { gpu.get_int("sms", 1, 1000); }) == "t.yaml:2:1: missing key 'sms' in gpu");
  ConfigMap typo = map_of("port_bw_GBsp: 450\n", "nvlink");
  CHECK(error_of([&] { typo.get_double("port_bw_GBps", kPositive, kHuge); }) ==
        "t.yaml:1:1: unknown key 'port_bw_GBsp' in nvlink; did you mean 'port_bw_GBps'?");
  ConfigMap top_level = map_of("nmae: x\n");
  CHECK(error_of([&] { top_level.get_string("name"); }) ==
        "t.yaml:1:1: unknown key 'nmae'; did you mean 'name'?");
}

TEST_CASE("Curves are sequences of [x, y] pairs with x > 0 strictly increasing and y in range") {
  ConfigMap good = map_of("c: [[128, 0.2], [256, 0.3]]\n");
  const auto curve = good.get_curve("c", 1, kPositive, 1.0);
  REQUIRE(curve.size() == 2);
  CHECK(curve[1].first == 256);
  CHECK(curve[1].second == doctest::Approx(0.3));

  ConfigMap m = map_of(
      "dec:\n  - [256, 0.2]\n  - [128, 0.3]\n"
      "y: [[1, 1.5]]\n"
      "pair: [[1, 2, 3]]\n"
      "zero: [[0, 0.5]]\n"
      "scalar: 5\n"
      "empty: []\n"
      "word: [[1, high]]\n",
      "gemm");
  CHECK(error_of([&] { m.get_curve("dec", 1, kPositive, 1.0); }) ==
        "t.yaml:3:5: gemm.dec[1]: x must be strictly increasing, got 128 after 256");
  CHECK(error_of([&] { m.get_curve("y", 1, kPositive, 1.0); }) ==
        "t.yaml:4:5: gemm.y[0]: y expected in (0, 1], got 1.5");
  CHECK(error_of([&] { m.get_curve("pair", 1, kPositive, 1.0); }) ==
        "t.yaml:5:8: gemm.pair[0]: expected an [x, y] pair, got a sequence");
  CHECK(error_of([&] { m.get_curve("zero", 1, kPositive, 1.0); }) ==
        "t.yaml:6:8: gemm.zero[0]: x must be > 0, got 0");
  CHECK(error_of([&] { m.get_curve("scalar", 1, kPositive, 1.0); }) ==
        "t.yaml:7:9: gemm.scalar: expected a sequence of [x, y] pairs, got '5'");
  CHECK(error_of([&] { m.get_curve("empty", 1, kPositive, 1.0); }) ==
        "t.yaml:8:8: gemm.empty: expected at least 1 [x, y] point, got 0");
  CHECK(error_of([&] { m.get_curve("word", 1, kPositive, 1.0); }) ==
        "t.yaml:9:8: gemm.word[0]: expected numbers in [x, y], got 'high'");
}

TEST_CASE("Non-mappings, duplicate keys and empty documents") {
  CHECK(error_of([] { map_of("- a\n- b\n"); }) ==
        "t.yaml:1:1: expected a mapping (key: value lines) at the top of the file, got a sequence");
  CHECK(error_of([] { map_of("just text\n", "balancer.params"); }) ==
        "t.yaml:1:1: expected a mapping (key: value lines) at balancer.params, got 'just text'");
  CHECK(error_of([] { map_of("a: 1\nb: 2\na: 3\n"); }) == "t.yaml:3:1: duplicate key 'a' (first at line 1)");
  ConfigMap empty = map_of("");
  CHECK_FALSE(empty.has("anything"));
  CHECK(error_of([&] { empty.get_string("kind"); }) == "t.yaml:1:1: missing key 'kind'");
  CHECK_NOTHROW(empty.finish());
}

TEST_CASE("get_raw keeps a block untouched, where() and fail() point at keys") {
  ConfigMap m = map_of("name: x\nparams:\n  anything: [1, 2]\n  free: form\n");
  const YAML::Node raw = m.get_raw("params");
  REQUIRE(raw.IsMap());
  CHECK(raw["free"].Scalar() == "form");
  CHECK(raw["anything"].size() == 2);
  CHECK(m.where("params") == "t.yaml:2:1");
  CHECK(m.where() == "t.yaml:1:1");
  CHECK(error_of([&] { m.fail("params", "bad combination"); }) == "t.yaml:2:1: bad combination");
  m.get_string("name");
  CHECK_NOTHROW(m.finish());
}

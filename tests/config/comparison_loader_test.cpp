// load_comparison on the fixtures in tests/fixtures/config/comparison-*.yaml (each bad fixture says
// on its first line what is wrong and where). Only static_ep and ideal-balance are used: they are the
// balancers every build registers.
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "sim/balancers/registry.hpp"
#include "sim/config/comparison_spec.hpp"
#include "sim/core/input_error.hpp"
#include "tests/test_paths.hpp"

namespace {

using epsim::InputError;

std::string fixture(const std::string& name) {
  return (epsim::test::source_dir() / "tests/fixtures/config" / name).string();
}
std::string repo_file(const std::string& name) { return (epsim::test::source_dir() / name).string(); }

std::string error_of(const std::string& name) {
  try {
    epsim::load_comparison(fixture(name));
  } catch (const InputError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("a comparison file loads with every key") {
  const epsim::ComparisonSpec spec = epsim::load_comparison(fixture("comparison-good.yaml"));
  CHECK(spec.name == "fixture-compare");
  CHECK(spec.source_file == fixture("comparison-good.yaml"));
  CHECK(spec.hardware.name == "h100-sxm-8-ndr");
  REQUIRE(spec.cases.size() == 1);
  CHECK(spec.cases[0].name == "glm5-sample");
  CHECK(spec.cases[0].trace_path == repo_file("traces/samples/glm5-128e-ep16.eptrace"));
  CHECK(spec.cases[0].model.name == "glm5-like-128");
  CHECK_FALSE(spec.cases[0].optional);
  CHECK(spec.skipped.empty());
  CHECK(spec.ep_degrees == std::vector<int>{8, 16});
  CHECK(spec.placement == epsim::Placement::interleaved);
  REQUIRE(spec.balancers.size() == 2);
  CHECK(spec.balancers[0].label == "static_ep");
  CHECK(spec.balancers[0].choice.name == "static_ep");
  CHECK(spec.balancers[1].label == "perfect");
  CHECK(spec.balancers[1].choice.name == "ideal-balance");
  CHECK(spec.balancers[1].choice.params.IsMap());
  CHECK(spec.balancers[1].choice.params_place == fixture("comparison-good.yaml") + ":16");
  CHECK(spec.baseline == "static_ep");
  CHECK(spec.output_dir == "out/fixture-compare");
  CHECK(spec.seed == 7);
  CHECK_FALSE(spec.backward);
  CHECK(spec.max_records == 2);

  const epsim::ExperimentSpec x = spec.experiment(spec.cases[0], 16, spec.balancers[1]);
  CHECK(x.name == "fixture-compare/glm5-sample/ep16/perfect");
  CHECK(x.source_file == spec.source_file);
  CHECK(x.trace_path == spec.cases[0].trace_path);
  CHECK(x.model.num_experts == 128);
  CHECK(x.hardware.name == "h100-sxm-8-ndr");
  CHECK(x.balancer.name == "ideal-balance");
  CHECK(x.ep_degree == 16);
  CHECK(x.placement == epsim::Placement::interleaved);
  CHECK(x.seed == 7);
  CHECK_FALSE(x.backward);
  CHECK(x.max_records == 2);
  CHECK(x.timeline_records == 0);
}

TEST_CASE("a comparison file's defaults") {
  const epsim::ComparisonSpec spec = epsim::load_comparison(fixture("comparison-defaults.yaml"));
  CHECK(spec.placement == epsim::Placement::contiguous);
  CHECK(spec.baseline == "static_ep");
  CHECK(spec.seed == 0);
  CHECK(spec.backward);
  CHECK(spec.max_records == 0);
  REQUIRE(spec.balancers.size() == 2);
  CHECK(spec.balancers[0].label == "ideal-balance");
  CHECK(spec.balancers[0].choice.params.IsNull());
  CHECK(spec.balancers[0].choice.params_place == fixture("comparison-defaults.yaml") + ":12");
}

TEST_CASE("an optional comparison case whose trace is missing is skipped") {
  const epsim::ComparisonSpec spec = epsim::load_comparison(fixture("comparison-optional.yaml"));
  REQUIRE(spec.cases.size() == 1);
  CHECK(spec.cases[0].name == "glm5-sample");
  REQUIRE(spec.skipped.size() == 1);
  CHECK(spec.skipped[0].name == "absent-recording");
  CHECK(spec.skipped[0].trace_path == fixture("no-such-trace.eptrace"));
  CHECK(spec.skipped[0].message() ==
        "skipped case absent-recording: trace " + fixture("no-such-trace.eptrace") + " not found (optional: true)");
}

TEST_CASE("bad comparison files are rejected with file:line:col") {
  const auto expect = [](const std::string& name, const std::string& rest) {
    CAPTURE(name);
    CHECK(error_of(name) == fixture(name) + ":" + rest);
  };
  expect("comparison-typo.yaml", "9:1: unknown key 'ep_degree'; did you mean 'ep_degrees'?");
  expect("comparison-unknown-key.yaml",
         "9:5: unknown key 'weights' in cases[0] (expected one of: model, name, optional, trace)");
  expect("comparison-bad-params.yaml", "13:7: unknown key 'slots' in balancer.params (this mapping takes no keys)");
  expect("comparison-duplicate-label.yaml",
         "12:5: duplicate balancer label 'static_ep' (first at line 11); give one of them its own `label:`");
  expect("comparison-baseline-missing.yaml",
         "13:1: baseline 'fastermoe' is not one of the balancer labels (static_ep, ideal-balance)");
  expect("comparison-ep-not-divide.yaml",
         "6:5: case 'glm5-sample': EP degree 12 (ep_degrees, line 14) does not divide the 128 experts of model "
         "glm5-like-128");
  expect("comparison-missing-trace.yaml",
         "7:5: case 'absent-recording': trace file '" + fixture("no-such-trace.eptrace") +
             "' does not exist (trace: no-such-trace.eptrace, relative to the comparison file's folder; "
             "`optional: true` skips a case whose trace is missing)");
  expect("comparison-all-optional-missing.yaml",
         "6:1: no case left to compare: every case is optional and its trace is missing (first: " +
             fixture("no-such-trace.eptrace") + ")");
}

TEST_CASE("an unknown balancer name is reported at its entry, with the registry's names") {
  // The registry grows as balancers are added: the expected list is the registry's, in its order.
  std::string known;
  for (const epsim::BalancerInfo& info : epsim::balancer_registry()) known += (known.empty() ? "" : ", ") + info.name;
  CHECK(error_of("comparison-unknown-balancer.yaml") ==
        fixture("comparison-unknown-balancer.yaml") + ":12:11: balancers[1].name: expected one of " + known +
            ", got 'static-ep'; did you mean 'static_ep'?");
}

TEST_CASE("the oracle named as a balancer is refused with what it is now") {
  CHECK(error_of("comparison-oracle.yaml") ==
        fixture("comparison-oracle.yaml") + ":12:5: " + epsim::kOracleIsABound);
}

TEST_CASE("a comparison file of the wrong kind is refused") {
  const std::string e = [] {
    try {
      epsim::load_comparison(fixture("experiment-good.yaml"));
    } catch (const InputError& err) {
      return std::string(err.what());
    }
    return std::string();
  }();
  CHECK(e == fixture("experiment-good.yaml") + ":2:1: expected kind: comparison, got 'experiment' (wrong file?)");
}

TEST_CASE("comparison ep_degrees entries: integers, distinct, within the cluster") {
  const std::filesystem::path dir = epsim::test::scratch_dir("comparison_ep_degrees");
  const auto error_with = [&](const std::string& ep_lines) {
    const std::string path = (dir / "cmp.yaml").string();
    std::ofstream(path) << "kind: comparison\n"
                           "name: eps\n"
                           "hardware: " << repo_file("models/h100-sxm-8.yaml") << "\n"
                           "cases:\n"
                           "  - name: sample\n"
                           "    trace: " << repo_file("traces/samples/glm5-128e-ep16.eptrace") << "\n"
                           "    model: " << repo_file("models/glm5-like-128.yaml") << "\n"
                        << ep_lines
                        << "balancers:\n"
                           "  - name: static_ep\n"
                           "output: out\n";
    try {
      epsim::load_comparison(path);
    } catch (const InputError& e) {
      return std::string(e.what()).substr(path.size() + 1);
    }
    return std::string();
  };
  CHECK(error_with("ep_degrees: [8, 16]\n").empty());
  CHECK(error_with("ep_degrees: [8, x]\n") == "8:17: ep_degrees[1]: expected an integer, got 'x'");
  CHECK(error_with("ep_degrees: [8, 2.5]\n") == "8:17: ep_degrees[1]: expected an integer, got '2.5'");
  CHECK(error_with("ep_degrees: [0]\n") == "8:14: ep_degrees[0]: expected an integer >= 1, got 0");
  CHECK(error_with("ep_degrees:\n  - 8\n  - 8\n") == "10:5: ep_degrees[1]: EP degree 8 is listed twice (first at line 9)");
  CHECK(error_with("ep_degrees: [128]\n") ==
        "8:14: impossible cluster: ep_degree 128 needs 128 GPUs, hardware h100-sxm-8-ndr has 64");
  CHECK(error_with("ep_degrees: []\n") == "8:1: ep_degrees: expected a non-empty sequence of EP degrees, e.g. [8, 16]");
  CHECK(error_with("ep_degrees: 8\n") == "8:1: ep_degrees: expected a non-empty sequence of EP degrees, e.g. [8, 16]");
  CHECK(error_with("") == "1:1: missing key 'ep_degrees'");
  CHECK(error_with("ep_degrees: [32, 64]\n").empty());  // the sample's 16 ranks split evenly
}

// The measured-timeline reader (strict, with file and place on every defect), plans.jsonl, and the
// `epsim validate` command end to end.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <string>

#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/plan/plan_json.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "sim/validate/measured_timeline.hpp"
#include "sim/validate/plans_file.hpp"
#include "sim/validate/validation.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sim/simple_cluster.hpp"
#include "tests/sim/validation_fixture.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

namespace {

const char* kGood = R"({"format": "epsim-measured-timeline", "version": 1, "gpu_name": "NVIDIA H100 80GB HBM3",
 "records": [{"step": 0, "micro_batch": 1, "layer": 2, "events": [
   {"gpu": 0, "track": "compute", "pass": "forward", "name": "gemm fwd", "start_ps": 1000, "end_ps": 5000, "bytes": 0},
   {"gpu": 1, "track": "copy_engine", "pass": "backward", "name": "grads e3", "start_ps": 7000, "end_ps": 9000, "bytes": 1.5e6}]}]})";

/// Writes `text` and expects the reader to refuse it at `place` with a message holding `what`.
void expect_refused(const std::string& text, const std::string& place, const std::string& what) {
  const auto path = (test::scratch_dir("validate_bad") / "measured.json").string();
  std::ofstream(path) << text;
  try {
    read_measured_timeline(path);
    FAIL("accepted: " << text);
  } catch (const InputError& e) {
    CHECK(e.file() == path);
    CHECK(e.place() == place);
    CHECK_MESSAGE(std::string(e.what()).find(what) != std::string::npos, e.what());
  }
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const auto at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}

}  // namespace

TEST_CASE("a measured timeline is read with every field of the simulator's events") {
  const auto path = (test::scratch_dir("validate_good") / "measured.json").string();
  std::ofstream(path) << kGood;
  const MeasuredTimeline m = read_measured_timeline(path);
  CHECK(m.gpu_name == "NVIDIA H100 80GB HBM3");
  REQUIRE(m.records.size() == 1);
  CHECK(m.records[0].micro_batch == 1);
  CHECK(m.records[0].layer == 2);
  REQUIRE(m.records[0].events.size() == 2);
  const TimelineEvent& e = m.records[0].events[1];
  CHECK(e.gpu == 1);
  CHECK(e.track == Track::copy_engine);
  CHECK(e.pass == Pass::backward);
  CHECK(e.name == "grads e3");
  CHECK(e.start_ps == 7000);
  CHECK(e.end_ps == 9000);
  CHECK(e.bytes == 1.5e6);
  // Writing it back gives the same document.
  CHECK(measured_timeline_to_json(m) == nlohmann::json::parse(kGood));
}

TEST_CASE("the simulator's own timeline round-trips through the measured format") {
  const Plan plan = test::validation_plan();
  MeasuredTimeline m{"sim", {{0, 0, 0, test::validation_events(plan)}}};
  const MeasuredTimeline back = measured_timeline_from_json(measured_timeline_to_json(m), "x");
  REQUIRE(back.records[0].events.size() == m.records[0].events.size());
  for (std::size_t i = 0; i < m.records[0].events.size(); ++i) {
    const TimelineEvent &a = m.records[0].events[i], &b = back.records[0].events[i];
    CHECK((a.gpu == b.gpu && a.track == b.track && a.pass == b.pass && a.name == b.name && a.start_ps == b.start_ps &&
           a.end_ps == b.end_ps && a.bytes == b.bytes));
  }
}

TEST_CASE("malformed measured timelines are refused with the file and the place") {
  expect_refused(R"({"format": "epsim-measured-timeline", "version": 1,)", "line 1, column 52", "invalid JSON");
  expect_refused("[]", "", "expected an object");
  expect_refused(replaced(kGood, "epsim-measured-timeline", "epsim-plan"), "format", "not a measured timeline");
  expect_refused(replaced(kGood, R"("version": 1)", R"("version": 2)"), "version", "version 2 is not supported");
  expect_refused(replaced(kGood, R"("gpu_name": "NVIDIA H100 80GB HBM3",)", ""), "", "missing key 'gpu_name'");
  expect_refused(replaced(kGood, R"("version": 1,)", R"("version": 1, "comment": "x",)"), "", "unknown key 'comment'");
  expect_refused(replaced(kGood, R"("step": 0)", R"("step": -1)"), "records[0].step", "outside");
  expect_refused(replaced(kGood, R"("layer": 2)", R"("layer": "2")"), "records[0].layer", "expected an integer");
  expect_refused(replaced(kGood, R"("track": "copy_engine")", R"("track": "ce")"), "records[0].events[1].track",
                 "unknown track 'ce'");
  expect_refused(replaced(kGood, R"("pass": "forward")", R"("pass": "fwd")"), "records[0].events[0].pass",
                 "unknown pass 'fwd'");
  expect_refused(replaced(kGood, R"("end_ps": 9000)", R"("end_ps": 6999)"), "records[0].events[1].end_ps",
                 "before start_ps");
  expect_refused(replaced(kGood, R"("start_ps": 1000)", R"("start_ps": 1000.5)"), "records[0].events[0].start_ps",
                 "expected an integer, found a fraction");
  expect_refused(replaced(kGood, R"(, "bytes": 0})", "}"), "records[0].events[0]", "missing key 'bytes'");
  expect_refused(replaced(kGood, R"("bytes": 1.5e6)", R"("bytes": -1)"), "records[0].events[1].bytes", "bytes");
  expect_refused(replaced(kGood, R"("name": "gemm fwd")", R"("name": "")"), "records[0].events[0].name", "empty");
  expect_refused(replaced(kGood, R"("records": [)", R"("records": [{"step": 0, "micro_batch": 1, "layer": 2, "events": [
   {"gpu": 0, "track": "compute", "pass": "forward", "name": "gemm fwd", "start_ps": 0, "end_ps": 1, "bytes": 0}]},)"),
                 "records[1]", "duplicate record (step 0, micro_batch 1, layer 2)");
  expect_refused(replaced(kGood, R"("events": [)", R"("events": [], "x": [)"), "records[0]", "unknown key 'x'");
  expect_refused(replaced(kGood, R"("start_ps": 1000)", R"("start_ps": 1e400)"), "line 3, column 90",
                 "invalid JSON: number overflow parsing '1e400'");
  expect_refused(replaced(kGood, R"("start_ps": 1000)", R"("start_ps": 1e300)"), "records[0].events[0].start_ps",
                 "value 1e+300 outside [0, 9223372036854775807]");
  expect_refused(replaced(kGood, R"("start_ps": 1000)", R"("start_ps": 9223372036854775808)"),
                 "records[0].events[0].start_ps", "value 9223372036854775808 outside [0, 9223372036854775807]");
  const auto missing = (test::scratch_dir("validate_missing") / "nothing.json").string();
  CHECK_THROWS_AS(read_measured_timeline(missing), InputError);
}

TEST_CASE("a measured timeline read as it streams by gives the document reader's timeline, or its first error") {
  // read_measured_timeline converts each record as the parser completes it; measured_timeline_from_json
  // reads a parsed document. The same outcome, text for text, on every case below.
  const auto outcome = [](const std::function<MeasuredTimeline()>& read) {
    try {
      return measured_timeline_to_json(read()).dump();
    } catch (const InputError& e) {
      return std::string("error: ") + e.what();
    }
  };
  const std::string second = R"({"step": 1, "micro_batch": 0, "layer": 0, "events": [
   {"gpu": 0, "track": "compute", "pass": "forward", "name": "gemm fwd", "start_ps": 0, "end_ps": 1, "bytes": 0}]})";
  const std::string two = replaced(kGood, "}]}]}", "}]}, " + second + "]}");
  for (const std::string& text : std::vector<std::string>{
           std::string(kGood), two,
           // A bad record and a bad version: the version is checked first, wherever it sits.
           replaced(replaced(two, R"("step": 1)", R"("step": -1)"), R"("version": 1)", R"("version": 3)"),
           // Two bad records: the first.
           replaced(replaced(two, R"("step": 1)", R"("step": -1)"), R"("name": "gemm fwd")", R"("name": "")"),
           // The records key twice: the last counts; a records value that is not an array.
           replaced(two, R"("records": [)", R"("records": [7], "records": [)"),
           replaced(two, R"("version": 1,)", R"("version": 1, "records": {"a": [1]},)"),
           replaced(kGood, R"("records": [)", R"("records": [)" + second + ", "),
           std::string(R"({"format": "epsim-measured-timeline", "version": 1, "gpu_name": "x", "records": []})"),
           std::string(R"({"format": "epsim-measured-timeline", "version": 1, "gpu_name": "x", "records": [[], 5]})"),
           std::string(kGood).substr(0, 300)}) {
    CAPTURE(text);
    const auto path = (test::scratch_dir("validate_stream") / "measured.json").string();
    std::ofstream(path) << text;
    const std::string streamed = outcome([&] { return read_measured_timeline(path); });
    const std::string whole = outcome([&] { return measured_timeline_from_json(parse_json(text, path), path); });
    CHECK(streamed == whole);
  }
}

TEST_CASE("plans.jsonl: one plan a line, bad lines and repeated records are refused by line") {
  const auto dir = test::scratch_dir("validate_plans");
  Plan a = test::validation_plan(), b = test::validation_plan();
  b.micro_batch = 1;
  const auto path = (dir / "plans.jsonl").string();
  std::ofstream(path) << plan_to_json(a).dump() << "\n\n" << plan_to_json(b).dump() << "\n";
  const auto plans = read_plans_jsonl(path);
  REQUIRE(plans.size() == 2);
  CHECK(plans[1].micro_batch == 1);
  CHECK(plans[1].routes.size() == a.routes.size());

  std::ofstream(path) << plan_to_json(a).dump() << "\n" << plan_to_json(a).dump() << "\n";
  try {
    read_plans_jsonl(path);
    FAIL("accepted two plans for one record");
  } catch (const InputError& e) {
    CHECK(e.file() == path);
    CHECK(e.place() == "line 2");
  }
  std::ofstream(path) << plan_to_json(a).dump() << "\n{\"version\": \n";
  try {
    read_plans_jsonl(path);
    FAIL("accepted bad JSON");
  } catch (const InputError& e) {
    CHECK(e.place() == "line 2, column 13");
  }
  std::ofstream(path) << "\n";
  CHECK_THROWS_AS(read_plans_jsonl(path), InputError);
}

TEST_CASE("epsim validate: the outputs, the summary on stdout, the goal line, refusals exit 2") {
  const auto dir = test::scratch_dir("validate_cli");
  const std::string hw_path = (test::source_dir() / "tests/fixtures/validation/h100-sxm-8-frozen.yaml").string();
  const std::string model_path = (test::source_dir() / "models/glm5-like-128.yaml").string();
  const HardwareSpec hw = load_hardware(hw_path);
  const ModelSpec model = load_model(model_path);
  const Plan plan = test::validation_plan();
  std::ofstream(dir / "plans.jsonl") << plan_to_json(plan).dump() << "\n";
  // "Measured": the prediction itself with GEMMs 2% slower.
  MeasuredTimeline m{"NVIDIA H100 80GB HBM3", {{0, 0, 0, {}}}};
  for (TimelineEvent e : simulate_layer(hw, model, plan, local_tokens_of(plan, model.top_k), false).timeline.events) {
    if (e.name.rfind("gemm", 0) == 0) e.end_ps = e.start_ps + (e.end_ps - e.start_ps) * 102 / 100;
    m.records[0].events.push_back(e);
  }
  std::ofstream(dir / "measured.json") << measured_timeline_to_json(m).dump(1);
  const std::string args = "validate --plans plans.jsonl --measured measured.json --hardware '" + hw_path +
                           "' --model '" + model_path + "' -o out";
  const test::CliResult r = test::run_epsim(args, dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("**Goals met**") != std::string::npos);
  CHECK(r.out.find("- plans: plans.jsonl (1 plan)\n") != std::string::npos);
  CHECK(r.out.find("| compute | gemm fwd | 3 |") != std::string::npos);
  CHECK(r.out.find("| copy_engine | weights | 1 |") != std::string::npos);
  for (const char* f : {"tasks.csv", "layers.csv", "unmatched.csv", "summary.md"})
    CHECK(std::filesystem::exists(dir / "out" / f));
  CHECK(r.out.find(test::read_file(dir / "out/summary.md")) == 0);
  const std::string layers = test::read_file(dir / "out/layers.csv");
  CHECK(layers.rfind("step,micro_batch,layer,predicted_us,measured_us,error,matched,predicted_only,measured_only,"
                         "measured_gpus,not_measured,unmeasured_tracks\n",
                     0) == 0);

  // Same inputs again: identical files; an existing folder is refused without --overwrite.
  const std::string tasks = test::read_file(dir / "out/tasks.csv");
  CHECK(test::run_epsim(args, dir).status == 2);
  const test::CliResult quiet = test::run_epsim(args + " --overwrite -q", dir);
  REQUIRE(quiet.status == 0);
  CHECK(quiet.out.empty());
  CHECK(test::read_file(dir / "out/tasks.csv") == tasks);

  // The backward pass was not measured: with --backward its tasks are listed as predicted only.
  REQUIRE(test::run_epsim(args + " --overwrite -q --backward", dir).status == 0);
  CHECK(test::read_file(dir / "out/unmatched.csv").find("predicted,0,0,0,1,compute,backward,gemm dgrad,") !=
        std::string::npos);

  const test::CliResult bad = test::run_epsim("validate --plans plans.jsonl --measured plans.jsonl --hardware '" +
                                                  hw_path + "' --model '" + model_path + "' -o out2",
                                              dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("plans.jsonl: missing key 'format'") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(dir / "out2"));
  // Each missing option is named, before anything is read.
  struct Missing {
    const char* args;
    const char* flag;
  };
  for (const Missing& m :
       {Missing{"--measured measured.json --hardware h.yaml --model m.yaml -o x", "--plans PLANS.jsonl"},
        Missing{"--plans plans.jsonl --hardware h.yaml --model m.yaml -o x", "--measured MEASURED.json"},
        Missing{"--plans plans.jsonl --measured measured.json --model m.yaml -o x", "--hardware HW.yaml"},
        Missing{"--plans plans.jsonl --measured measured.json --hardware h.yaml -o x", "--model MODEL.yaml"},
        Missing{"--plans plans.jsonl --measured measured.json --hardware h.yaml --model m.yaml", "-o DIR"}}) {
    CAPTURE(m.args);
    const test::CliResult r = test::run_epsim(std::string("validate ") + m.args, dir);
    CHECK(r.status == 2);
    CHECK(r.err == std::string("epsim: error: command line: missing ") + m.flag + " (see epsim validate --help)\n");
  }
  CHECK_FALSE(std::filesystem::exists(dir / "x"));
}

TEST_CASE("the fixture: a synthetic measurement with known factors per kind is read back as those errors") {
  const auto dir = test::source_dir() / "tests/fixtures/validation";
  const std::vector<Plan> plans = read_plans_jsonl((dir / "two-gpu.plans.jsonl").string());
  const MeasuredTimeline m = read_measured_timeline((dir / "two-gpu.measured.json").string());
  const ValidationReport r = validate_measurements(
      plans, m, load_hardware((test::source_dir() / "tests/fixtures/validation/h100-sxm-8-frozen.yaml").string()),
      load_model((test::source_dir() / "models/glm5-like-128.yaml").string()), true, "plans", "measured");
  CHECK(r.layers.size() == 2);
  CHECK(r.unmatched.empty());
  REQUIRE(r.tasks.size() > 40);
  for (const auto& t : r.tasks) {
    const TimelineEvent& e = t.task.predicted;
    double f = 1.0;
    if (e.track == Track::compute) f = t.kind.rfind("gemm", 0) == 0 ? 1.03 : 0.98;
    if (e.track == Track::copy_engine) f = 1.04;
    if (e.track == Track::comm_kernel) f = 1.10;
    INFO(e.name << " gpu " << e.gpu);
    CHECK(t.error() == doctest::Approx(1 / f - 1).epsilon(1e-5));
  }
  CHECK(r.goals.gemm_median_abs_error == doctest::Approx(1 - 1 / 1.03).epsilon(1e-5));
  CHECK(r.goals.copy_median_abs_error == doctest::Approx(1 - 1 / 1.04).epsilon(1e-5));
  CHECK(r.goals.met());
}

TEST_CASE("plans.jsonl: an impossible plan, a huge number or deep nesting is refused with file, line and key") {
  const auto dir = test::scratch_dir("validate_plans_bad");
  const auto path = (dir / "plans.jsonl").string();
  const nlohmann::json good = plan_to_json(test::validation_plan());
  const auto refused = [&](const std::string& second_line) {
    std::ofstream(path) << good.dump() << "\n" << second_line << "\n";
    try {
      read_plans_jsonl(path);
    } catch (const InputError& e) {
      CHECK(e.file() == path);
      return std::string(e.what()).substr(path.size() + 1);
    }
    return std::string("accepted");
  };
  nlohmann::json bad = good;
  bad["micro_batch"] = 1;
  bad["routes"][0]["instance"] = bad["instances"].size();
  CHECK(refused(bad.dump()) == "line 2, routes[0].instance: value " + std::to_string(good["instances"].size()) +
                                   " outside [0, " + std::to_string(good["instances"].size()) +
                                   ") (the plan's instances)");
  bad = good;
  bad["micro_batch"] = 1.5;
  CHECK(refused(bad.dump()) == "line 2, micro_batch: expected an integer, found a fraction: 1.5");
  std::string text = good.dump();
  text.replace(text.find("\"micro_batch\":0"), 15, "\"micro_batch\":1e400");
  CHECK(refused(text).rfind("line 2, column ", 0) == 0);
  CHECK(refused(text).find("invalid JSON: number overflow parsing '1e400'") != std::string::npos);
  CHECK(refused(std::string(100000, '[') + std::string(100000, ']')) ==
        "line 2, column 65: invalid JSON: arrays and objects nested deeper than 64 levels");
}

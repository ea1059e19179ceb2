// epsim validate, in process: a hand-built plan is simulated, its timeline perturbed by known factors
// and offered back as the measurement; the reported errors must be those factors.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "sim/core/input_error.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "sim/validate/validation.hpp"
#include "tests/sim/simple_cluster.hpp"
#include "tests/sim/validation_fixture.hpp"

using namespace epsim;

namespace {

/// Every event's duration scaled by `factor(event)`, start kept; the whole record shifted by an
/// arbitrary GPU clock origin.
template <class Factor>
MeasuredRecord perturbed(const Plan& plan, const std::vector<TimelineEvent>& events, Factor factor,
                         Time_ps origin_ps = 123'456'789) {
  MeasuredRecord rec{plan.step, plan.micro_batch, plan.layer, {}};
  for (TimelineEvent e : events) {
    const Time_ps d = e.end_ps - e.start_ps;
    e.start_ps += origin_ps;
    e.end_ps = e.start_ps + static_cast<Time_ps>(std::llround(static_cast<double>(d) * factor(e)));
    rec.events.push_back(e);
  }
  return rec;
}

MeasuredTimeline one_record(MeasuredRecord rec) { return {"Test GPU", {std::move(rec)}}; }

ValidationReport run(const Plan& plan, const MeasuredTimeline& m) {
  return validate_measurements({plan}, m, test::simple_hardware(), test::simple_model(2, 1, 1), true, "plans.jsonl",
                               "measured.json");
}

const KindStats& kind(const ValidationReport& r, Track track, const std::string& name) {
  for (const auto& k : r.kinds)
    if (k.track == track && k.kind == name) return k;
  FAIL("no kind " << name);
  return r.kinds.front();
}

}  // namespace

TEST_CASE("task kinds drop per-stage and per-expert suffixes only") {
  CHECK(task_kind("gemm fwd") == "gemm fwd");
  CHECK(task_kind("dispatch s2") == "dispatch");
  CHECK(task_kind("weights e17") == "weights");
  CHECK(task_kind("grad combine s0") == "grad combine");
  CHECK(task_kind("s1") == "s1");
  CHECK(task_kind("gemm e") == "gemm e");
  CHECK(task_kind("counts to host") == "counts to host");
}

TEST_CASE("the plan's local tokens are its assignments over top-k") {
  Plan plan = test::validation_plan();
  CHECK(local_tokens_of(plan, 1) == std::vector<std::int64_t>{100, 150});
  CHECK(local_tokens_of(plan, 2) == std::vector<std::int64_t>{50, 75});
}

TEST_CASE("a measurement equal to the prediction: every error 0, nothing unmatched") {
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  const ValidationReport r = run(plan, one_record(perturbed(plan, events, [](const TimelineEvent&) { return 1.0; })));
  std::size_t task_events = 0;
  for (const auto& e : events) task_events += is_matched_track(e.track) ? 1 : 0;
  REQUIRE(task_events > 10);
  CHECK(r.tasks.size() == task_events);
  CHECK(r.unmatched.empty());
  for (const auto& t : r.tasks) {
    CHECK(t.error() == 0);
    CHECK(t.task.measured.start_ps == t.task.predicted.start_ps);  // reported from the record's origin
  }
  REQUIRE(r.layers.size() == 1);
  CHECK(r.layers[0].error() == 0);
  const LayerResult sim = simulate_layer(test::simple_hardware(), test::simple_model(2, 1, 1), plan, {100, 150}, true);
  CHECK(r.layers[0].predicted_ps == sim.layer_ps());
  CHECK(r.goals.met());
  CHECK(r.gpu_name == "Test GPU");
  // Every kind the plan produces is there: GEMMs of both passes, the shared expert, EP kernels,
  // Copy Engine copies by name, the host planner.
  for (const char* k : {"gemm fwd", "gemm dgrad", "gemm wgrad", "shared expert fwd", "shared expert bwd"})
    CHECK(kind(r, Track::compute, k).count >= 1);
  for (const char* k : {"dispatch", "combine", "grad dispatch", "grad combine"})
    CHECK(kind(r, Track::comm_kernel, k).count >= 1);
  for (const char* k : {"weights", "tokens", "outputs", "output grads", "input grads", "grads"})
    CHECK(kind(r, Track::copy_engine, k).count == 1);
  CHECK(kind(r, Track::host_cpu, "planner").count == 1);
}

TEST_CASE("durations perturbed by known factors are reported as exactly those errors") {
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  // Measured = predicted * f, so error = 1/f - 1. By kind: the report names each GEMM by its group.
  auto factor = [](const TimelineEvent& e) {
    if (task_kind(e.name) == "gemm fwd") return e.gpu == 0 ? 1.25 : 0.8;
    if (task_kind(e.name) == "gemm wgrad") return 1.02;
    if (e.track == Track::copy_engine) return 1.0 / 1.1;
    return 1.0;
  };
  const ValidationReport r = run(plan, one_record(perturbed(plan, events, factor)));
  CHECK(r.unmatched.empty());
  for (const auto& t : r.tasks) {
    INFO(t.task.predicted.name << " gpu " << t.task.predicted.gpu);
    CHECK(t.error() == doctest::Approx(1.0 / factor(t.task.predicted) - 1.0).epsilon(1e-6));
  }
  const KindStats& fwd = kind(r, Track::compute, "gemm fwd");
  CHECK(fwd.count == 3);
  // Errors -0.2 (GPU 0) and +0.25 (GPU 1's two groups): median |error| 0.25, worst +0.25.
  CHECK(fwd.median_abs_error == doctest::Approx(0.25));
  CHECK(fwd.worst_error == doctest::Approx(0.25));
  CHECK(kind(r, Track::compute, "gemm wgrad").median_abs_error == doctest::Approx(1 - 1 / 1.02));
  CHECK(kind(r, Track::compute, "gemm wgrad").worst_error == doctest::Approx(1 / 1.02 - 1));
  CHECK(kind(r, Track::copy_engine, "weights").worst_error == doctest::Approx(0.1));
  CHECK(r.goals.copy_median_abs_error == doctest::Approx(0.1));
  CHECK(kind(r, Track::comm_kernel, "dispatch").median_abs_error == 0);
  CHECK_FALSE(r.goals.met());
}

TEST_CASE("a measured timeline running uniformly slower: tasks and layer off by the same factor") {
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  MeasuredRecord rec{plan.step, plan.micro_batch, plan.layer, {}};
  for (TimelineEvent e : events) {
    e.start_ps = e.start_ps * 5 / 4 + 7'000'000;
    e.end_ps = e.end_ps * 5 / 4 + 7'000'000;
    rec.events.push_back(e);
  }
  const ValidationReport r = run(plan, one_record(rec));
  for (const auto& t : r.tasks) CHECK(t.error() == doctest::Approx(-0.2));
  CHECK(r.layers[0].error() == doctest::Approx(-0.2));
  CHECK(r.goals.layer_worst_abs_error == doctest::Approx(0.2));
  CHECK(r.goals.gemm_median_abs_error == doctest::Approx(0.2));
  CHECK_FALSE(r.goals.met());
  // Within the goals: 3% slower everywhere.
  MeasuredRecord close{plan.step, plan.micro_batch, plan.layer, {}};
  for (TimelineEvent e : events) {
    e.start_ps = e.start_ps * 103 / 100;
    e.end_ps = e.end_ps * 103 / 100;
    close.events.push_back(e);
  }
  CHECK(run(plan, one_record(close)).goals.met());
}

TEST_CASE("a record without any EP kernel or host task measured lists its layer but does not compare it") {
  // As a single-GPU run: its GEMMs and copies, 3% slow, and nothing of the comm_kernel and host_cpu
  // tracks. The measured span lacks the dispatch and combine, so its layer error says nothing.
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  MeasuredRecord rec{plan.step, plan.micro_batch, plan.layer, {}};
  for (TimelineEvent e : events) {
    if (e.track == Track::comm_kernel || e.track == Track::host_cpu) continue;
    e.start_ps = e.start_ps * 103 / 100;
    e.end_ps = e.end_ps * 103 / 100;
    rec.events.push_back(e);
  }
  const ValidationReport r = run(plan, one_record(rec));
  REQUIRE(r.layers.size() == 1);
  CHECK_FALSE(r.layers[0].compared());
  CHECK(r.layers[0].unmeasured_tracks == std::vector<Track>{Track::comm_kernel, Track::host_cpu});
  CHECK(std::isnan(r.goals.layer_worst_abs_error));
  CHECK(r.goals.gemm_median_abs_error == doctest::Approx(1 - 1 / 1.03));  // tasks are still compared
  CHECK_FALSE(r.goals.met());
  std::ostringstream md, csv;
  write_summary_md(md, r, {}, 10);
  write_layers_csv(csv, r);
  CHECK(md.str().find("n/a: no comm_kernel, host_cpu measured") != std::string::npos);
  CHECK(md.str().find("worst layer n/a (no record measured every track it predicts") != std::string::npos);
  CHECK(csv.str().find(",comm_kernel host_cpu\n") != std::string::npos);
  // Every track measured: the layer is compared again (the 3% of the whole timeline).
  const ValidationReport all = run(plan, one_record(perturbed(plan, events, [](const TimelineEvent&) { return 1.03; })));
  CHECK(all.layers[0].compared());
}

TEST_CASE("tasks on one side only are reported, not dropped, the rest still match by occurrence") {
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  MeasuredRecord rec = perturbed(
      plan, events, [](const TimelineEvent&) { return 1.0; }, 0);
  const auto wgrad = std::find_if(rec.events.begin(), rec.events.end(),
                                  [](const TimelineEvent& e) { return e.name == "gemm wgrad" && e.gpu == 0; });
  REQUIRE(wgrad != rec.events.end());
  rec.events.erase(wgrad);
  rec.events.push_back({0, Track::compute, Pass::forward, "mystery kernel", 5, 9, 0});
  rec.events.push_back({0, Track::compute, Pass::forward, "mystery kernel", 1, 3, 0});
  std::reverse(rec.events.begin(), rec.events.end());  // input order does not matter
  const ValidationReport r = run(plan, one_record(rec));
  REQUIRE(r.unmatched.size() == 3);
  CHECK(r.unmatched[0].predicted);
  CHECK(r.unmatched[0].task.event.name == "gemm wgrad");
  CHECK(r.unmatched[0].task.event.gpu == 0);
  CHECK_FALSE(r.unmatched[1].predicted);
  CHECK(r.unmatched[1].task.event.name == "mystery kernel");
  CHECK(r.unmatched[1].task.occurrence == 0);
  CHECK(r.unmatched[1].task.event.start_ps == 1);
  CHECK(r.unmatched[2].task.occurrence == 1);
  CHECK(r.layers[0].predicted_only == 1);
  CHECK(r.layers[0].measured_only == 2);
  for (const auto& t : r.tasks) CHECK(t.error() == 0);
  std::ostringstream csv, md;
  write_unmatched_csv(csv, r);
  CHECK(csv.str().find("predicted,0,0,0,0,compute,backward,gemm wgrad,0,") != std::string::npos);
  CHECK(csv.str().find("measured,0,0,0,0,compute,forward,mystery kernel,1,") != std::string::npos);
  write_summary_md(md, r, {}, 2);
  CHECK(md.str().find("| predicted | 0 | 0 | 0 | 0 | compute | backward | gemm wgrad |") != std::string::npos);
  CHECK(md.str().find("1 more in unmatched.csv") != std::string::npos);
}

TEST_CASE("two occurrences of one task are paired in time order") {
  std::vector<TimelineEvent> predicted = {{0, Track::compute, Pass::forward, "gemm fwd", 100, 200, 0},
                                          {0, Track::compute, Pass::forward, "gemm fwd", 0, 100, 0},
                                          {0, Track::nvlink_out, Pass::forward, "dispatch 0->1", 0, 5, 10}};
  std::vector<TimelineEvent> measured = {{0, Track::compute, Pass::forward, "gemm fwd", 1000, 1050, 0},
                                         {0, Track::compute, Pass::forward, "gemm fwd", 1060, 1260, 0}};
  const TaskMatch m = match_tasks(predicted, measured);
  REQUIRE(m.matched.size() == 2);
  CHECK(m.matched[0].predicted.start_ps == 0);
  CHECK(m.matched[0].measured.start_ps == 1000);
  CHECK(m.matched[1].occurrence == 1);
  CHECK(m.matched[1].measured.end_ps == 1260);
  CHECK(m.predicted_only.empty());  // link flows take no part
  CHECK(m.measured_only.empty());
}

TEST_CASE("records are paired with their plans, a record without a plan or with a foreign GPU is refused") {
  Plan a = test::validation_plan(), b = test::validation_plan();
  b.layer = 3;
  const auto events = test::validation_events(a);
  MeasuredTimeline m{"Test GPU", {}};
  m.records.push_back(perturbed(b, events, [](const TimelineEvent&) { return 1.0; }));
  m.records.push_back(perturbed(a, events, [](const TimelineEvent&) { return 2.0; }));
  const auto hw = test::simple_hardware();
  const auto model = test::simple_model(2, 1, 1);
  const ValidationReport r = validate_measurements({a, b}, m, hw, model, true, "p.jsonl", "m.json");
  REQUIRE(r.layers.size() == 2);
  CHECK(r.layers[0].record.layer == 3);
  CHECK(r.layers[0].error() == 0);
  CHECK(r.layers[1].record.layer == 0);
  CHECK(r.tasks.back().error() == doctest::Approx(-0.5));

  try {
    validate_measurements({a}, m, hw, model, true, "p.jsonl", "m.json");
    FAIL("accepted a record without a plan");
  } catch (const InputError& e) {
    CHECK(e.file() == "m.json");
    CHECK(e.place() == "records[0]");
    CHECK(std::string(e.what()).find("no plan for step 0, micro_batch 0, layer 3") != std::string::npos);
  }
  m.records[1].events[4].gpu = 2;
  try {
    validate_measurements({a, b}, m, hw, model, true, "p.jsonl", "m.json");
    FAIL("accepted GPU 2 of a 2-GPU plan");
  } catch (const InputError& e) {
    CHECK(e.place() == "records[1].events[4].gpu");
  }
}

TEST_CASE("reports are deterministic: equal inputs, equal bytes") {
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  auto factor = [](const TimelineEvent& e) { return 1.0 + 0.01 * static_cast<double>(e.name.size() % 7); };
  std::string first;
  for (int i = 0; i < 2; ++i) {
    MeasuredRecord rec = perturbed(plan, events, factor);
    if (i == 1) std::reverse(rec.events.begin(), rec.events.end());
    const ValidationReport r = run(plan, one_record(rec));
    std::ostringstream out;
    write_tasks_csv(out, r);
    write_layers_csv(out, r);
    write_unmatched_csv(out, r);
    write_summary_md(out, r, {"header line"});
    if (i == 0)
      first = out.str();
    else
      CHECK(out.str() == first);
  }
  CHECK(first.find("step,micro_batch,layer,gpu,track,pass,name,kind,occurrence,predicted_start_us,predicted_us,"
                   "measured_start_us,measured_us,error\n") == 0);
  CHECK(first.find("- header line\n") != std::string::npos);
}

TEST_CASE("a task measured as 0 us has no relative error and is counted apart") {
  ValidationReport r;
  add_record(r, {0, 0, 0},
             {{0, Track::compute, Pass::forward, "gemm fwd", 0, 10, 0},
              {1, Track::compute, Pass::forward, "gemm fwd", 0, 0, 0}},
             {{0, Track::compute, Pass::forward, "gemm fwd", 0, 11, 0},
              {1, Track::compute, Pass::forward, "gemm fwd", 3, 3, 0}});
  finish_report(r);
  REQUIRE(r.kinds.size() == 1);
  CHECK(r.kinds[0].count == 1);
  CHECK(r.kinds[0].zero_measured == 1);
  CHECK(r.kinds[0].median_abs_error == doctest::Approx(1.0 / 11));
  CHECK(std::isnan(r.goals.copy_median_abs_error));
  std::ostringstream csv, md;
  write_tasks_csv(csv, r);
  CHECK(csv.str().find(",nan\n") != std::string::npos);
  write_summary_md(md, r, {});
  CHECK(md.str().find("| compute | gemm fwd | 1 (+1 of 0 us) |") != std::string::npos);
  CHECK(md.str().find("of copies n/a (none measured)") != std::string::npos);
}

TEST_CASE("a measurement of some GPUs only: the others are counted as not measured, not as unmatched") {
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  MeasuredRecord rec = perturbed(plan, events, [](const TimelineEvent&) { return 1.0; });
  rec.events.erase(
      std::remove_if(rec.events.begin(), rec.events.end(), [](const TimelineEvent& e) { return e.gpu != 1; }),
      rec.events.end());
  const ValidationReport r = run(plan, one_record(rec));
  CHECK(r.unmatched.empty());
  std::size_t gpu0_tasks = 0, gpu1_tasks = 0;
  for (const auto& e : events)
    if (is_matched_track(e.track)) (e.gpu == 0 ? gpu0_tasks : gpu1_tasks) += 1;
  REQUIRE(r.layers.size() == 1);
  CHECK(r.layers[0].measured_gpus == 1);
  CHECK(r.layers[0].not_measured == static_cast<int>(gpu0_tasks));
  CHECK(r.tasks.size() == gpu1_tasks);
  for (const auto& t : r.tasks) CHECK(t.task.predicted.gpu == 1);
  CHECK(r.layers[0].error() == 0);  // GPU 1's span on both sides
  std::ostringstream md;
  write_summary_md(md, r, {});
  CHECK(md.str().find("- not compared: " + std::to_string(gpu0_tasks) + " predicted tasks") != std::string::npos);
}

TEST_CASE("every table of summary.md has as many header cells as cells in each row") {
  const Plan plan = test::validation_plan();
  const auto events = test::validation_events(plan);
  MeasuredRecord rec = perturbed(plan, events, [](const TimelineEvent&) { return 1.0; });
  rec.events.pop_back();  // one predicted-only task, so the unmatched table has a row too
  const ValidationReport r = run(plan, one_record(rec));
  std::ostringstream md;
  write_summary_md(md, r, {});
  std::istringstream lines(md.str());
  int header_cells = -1, tables = 0, rows = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] != '|') {
      header_cells = -1;  // a table ends at the first line that is not a table row
      continue;
    }
    const int cells = static_cast<int>(std::count(line.begin(), line.end(), '|')) - 1;
    if (header_cells < 0) {
      header_cells = cells;
      ++tables;
      continue;
    }
    CAPTURE(line);
    CHECK(cells == header_cells);
    ++rows;
  }
  CHECK(tables == 3);  // per kind, per layer, unmatched
  CHECK(rows >= 3 + 3);  // a separator and at least one row each
}

TEST_CASE("a simulated time past the horizon is an input error naming the hardware file and the plan") {
  const Plan plan = test::validation_plan();
  const MeasuredTimeline m = one_record(perturbed(plan, test::validation_events(plan), [](const TimelineEvent&) { return 1.0; }));
  HardwareSpec hw = test::simple_hardware();
  hw.source_file = "slow.yaml";
  // The plan's 1e6-byte weight copy at 1e-15 GB/s (1e-18 bytes per ps) would take 1e24 ps > 1e18 ps.
  hw.copy_engine.bw_GBps = 1e-15;
  CHECK_THROWS_WITH_AS(validate_measurements({plan}, m, hw, test::simple_model(2, 1, 1), true, "p.jsonl", "m.json"),
                       doctest::Contains("slow.yaml:"), InputError);
}

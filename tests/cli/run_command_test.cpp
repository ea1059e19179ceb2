// `epsim run` end to end, as a user runs it: outputs, determinism, and refusal of bad input.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

// An experiment on the bundled sample trace (or `trace`), with absolute model/hardware paths.
std::string experiment_yaml(const std::string& trace = "",
                            const std::string& ep_line = "ep_degree: 16", int max_records = 3) {
  const fs::path src = source_dir();
  return "kind: experiment\n"
         "name: test\n"
         "trace: " + (trace.empty() ? (src / "traces/samples/glm5-128e-ep16.eptrace").string() : trace) + "\n"
         "model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
         "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n" +
         ep_line + "\n"
         "balancer:\n  name: static_ep\n"
         "output: out\n"
         "seed: 1\n"
         "max_records: " + std::to_string(max_records) + "\n";
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == s.size() - 1; }

}  // namespace

TEST_CASE("epsim run writes metrics, per-GPU rows, a timeline and a summary") {
  const fs::path dir = scratch_dir("run_outputs");
  write_file(dir / "exp.yaml", experiment_yaml());
  const CliResult r = run_epsim("run exp.yaml", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("token straggler ratio") != std::string::npos);
  for (const char* f : {"metrics.csv", "gpus.csv", "timeline.json", "summary.txt"}) CHECK(fs::exists(dir / "out" / f));
  CHECK(leftovers(dir).empty());
  // 3 records: a header and 3 rows; 16 GPU rows per record.
  std::istringstream metrics(read_file(dir / "out/metrics.csv"));
  std::string line;
  int lines = 0;
  while (std::getline(metrics, line)) ++lines;
  CHECK(lines == 4);
  std::istringstream gpus(read_file(dir / "out/gpus.csv"));
  lines = 0;
  while (std::getline(gpus, line)) ++lines;
  CHECK(lines == 1 + 3 * 16);
  const std::string timeline = read_file(dir / "out/timeline.json");
  CHECK(timeline.find("\"traceEvents\"") != std::string::npos);
  CHECK(timeline.find("gemm fwd") != std::string::npos);
}

TEST_CASE("timeline_records: N puts the first N records in the timeline, and no other") {
  // The sample trace's first records are step 0, micro-batch 0, layers 0, 1, 2 (metrics.csv's rows):
  // every event of the timeline names its record, and the records named are the first N.
  const fs::path dir = scratch_dir("run_timeline_records");
  for (const int n : {1, 2}) {
    CAPTURE(n);
    write_file(dir / "exp.yaml", experiment_yaml() + "timeline_records: " + std::to_string(n) + "\n");
    const std::string out = "out" + std::to_string(n);
    const CliResult r = run_epsim("run exp.yaml -q -o " + out, dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const std::string timeline = read_file(dir / out / "timeline.json");
    std::set<std::string> named;
    const std::string key = "\"layer\":\"";
    for (std::size_t at = timeline.find(key); at != std::string::npos; at = timeline.find(key, at + 1)) {
      const std::size_t begin = at + key.size();
      named.insert(timeline.substr(begin, timeline.find('"', begin) - begin));
    }
    std::set<std::string> first;
    for (int layer = 0; layer < n; ++layer) first.insert("step 0 mb 0 layer " + std::to_string(layer));
    CHECK(named == first);
  }
}

TEST_CASE("--max-records and --timeline-records replace the experiment's, 0 included") {
  // The experiment asks for 3 records and draws 2 of them; the sample trace holds 16 records. On the
  // command line 0 means every record, and no record drawn.
  const fs::path dir = scratch_dir("run_record_overrides");
  write_file(dir / "exp.yaml", experiment_yaml() + "timeline_records: 2\n");
  struct Case {
    const char* options;
    std::size_t rows;   // metrics.csv's rows, its header left out
    int drawn;          // records named in timeline.json
  };
  for (const Case& c : {Case{"--max-records 0 --timeline-records 0", 16, 0}, Case{"--max-records 5 --timeline-records 1", 5, 1},
                        Case{"", 3, 2}}) {
    CAPTURE(c.options);
    fs::remove_all(dir / "out");
    const CliResult r = run_epsim(std::string("run exp.yaml -q ") + c.options, dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(csv_rows(read_file(dir / "out/metrics.csv")).size() == 1 + c.rows);
    const std::string timeline = read_file(dir / "out/timeline.json");
    std::set<std::string> named;
    const std::string key = "\"layer\":\"";
    for (std::size_t at = timeline.find(key); at != std::string::npos; at = timeline.find(key, at + 1)) {
      const std::size_t begin = at + key.size();
      named.insert(timeline.substr(begin, timeline.find('"', begin) - begin));
    }
    CHECK(named.size() == static_cast<std::size_t>(c.drawn));
  }
}

TEST_CASE("the run summary names the bandwidth sharing that produced it") {
  const fs::path dir = scratch_dir("run_sharing_named");
  write_file(dir / "exp.yaml", experiment_yaml());
  CliResult r = run_epsim("run exp.yaml", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  // The preset names no sharing: auto, which is exact at these 16 GPUs, and says so with its bounds.
  CHECK(read_file(dir / "out/summary.txt")
            .find("\n  bandwidth sharing auto: exact at 16 GPUs (exact up to 256, coupled up to 1024, local beyond)\n") !=
        std::string::npos);
  // The same experiment on the preset with `engine` appended, written to `out`: its summary.
  std::string yaml = experiment_yaml();
  yaml.replace(yaml.find("hardware: "), yaml.find('\n', yaml.find("hardware: ")) - yaml.find("hardware: "),
               "hardware: " + (dir / "hw.yaml").string());
  write_file(dir / "exp2.yaml", yaml);
  const auto summary_with = [&](const std::string& engine, const std::string& out) {
    write_file(dir / "hw.yaml", read_file(source_dir() / "models/h100-sxm-8.yaml") + "engine:\n" + engine);
    const CliResult run = run_epsim("run exp2.yaml -o " + out, dir);
    INFO(run.err);
    REQUIRE(run.status == 0);
    return read_file(dir / out / "summary.txt");
  };
  // exact asked for by name is named alone.
  CHECK(summary_with("  bandwidth_sharing: exact\n", "out1").find("\n  bandwidth sharing exact\n") != std::string::npos);
  // epochs: the mode and its tolerance are named.
  const std::string epochs = summary_with("  bandwidth_sharing: epochs\n  epoch_tolerance: 0.005\n", "out2");
  CHECK(epochs.find("\n  bandwidth sharing epochs (tolerance 0.005)\n") != std::string::npos);
  // per_link says that it is not max-min.
  CHECK(summary_with("  bandwidth_sharing: per_link\n", "out3")
            .find("\n  bandwidth sharing per_link (each link shared on its own, not max-min)\n"
                  "    measured against exact: layer time within 7.3% either way, but one GPU's finish\n") !=
        std::string::npos);
  // local names its model and how far it was measured from exact; exact and epochs say nothing of it.
  CHECK(summary_with("  bandwidth_sharing: local\n", "out4")
            .find("\n  bandwidth sharing local (max-min within each GPU's sending and receiving links)\n"
                  "    measured against exact: layer time within 4.5% (early, most on skewed traffic), but one GPU's finish\n"
                  "    up to 52% off under skewed traffic; for per-GPU stragglers set\n"
                  "    engine.bandwidth_sharing: exact (docs/performance.md, \"local\")\n"
                  "    or measure the error on this trace's first N records: --check-exact N\n") != std::string::npos);
  // coupled says how many GPUs follow, and its own measured figures.
  CHECK(summary_with("  bandwidth_sharing: coupled\n  coupled_gpus: 0.25\n", "out5")
            .find("\n  bandwidth sharing coupled (local; the links of the busiest 25% of GPUs, and of weight syncs' receivers, following their senders)\n"
                  "    measured against exact: layer time within 1.7%, but one GPU's finish\n"
                  "    up to 6.0% off under skewed traffic; for per-GPU stragglers set\n"
                  "    engine.bandwidth_sharing: exact (docs/performance.md, \"coupled\")\n") != std::string::npos);
  // auto names what it picked at this EP degree (16) and its bounds; coupled_max_gpus 0 leaves no coupled range.
  CHECK(summary_with("  bandwidth_sharing: auto\n  exact_max_gpus: 8\n", "out6")
            .find("\n  bandwidth sharing auto: coupled at 16 GPUs (exact up to 8, coupled up to 1024, local beyond) (local; "
                  "the links of the busiest 10% of GPUs") != std::string::npos);
  CHECK(summary_with("  bandwidth_sharing: auto\n  exact_max_gpus: 8\n  coupled_max_gpus: 0\n", "out7")
            .find("\n  bandwidth sharing auto: local at 16 GPUs (exact up to 8, local beyond) (max-min within") !=
        std::string::npos);
  CHECK(read_file(dir / "out/summary.txt").find("measured against exact") == std::string::npos);
  CHECK(epochs.find("measured against exact") == std::string::npos);
  // At 16 GPUs exact is cheap: no word of its cost.
  CHECK(summary_with("  bandwidth_sharing: local\n", "out8").find("exact takes") == std::string::npos);
}

TEST_CASE("the same inputs give byte-identical outputs") {
  const fs::path dir = scratch_dir("run_determinism");
  write_file(dir / "exp.yaml", experiment_yaml());
  REQUIRE(run_epsim("run exp.yaml -o a", dir).status == 0);
  REQUIRE(run_epsim("run exp.yaml -o b", dir).status == 0);
  for (const char* f : {"metrics.csv", "gpus.csv", "timeline.json", "summary.txt"}) {
    INFO(f);
    const std::string a = read_file(dir / "a" / f);
    CHECK(!a.empty());
    CHECK(a == read_file(dir / "b" / f));
  }
}

TEST_CASE("an existing output folder is never replaced without --overwrite") {
  const fs::path dir = scratch_dir("run_no_clobber");
  write_file(dir / "exp.yaml", experiment_yaml());
  fs::create_directories(dir / "out");
  write_file(dir / "out/notes.txt", "mine");
  const CliResult r = run_epsim("run exp.yaml", dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("out") != std::string::npos);
  CHECK(r.err.find("--overwrite") != std::string::npos);
  CHECK(read_file(dir / "out/notes.txt") == "mine");
  CHECK(leftovers(dir).empty());
}

TEST_CASE("a truncated trace is one clear error and leaves no output") {
  const fs::path dir = scratch_dir("run_truncated");
  const std::string full = read_file(source_dir() / "traces/samples/glm5-128e-ep16.eptrace");
  REQUIRE(full.size() > 1000);
  write_file(dir / "cut.eptrace", full.substr(0, full.size() / 2));
  write_file(dir / "exp.yaml", experiment_yaml((dir / "cut.eptrace").string(), "ep_degree: 16", 0));
  const CliResult r = run_epsim("run exp.yaml", dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("cut.eptrace") != std::string::npos);
  CHECK(r.err.find("truncated") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out"));
  CHECK(leftovers(dir).empty());
}

TEST_CASE("a YAML typo names the file, the line and the key") {
  const fs::path dir = scratch_dir("run_typo");
  // `ep_degre` is on line 6 of the generated file.
  write_file(dir / "exp.yaml", experiment_yaml("", "ep_degre: 16"));
  const CliResult r = run_epsim("run exp.yaml", dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("exp.yaml:6:") != std::string::npos);
  CHECK(r.err.find("ep_degre") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("an EP degree that does not divide the experts is refused") {
  const fs::path dir = scratch_dir("run_bad_ep");
  write_file(dir / "exp.yaml", experiment_yaml("", "ep_degree: 12"));
  const CliResult r = run_epsim("run exp.yaml", dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("exp.yaml:6:") != std::string::npos);
  CHECK(r.err.find("12") != std::string::npos);
  CHECK(r.err.find("128") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out"));
}

TEST_CASE("flame-moe-290m prefill batch at EP=8, contiguous: per-layer token straggler 1.07-1.17") {
  const fs::path batch = shared_dir() / "traces-raw/flame-moe-290m/Encoder_Batch_0-32";
  if (!fs::exists(batch)) {
    MESSAGE("skipped: " << batch.string() << " is absent");
    return;
  }
  const fs::path dir = scratch_dir("run_flame");
  const CliResult imported =
      run_epsim("trace import flame-csv '" + batch.string() + "' --ranks 8 -o flame.eptrace", dir);
  INFO(imported.err);
  REQUIRE(imported.status == 0);
  const fs::path src = source_dir();
  write_file(dir / "exp.yaml", "kind: experiment\nname: flame\ntrace: flame.eptrace\n"
                               "model: " + (src / "models/flame-moe-290m.yaml").string() + "\n"
                               "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
                               "ep_degree: 8\nplacement: contiguous\nbalancer:\n  name: static_ep\noutput: out\n");
  const CliResult r = run_epsim("run exp.yaml", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::istringstream csv(read_file(dir / "out/metrics.csv"));
  std::string header, line;
  std::getline(csv, header);
  // Find the column by name rather than position.
  int column = -1, i = 0;
  std::istringstream names(header);
  for (std::string name; std::getline(names, name, ','); ++i)
    if (name == "token_straggler_ratio") column = i;
  REQUIRE(column >= 0);
  int layers = 0;
  while (std::getline(csv, line)) {
    std::istringstream cells(line);
    std::string cell;
    for (int c = 0; c <= column; ++c) std::getline(cells, cell, ',');
    const double ratio = std::stod(cell);
    INFO("layer row " << layers << ": " << ratio);
    // The published range is given to two decimals (SOURCE.md: 1.07-1.17), so compare at that precision.
    CHECK(std::round(ratio * 100) / 100 >= 1.07);
    CHECK(std::round(ratio * 100) / 100 <= 1.17);
    ++layers;
  }
  CHECK(layers == 8);
}

TEST_CASE("a balancer parameter that cannot fit the cluster is a clear input error, not a crash") {
  const fs::path dir = scratch_dir("run_bad_balancer_params");
  // LAER-MoE with one expert slot per GPU cannot hold 128 experts on 16 GPUs.
  std::string yaml = experiment_yaml();
  yaml.replace(yaml.find("  name: static_ep\n"), 18, "  name: laer_moe\n  params: {capacity_per_gpu: 1}\n");
  write_file(dir / "exp.yaml", yaml);
  const CliResult r = run_epsim("run exp.yaml", dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("exp.yaml:") != std::string::npos);
  CHECK(r.err.find("laer_moe") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "out"));
  CHECK(leftovers(dir).empty());
}

TEST_CASE("epsim --version prints the project's version and exits 0") {
  const fs::path dir = scratch_dir("run_version");
  const CliResult r = run_epsim("--version", dir);
  CHECK(r.status == 0);
  CHECK(r.out == "epsim 0.1.0\n");  // project(epsim VERSION 0.1.0) in CMakeLists.txt
  CHECK(r.err.empty());
}

TEST_CASE("past EP 256 the run summary says what exact would cost before advising it") {
  const fs::path dir = scratch_dir("run_sharing_wide");
  const fs::path src = source_dir();
  // EP 512 on 64 nodes, a small record (32 tokens a rank) of a model widened to 512 experts.
  const CliResult trace = run_epsim("trace generate --ranks 512 --experts 512 --top-k 8 --tokens-per-rank 32 "
                                    "--layers 1 --micro-batches 1 --steps 1 --seed 1 -o t.eptrace", dir);
  INFO(trace.err);
  REQUIRE(trace.status == 0);
  std::string model = read_file(src / "models/glm5-like-128.yaml");
  model.replace(model.find("num_experts: 128"), 16, "num_experts: 512");
  write_file(dir / "model.yaml", model);
  std::string hw = read_file(src / "models/h100-sxm-8.yaml");
  hw.replace(hw.find("nodes: 8 "), 8, "nodes: 64");
  write_file(dir / "hw.yaml", hw + "engine:\n  bandwidth_sharing: local\n");
  std::string yaml = experiment_yaml((dir / "t.eptrace").string(), "ep_degree: 512", 1);
  yaml.replace(yaml.find("model: "), yaml.find('\n', yaml.find("model: ")) - yaml.find("model: "), "model: model.yaml");
  yaml.replace(yaml.find("hardware: "), yaml.find('\n', yaml.find("hardware: ")) - yaml.find("hardware: "),
               "hardware: hw.yaml");
  write_file(dir / "exp.yaml", yaml + "timeline_records: 0\n");
  const CliResult r = run_epsim("run exp.yaml -q", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(read_file(dir / "out/summary.txt")
            .find("    engine.bandwidth_sharing: exact (docs/performance.md, \"local\")\n"
                  "    (exact takes seconds to minutes a layer at 512 GPUs)\n"
                  "    or measure the error on this trace's first N records: --check-exact N\n") != std::string::npos);
}


TEST_CASE("epsim run --check-exact simulates the first records again under exact and reports the run's error against it") {
  const fs::path dir = scratch_dir("run_check_exact");
  std::string yaml = experiment_yaml();
  yaml.replace(yaml.find("hardware: "), yaml.find('\n', yaml.find("hardware: ")) - yaml.find("hardware: "),
               "hardware: " + (dir / "hw.yaml").string());
  write_file(dir / "exp.yaml", yaml);
  const auto run = [&](const std::string& sharing, const std::string& options) {
    write_file(dir / "hw.yaml", read_file(source_dir() / "models/h100-sxm-8.yaml") + "engine:\n  bandwidth_sharing: " +
                                    sharing + "\n");
    return run_epsim("run exp.yaml " + options, dir);
  };
  // The same three records under local, checked on two; under local alone; under exact alone.
  const CliResult checked = run("local", "--check-exact 2 -o checked");
  INFO(checked.err);
  REQUIRE(checked.status == 0);
  REQUIRE(run("local", "-o plain").status == 0);
  REQUIRE(run("exact", "-o exact").status == 0);
  // The run's own outputs are those of the run without the check, to the byte.
  for (const char* f : {"metrics.csv", "gpus.csv", "timeline.json"})
    CHECK(read_file(dir / "checked" / f) == read_file(dir / "plain" / f));
  // exact_check.csv: a row for each of the two records, its figures those of the two separate runs.
  const auto check = csv_rows(read_file(dir / "checked/exact_check.csv"));
  REQUIRE(check.size() == 3);
  const auto local_rows = csv_rows(read_file(dir / "plain/metrics.csv"));
  const auto exact_rows = csv_rows(read_file(dir / "exact/metrics.csv"));
  const auto first_two = [](std::vector<std::string> v) { return std::vector<std::string>(v.begin(), v.begin() + 2); };
  CHECK(csv_column(check, "layer_time_us") == first_two(csv_column(local_rows, "layer_time_us")));
  CHECK(csv_column(check, "exact_layer_time_us") == first_two(csv_column(exact_rows, "layer_time_us")));
  CHECK(csv_column(check, "last_gpu") == first_two(csv_column(local_rows, "last_gpu")));
  CHECK(csv_column(check, "exact_last_gpu") == first_two(csv_column(exact_rows, "last_gpu")));
  for (std::size_t r = 0; r < 2; ++r) {
    const double local_us = std::stod(csv_column(check, "layer_time_us")[r]);
    const double exact_us = std::stod(csv_column(check, "exact_layer_time_us")[r]);
    CHECK(std::stod(csv_column(check, "layer_error")[r]) == doctest::Approx(local_us / exact_us - 1).epsilon(1e-6));
  }
  // Every GPU's forward GEMM finish against exact's, from the two runs' gpus.csv (16 GPUs a record).
  const auto local_gpus = csv_column(csv_rows(read_file(dir / "plain/gpus.csv")), "gemm_finish_fwd_us");
  const auto exact_gpus = csv_column(csv_rows(read_file(dir / "exact/gpus.csv")), "gemm_finish_fwd_us");
  for (std::size_t r = 0; r < 2; ++r) {
    double lo = 1, hi = -1;
    for (std::size_t g = 0; g < 16; ++g) {
      const double e = std::stod(local_gpus[r * 16 + g]) / std::stod(exact_gpus[r * 16 + g]) - 1;
      lo = std::min(lo, e);
      hi = std::max(hi, e);
    }
    CHECK(std::stod(csv_column(check, "gpu_error_min")[r]) == doctest::Approx(lo).epsilon(1e-6));
    CHECK(std::stod(csv_column(check, "gpu_error_max")[r]) == doctest::Approx(hi).epsilon(1e-6));
  }
  // The summary says so, beside the mode's measured claim, in place of the suggestion to check that
  // a run without the option prints, and lists the file.
  const std::string summary = read_file(dir / "checked/summary.txt");
  CHECK(summary.find("or measure the error on this trace's first N records") == std::string::npos);
  CHECK(read_file(dir / "plain/summary.txt").find("or measure the error on this trace's first N records") !=
        std::string::npos);
  CHECK(summary.find("\n    checked against exact on this trace's first 2 records (--check-exact, exact_check.csv):\n"
                     "      local's layer time ") != std::string::npos);
  CHECK(summary.find("the GPU named last exact's in ") != std::string::npos);
  CHECK(checked.out.find(",exact_check.csv}") != std::string::npos);
  // More records asked for than the run has: those it has.
  REQUIRE(run("local", "--check-exact 9 -o all").status == 0);
  CHECK(csv_rows(read_file(dir / "all/exact_check.csv")).size() == 4);
  CHECK(read_file(dir / "all/summary.txt").find("first 3 records") != std::string::npos);
  // A run under exact has nothing to check.
  const CliResult exact_checked = run("exact", "--check-exact 1 -o exact_checked");
  REQUIRE(exact_checked.status == 0);
  CHECK(read_file(dir / "exact_checked/summary.txt").find("--check-exact: the run's sharing is exact; nothing to check") !=
        std::string::npos);
  CHECK_FALSE(fs::exists(dir / "exact_checked/exact_check.csv"));
  // A negative count is refused before anything is written.
  const CliResult negative = run("local", "--check-exact -1 -o negative");
  CHECK(negative.status == 2);
  CHECK(negative.err.find("--check-exact") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "negative"));
}

// `epsim run` and `epsim compare` with --threads: the same output files, byte for byte, for 1, 2 and 3
// threads (a comparison's replays then run side by side), and the same error (with no output) when a
// record in the middle of a trace fails.
#include <doctest/doctest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>
#include <string>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

/// Runs `command --threads N -o outN` for N = 1, 2, 3 in `dir` and checks that each of `files` is the
/// same in the three output folders and that stdout is the same but for the folder's name.
void check_same_for_thread_counts(const fs::path& dir, const std::string& command,
                                  const std::set<std::string>& files) {
  std::string first_out;
  for (const int threads : {1, 2, 3}) {
    const std::string out = "out" + std::to_string(threads);
    const CliResult r = run_epsim(command + " --threads " + std::to_string(threads) + " -o " + out, dir);
    INFO("threads " << threads << ": " << r.err);
    REQUIRE(r.status == 0);
    std::string stdout_text = r.out;
    for (std::size_t at; (at = stdout_text.find(out)) != std::string::npos;) stdout_text.replace(at, out.size(), "OUT");
    if (threads == 1) {
      first_out = stdout_text;
      continue;
    }
    CHECK(stdout_text == first_out);
    for (const std::string& f : files) {
      INFO(f);
      const std::string one = read_file(dir / "out1" / f);
      CHECK(!one.empty());
      CHECK(read_file(dir / out / f) == one);
    }
  }
}

/// The sum of an integer column of a CSV file without quoted cells.
long column_sum(const std::string& csv, const std::string& column) {
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  std::istringstream header(line);
  int index = 0;
  for (std::string cell; std::getline(header, cell, ',') && cell != column;) ++index;
  long sum = 0;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string cell;
    for (int i = 0; i <= index; ++i) std::getline(row, cell, ',');
    sum += std::stol(cell);
  }
  return sum;
}

/// Writes dir/bad.eptrace, the bundled sample with record 8's checksum broken, and returns the error
/// that names it. The sample's records are 20 + 4 x 16 x 128 + 8 = 8,220 bytes after a header;
/// flipping a byte in the middle of the file breaks record 8 (records 0-7 replay first).
std::string write_corrupt_sample(const fs::path& dir) {
  std::string bytes = read_file(source_dir() / "traces/samples/glm5-128e-ep16.eptrace");
  const std::size_t header = bytes.size() - 20 - 16 * 8220;
  bytes[header + 8 * 8220 + 100] ^= 0x5a;
  write_file(dir / "bad.eptrace", bytes);
  return "bad.eptrace:record 8 at byte " + std::to_string(header + 8 * 8220) + ": checksum mismatch";
}

/// Runs `command --threads N` for N = 1, 2, 3 in `dir`: each exits 2 with the same error, which
/// holds `expected`, and leaves no output folder (dir/out) and nothing half-written.
void check_same_error_for_thread_counts(const fs::path& dir, const std::string& command, const std::string& expected) {
  std::string first_err;
  for (const int threads : {1, 2, 3}) {
    const CliResult r = run_epsim(command + " --threads " + std::to_string(threads), dir);
    INFO("threads " << threads << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(expected) != std::string::npos);
    if (threads == 1) first_err = r.err;
    CHECK(r.err == first_err);
    CHECK_FALSE(fs::exists(dir / "out"));
    CHECK(leftovers(dir).empty());
  }
}

}  // namespace

TEST_CASE("epsim run --threads 1, 2, 3: byte-identical outputs on experiments/default.yaml") {
  const fs::path dir = scratch_dir("threads_run_default");
  check_same_for_thread_counts(dir, "run '" + (source_dir() / "experiments/default.yaml").string() + "'",
                               {"metrics.csv", "gpus.csv", "timeline.json", "summary.txt"});
  // All 16 records of the sample trace were replayed (a header and one row each).
  const std::string metrics = read_file(dir / "out1/metrics.csv");
  CHECK(std::count(metrics.begin(), metrics.end(), '\n') == 17);
}

TEST_CASE("epsim run --threads 1, 2, 3: DeepSeek EPLB, planned from its history, writes the same plans") {
  const fs::path dir = scratch_dir("threads_run_eplb");
  const CliResult trace = run_epsim(
      "trace generate --ranks 16 --experts 128 --top-k 8 --layers 2 --micro-batches 2 --steps 6 "
      "--tokens-per-rank 1024 --dist lognormal --lognormal-sigma 0.6 --drift 0.05 --seed 7 -o t.eptrace",
      dir);
  INFO(trace.err);
  REQUIRE(trace.status == 0);
  const fs::path src = source_dir();
  write_file(dir / "eplb.yaml",
             "kind: experiment\n"
             "name: eplb\n"
             "trace: t.eptrace\n"
             "model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
             "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
             "ep_degree: 16\n"
             "balancer:\n"
             "  name: deepseek_eplb\n"
             "  params: {redundant_experts_per_gpu: 1, rebalance_every_steps: 2, window_steps: 2}\n"
             "output: out\n"
             "seed: 1\n"
             "backward: true\n"
             "timeline_records: 3\n");
  check_same_for_thread_counts(dir, "run eplb.yaml --write-plans",
                               {"metrics.csv", "gpus.csv", "timeline.json", "summary.txt", "plans.jsonl"});
  // 6 steps x 2 micro-batches x 2 layers, re-balanced at steps 2 and 4 from the 2 steps before: steps
  // 0-1 are warm-up (4 records of each layer), the 16 records after are planned from history.
  const std::string plans = read_file(dir / "out1/plans.jsonl");
  CHECK(std::count(plans.begin(), plans.end(), '\n') == 24);
  CHECK(column_sum(read_file(dir / "out1/metrics.csv"), "warmup") == 8);
}

TEST_CASE("epsim compare --threads 1, 2, 3: the same table") {
  const fs::path dir = scratch_dir("threads_compare");
  const fs::path src = source_dir();
  write_file(dir / "cmp.yaml",
             "kind: comparison\n"
             "name: threads\n"
             "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
             "cases:\n"
             "  - name: sample\n"
             "    trace: " + (src / "traces/samples/glm5-128e-ep16.eptrace").string() + "\n"
             "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
             "ep_degrees: [8, 16]\n"
             "balancers:\n"
             "  - name: static_ep\n"
             "  - name: deepseek_eplb\n"
             "    params: {window: 2, period: 2}\n"
             "  - name: deepseek_eplb\n"
             "    label: eplb-3-groups\n"
             "    params: {num_groups: 3}\n"
             "output: out\n"
             "max_records: 10\n");
  // With 2 or 3 threads the six replays run side by side, and the rows still come in the file's order.
  check_same_for_thread_counts(dir, "compare cmp.yaml", {"comparison.csv", "comparison.md"});
  const std::string csv = read_file(dir / "out1/comparison.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 7);  // header + 2 EP degrees x 3 balancers
  // 3 groups do not divide the 128 experts: that balancer's rows say so, at both degrees.
  CHECK(csv.find("must divide the 128 experts") != std::string::npos);
}

TEST_CASE("epsim compare: a corrupt trace in a later case is the same error for every thread count, with no output") {
  const fs::path dir = scratch_dir("threads_compare_corrupt");
  const std::string error = write_corrupt_sample(dir);
  const fs::path src = source_dir();
  write_file(dir / "cmp.yaml",
             "kind: comparison\n"
             "name: corrupt\n"
             "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
             "cases:\n"
             "  - name: sample\n"
             "    trace: " + (src / "traces/samples/glm5-128e-ep16.eptrace").string() + "\n"
             "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
             "  - name: bad\n"
             "    trace: bad.eptrace\n"
             "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
             "ep_degrees: [8, 16]\n"
             "balancers:\n"
             "  - name: static_ep\n"
             "  - name: ultraep\n"
             "output: out\n"
             "max_records: 10\n");
  check_same_error_for_thread_counts(dir, "compare cmp.yaml -q", error);
}

TEST_CASE("epsim run: a corrupt record in the middle is the same error for every thread count, with no output") {
  const fs::path dir = scratch_dir("threads_run_corrupt");
  const std::string error = write_corrupt_sample(dir);
  const fs::path src = source_dir();
  write_file(dir / "exp.yaml",
             "kind: experiment\nname: bad\ntrace: bad.eptrace\n"
             "model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
             "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
             "ep_degree: 16\nbalancer:\n  name: static_ep\noutput: out\nseed: 1\n");
  check_same_error_for_thread_counts(dir, "run exp.yaml", error);
}

TEST_CASE("epsim run --threads rejects a negative count") {
  const fs::path dir = scratch_dir("threads_negative");
  const CliResult r = run_epsim("run '" + (source_dir() / "experiments/default.yaml").string() + "' --threads -1", dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("--threads") != std::string::npos);
}

// `epsim sweep --check-exact N`: the points that run a fast sharing checked on their first N records
// against exact, in a file per point and exact_check.csv, every figure equal to what the same sweep
// gives under each sharing alone; added to a finished sweep without computing its points again.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "sim/sweep/point_check.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sweep/sweep_test_files.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

/// Static EP and the ideal-balance what-if (neither warms up, so a point's p50 is over its first
/// records) at EP 8 and 16, two records each.
const char* const kSweep =
    "balancers:\n  - name: static_ep\n  - name: ideal-balance\nset:\n  max_records: 2\ngrid:\n  ep_degree: [8, 16]\n";
/// auto with exact up to 8 GPUs and local beyond: EP 8 runs exact, EP 16 local.
const char* const kSplit = " --set engine.exact_max_gpus=8 --set engine.coupled_max_gpus=0";

/// results.csv's p50 of layer_time_us for `balancer` at `ep`.
double p50_layer_us(const std::string& csv, const std::string& balancer, const std::string& ep) {
  const auto rows = csv_rows(csv);
  const auto balancers = csv_column(rows, "balancer");
  const auto degrees = csv_column(rows, "ep_degree");
  const auto metric = csv_column(rows, "metric");
  const auto p50 = csv_column(rows, "p50");
  for (std::size_t r = 0; r < balancers.size(); ++r)
    if (balancers[r] == balancer && degrees[r] == ep && metric[r] == "layer_time_us") return std::stod(p50[r]);
  FAIL("no layer_time_us row for " << balancer << " at EP " << ep);
  return 0;
}

}  // namespace

TEST_CASE("epsim sweep --check-exact checks the points that run a fast sharing, also on a finished folder") {
  const fs::path dir = scratch_dir("sweep_check_exact");
  write_file(dir / "s.yaml", sweep_yaml(kSweep));
  const CliResult r = run_epsim("sweep s.yaml -o out -j 2 --check-exact 2" + std::string(kSplit), dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("  --check-exact 2: 1 point checked against exact (1 by this run): out/exact_check.csv\n") !=
        std::string::npos);
  // The same sweep under local alone and under exact alone.
  REQUIRE(run_epsim("sweep s.yaml -o local -q --set engine.bandwidth_sharing=local", dir).status == 0);
  REQUIRE(run_epsim("sweep s.yaml -o exact -q --set engine.bandwidth_sharing=exact", dir).status == 0);

  // One row per balancer of the EP 16 point; the EP 8 point ran exact.
  const auto rows = csv_rows(read_file(dir / "out/exact_check.csv"));
  REQUIRE(rows.size() == 3);
  CHECK(csv_column(rows, "ep_degree") == std::vector<std::string>{"16", "16"});
  CHECK(csv_column(rows, "sharing") == std::vector<std::string>{"local", "local"});
  CHECK(csv_column(rows, "balancer") == std::vector<std::string>{"static_ep", "ideal-balance"});
  CHECK(csv_column(rows, "records") == std::vector<std::string>{"2", "2"});
  const std::string local_csv = read_file(dir / "local/results.csv");
  const std::string exact_csv = read_file(dir / "exact/results.csv");
  const auto run_us = csv_column(rows, "layer_time_us_median");
  const auto exact_us = csv_column(rows, "exact_layer_time_us_median");
  for (std::size_t b = 0; b < 2; ++b) {
    const std::string balancer = b == 0 ? "static_ep" : "ideal-balance";
    INFO(balancer);
    CHECK(std::stod(run_us[b]) == doctest::Approx(p50_layer_us(local_csv, balancer, "16")).epsilon(1e-8));
    CHECK(std::stod(exact_us[b]) == doctest::Approx(p50_layer_us(exact_csv, balancer, "16")).epsilon(1e-8));
  }
  // The speedups on the baseline, static EP: its median over the balancer's, under each sharing.
  const auto speedup = csv_column(rows, "speedup");
  const auto exact_speedup = csv_column(rows, "exact_speedup");
  CHECK(speedup[0] == "1");
  CHECK(std::stod(speedup[1]) == doctest::Approx(std::stod(run_us[0]) / std::stod(run_us[1])).epsilon(1e-8));
  CHECK(std::stod(exact_speedup[1]) == doctest::Approx(std::stod(exact_us[0]) / std::stod(exact_us[1])).epsilon(1e-8));

  // The sweep's own tables are those of the run without the option.
  REQUIRE(run_epsim("sweep s.yaml -o plain -q" + std::string(kSplit), dir).status == 0);
  for (const char* f : {"results.csv", "results.jsonl", "summary.md"})
    CHECK(read_file(dir / "out" / f) == read_file(dir / "plain" / f));
  // Added to that finished folder: no point is computed again, only the check, with the same file.
  const CliResult added = run_epsim("sweep s.yaml -o plain --progress --check-exact 2" + std::string(kSplit), dir);
  INFO(added.err);
  REQUIRE(added.status == 0);
  CHECK(added.err.find("epsim sweep: point 1 (ep_degree=16) checked against exact in ") != std::string::npos);
  CHECK(added.out.find("2 found in plain, 0 computed") != std::string::npos);
  CHECK(added.out.find("(1 by this run)") != std::string::npos);
  CHECK(read_file(dir / "plain/exact_check.csv") == read_file(dir / "out/exact_check.csv"));
  // On one thread (above: two, for the one point's records), the same file.
  REQUIRE(run_epsim("sweep s.yaml -o one -q -j 1 --check-exact 2" + std::string(kSplit), dir).status == 0);
  CHECK(read_file(dir / "one/exact_check.csv") == read_file(dir / "out/exact_check.csv"));
  // Run again, it finds the check.
  CHECK(run_epsim("sweep s.yaml -o out --check-exact 2" + std::string(kSplit), dir).out.find("(0 by this run)") !=
        std::string::npos);
  CHECK(leftovers(dir).empty());

  // Every point exact: nothing to check, no file.
  const CliResult all_exact = run_epsim("sweep s.yaml -o exact --check-exact 1 --set engine.bandwidth_sharing=exact", dir);
  REQUIRE(all_exact.status == 0);
  CHECK(all_exact.out.find("--check-exact 1: every point runs exact sharing; nothing to check\n") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "exact/exact_check.csv"));

  // --restart for another sweep removes the checks with the points.
  const CliResult other = run_epsim("sweep s.yaml -o out -q --restart --set engine.bandwidth_sharing=exact", dir);
  INFO(other.err);
  REQUIRE(other.status == 0);
  CHECK_FALSE(fs::exists(dir / "out/exact_check.csv"));
  for (const auto& entry : fs::directory_iterator(dir / "out/points"))
    CHECK(entry.path().filename().string().find(".check-") == std::string::npos);

  // Refused: a negative count, and the option with --join.
  const CliResult negative = run_epsim("sweep s.yaml -o negative --check-exact -1", dir);
  CHECK(negative.status == 2);
  CHECK_FALSE(fs::exists(dir / "negative"));
  const CliResult join = run_epsim("sweep --join out --check-exact 1 -o joined", dir);
  CHECK(join.status == 2);
  CHECK(join.err.find("--join takes output folders only") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "joined"));
}

TEST_CASE("a sweep point's check file reads back as written, and a damaged one is one error naming it") {
  using namespace epsim;
  const fs::path dir = scratch_dir("sweep_check_file");
  PointCheck c;
  c.id = "ep_degree-16-x";
  c.hash = "0123456789abcdef";
  c.wanted = 2;
  c.sharing = "coupled";
  BalancerCheck served;
  served.label = "static_ep";
  served.summary = {2, -0.0099009901, 1.0 / 3, -0.2, 0.125, 1, 0.5, 1100.5, 1.0 / 7};
  BalancerCheck unserved;
  unserved.label = "eplb";
  unserved.not_served = "needs \"x\", got y";
  c.balancers = {served, unserved};
  write_file(dir / "c.json", point_check_json(c));
  const PointCheck back = read_point_check_json((dir / "c.json").string());
  CHECK(back.id == c.id);
  CHECK(back.hash == c.hash);
  CHECK(back.wanted == 2);
  CHECK(back.sharing == "coupled");
  REQUIRE(back.balancers.size() == 2);
  const ExactCheck::Summary& s = back.balancers[0].summary;
  // Every double to the bit.
  CHECK(s.records == 2);
  CHECK(s.layer_error_min == -0.0099009901);
  CHECK(s.layer_error_max == 1.0 / 3);
  CHECK(s.gpu_error_min == -0.2);
  CHECK(s.gpu_error_max == 0.125);
  CHECK(s.same_last == 1);
  CHECK(s.worst_pick == 0.5);
  CHECK(s.layer_us_median == 1100.5);
  CHECK(s.exact_layer_us_median == 1.0 / 7);
  CHECK(back.balancers[1].not_served == "needs \"x\", got y");
  CHECK(point_check_json(back) == point_check_json(c));
  // Cut short, or another file's format: one error that names the file.
  const std::string text = point_check_json(c);
  write_file(dir / "cut.json", text.substr(0, text.size() / 2));
  const std::string cut = (dir / "cut.json").string();
  CHECK_THROWS_WITH_AS(read_point_check_json(cut), doctest::Contains(cut.c_str()), InputError);
  write_file(dir / "other.json", "{\"format\": \"epsim-sweep-point\", \"version\": 2}");
  CHECK_THROWS_WITH_AS(read_point_check_json((dir / "other.json").string()), doctest::Contains("format or version"),
                       InputError);
}

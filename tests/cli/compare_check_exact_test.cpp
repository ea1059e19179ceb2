// `epsim compare --check-exact N`: each replay that ran a fast sharing checked on its first N records
// against exact, every figure equal to what separate comparisons under each sharing give.
#include <doctest/doctest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

/// A comparison of static EP and the ideal-balance what-if (neither warms up, so a replay's median
/// is over its first records) on the bundled sample trace at EP 8 and 16, on `hw.yaml`.
std::string comparison(int max_records) {
  const fs::path src = source_dir();
  return "kind: comparison\nname: check\nhardware: hw.yaml\ncases:\n"
         "  - name: sample\n"
         "    trace: " + (src / "traces/samples/glm5-128e-ep16.eptrace").string() + "\n"
         "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
         "ep_degrees: [8, 16]\nbalancers:\n  - name: static_ep\n  - name: ideal-balance\n"
         "output: out\nmax_records: " + std::to_string(max_records) + "\n";
}

/// The rows of exact_check.csv for `balancer`, column `name`.
std::vector<double> checked(const std::vector<std::vector<std::string>>& rows, const std::string& balancer,
                            const std::string& name) {
  const std::vector<std::string> balancers = csv_column(rows, "balancer");
  const std::vector<std::string> values = csv_column(rows, name);
  std::vector<double> out;
  for (std::size_t r = 0; r < values.size(); ++r)
    if (balancers[r] == balancer) out.push_back(std::stod(values[r]));
  return out;
}

/// comparison.csv's median layer time of `balancer` at EP `ep`.
double median_layer_us(const std::string& csv, const std::string& balancer, int ep) {
  const auto rows = csv_rows(csv);
  const auto balancers = csv_column(rows, "balancer");
  const auto degrees = csv_column(rows, "ep_degree");
  const auto medians = csv_column(rows, "layer_time_us_median");
  for (std::size_t r = 0; r < balancers.size(); ++r)
    if (balancers[r] == balancer && degrees[r] == std::to_string(ep)) return std::stod(medians[r]);
  FAIL("no row for " << balancer << " at EP " << ep);
  return 0;
}

}  // namespace

TEST_CASE("epsim compare --check-exact checks the replays that ran a fast sharing against exact") {
  const fs::path dir = scratch_dir("compare_check_exact");
  const std::string preset = read_file(source_dir() / "models/h100-sxm-8.yaml");
  // auto, exact up to 8 GPUs and local beyond: EP 8 runs exact, EP 16 local.
  const auto compare = [&](const std::string& engine, int max_records, const std::string& options) {
    write_file(dir / "hw.yaml", preset + "engine:\n" + engine);
    write_file(dir / "cmp.yaml", comparison(max_records));
    return run_epsim("compare cmp.yaml " + options, dir);
  };
  const std::string split = "  bandwidth_sharing: auto\n  exact_max_gpus: 8\n  coupled_max_gpus: 0\n";
  const CliResult r = compare(split, 3, "--check-exact 2 -o checked");
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(compare(split, 3, "-q -o plain").status == 0);
  // The same two first records under each sharing alone.
  REQUIRE(compare("  bandwidth_sharing: local\n", 2, "-q -o local2").status == 0);
  REQUIRE(compare("  bandwidth_sharing: exact\n", 2, "-q -o exact2").status == 0);

  // The comparison itself is the same bytes; its document gains the section at its end.
  CHECK(read_file(dir / "checked/comparison.csv") == read_file(dir / "plain/comparison.csv"));
  const std::string md = read_file(dir / "checked/comparison.md");
  const std::string plain_md = read_file(dir / "plain/comparison.md");
  CHECK(md.rfind(plain_md, 0) == 0);
  CHECK(md.substr(plain_md.size()).rfind("\n## Checked against exact\n\n`--check-exact 2`: the first 2 records", 0) == 0);
  CHECK(md.find("The replays at EP 8 ran exact: nothing to check there.\n") != std::string::npos);
  CHECK(r.out.find(",exact_check.csv}") != std::string::npos);
  CHECK(r.err.find("epsim compare: sample EP 16 static_ep: 2 checked against exact\n") != std::string::npos);

  // exact_check.csv: the two records of each EP 16 replay, none at EP 8. Their medians are those of
  // the comparisons under local and under exact alone, each over the same two records.
  const auto rows = csv_rows(read_file(dir / "checked/exact_check.csv"));
  REQUIRE(rows.size() == 5);
  CHECK(csv_column(rows, "ep_degree") == std::vector<std::string>(4, "16"));
  CHECK(csv_column(rows, "sharing") == std::vector<std::string>(4, "local"));
  const std::string local_csv = read_file(dir / "local2/comparison.csv");
  const std::string exact_csv = read_file(dir / "exact2/comparison.csv");
  for (const char* balancer : {"static_ep", "ideal-balance"}) {
    INFO(balancer);
    const std::vector<double> run_us = checked(rows, balancer, "layer_time_us");
    const std::vector<double> exact_us = checked(rows, balancer, "exact_layer_time_us");
    REQUIRE(run_us.size() == 2);
    REQUIRE(exact_us.size() == 2);
    CHECK((run_us[0] + run_us[1]) / 2 == doctest::Approx(median_layer_us(local_csv, balancer, 16)).epsilon(1e-8));
    CHECK((exact_us[0] + exact_us[1]) / 2 == doctest::Approx(median_layer_us(exact_csv, balancer, 16)).epsilon(1e-8));
  }
  // The order line names both balancers, fastest first under each sharing.
  const double ideal = median_layer_us(exact_csv, "ideal-balance", 16);
  const double base = median_layer_us(exact_csv, "static_ep", 16);
  REQUIRE(ideal < base);
  CHECK(md.find("- sample, EP 16: ideal-balance, static_ep") != std::string::npos);

  // Every replay exact: nothing to check, and no exact_check.csv.
  const CliResult all_exact = compare("  bandwidth_sharing: exact\n", 1, "-q --check-exact 1 -o all_exact");
  REQUIRE(all_exact.status == 0);
  CHECK(read_file(dir / "all_exact/comparison.md")
            .find("`--check-exact 1`: every replay ran exact bandwidth sharing; nothing to check.\n") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "all_exact/exact_check.csv"));
  // A negative count is refused before anything is written.
  const CliResult negative = compare(split, 1, "--check-exact -1 -o negative");
  CHECK(negative.status == 2);
  CHECK(negative.err.find("--check-exact") != std::string::npos);
  CHECK_FALSE(fs::exists(dir / "negative"));
}

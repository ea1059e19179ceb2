// The comparison table: aggregation of hand-made LayerMetrics (medians, means, reductions against the
// baseline worked out by hand), the exact CSV and Markdown text, and `epsim compare` end to end on the
// bundled sample trace.
#include "sim/report/comparison_table.hpp"

#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace {

using epsim::ComparisonAccumulator;
using epsim::ComparisonKey;
using epsim::ComparisonRow;
using epsim::LayerMetrics;

LayerMetrics record(double token_excess, double gemm_excess, double layer_us, double gap_us) {
  LayerMetrics m;
  m.token_excess = token_excess;
  m.token_straggler_ratio = 1 + token_excess;
  m.token_idle_fraction = 1 - 1 / (1 + token_excess);
  m.gemm_excess = gemm_excess;
  m.gemm_straggler_ratio = 1 + gemm_excess;
  m.layer_time_us = layer_us;
  m.gap_to_bound_us = gap_us;
  m.bound_layer_time_us = layer_us - gap_us;
  return m;
}

ComparisonRow summarise(const std::vector<LayerMetrics>& records, const ComparisonKey& key) {
  ComparisonAccumulator acc;
  for (const LayerMetrics& m : records) acc.add(m);
  return acc.row(key);
}

}  // namespace

TEST_CASE("median_of: odd and even counts") {
  CHECK(epsim::median_of({3, 1, 2}) == 2);
  CHECK(epsim::median_of({4, 1, 3, 2}) == 2.5);
  CHECK(epsim::median_of({7}) == 7);
  CHECK_THROWS(epsim::median_of({}));
}

TEST_CASE("comparison rows: medians, means and reductions against the baseline") {
  // Baseline: 3 records; medians of the middle record, means of the bytes and utilisation.
  std::vector<LayerMetrics> base = {record(0.30, 0.40, 100, 10), record(0.10, 0.20, 300, 30),
                                    record(0.20, 0.25, 200, 20)};
  base[0].bound_nvlink_domain = 1.10;
  base[1].bound_nvlink_domain = 1.05;
  base[2].bound_nvlink_domain = 1.20;
  base[0].ep_token_bytes = 1e6;
  base[1].ep_token_bytes = 2e6;
  base[2].ep_token_bytes = 3e6;
  base[0].nvlink_out_util_max = 0.3;
  base[1].nvlink_out_util_max = 0.6;
  base[2].nvlink_out_util_max = 0.9;
  // A balancer with 4 records: medians average the two middle values.
  std::vector<LayerMetrics> other = {record(0.05, 0.10, 150, 1), record(0.00, 0.10, 160, 2),
                                     record(0.10, 0.05, 170, 3), record(0.02, 0.15, 180, 4)};
  for (LayerMetrics& m : other) {
    m.weight_bytes = 1e6;
    m.gradient_bytes = 5e5;
    m.ce_token_bytes = 4e5;
    m.copy_engine_util_max = 0.25;
    m.planner_us = 8;
  }
  other[3].planner_us = 12;

  std::vector<ComparisonRow> rows = {summarise(base, {"c", 8, "static_ep", "static_ep"}),
                                     summarise(other, {"c", 8, "mine", "oracle"})};
  const ComparisonRow& b = rows[0];
  CHECK(b.records == 3);
  CHECK(b.token_excess_median == doctest::Approx(0.20));
  CHECK(b.token_straggler_ratio_median == doctest::Approx(1.20));
  CHECK(b.gemm_excess_median == doctest::Approx(0.25));
  CHECK(b.gemm_straggler_ratio_median == doctest::Approx(1.25));
  CHECK(b.layer_time_us_median == doctest::Approx(200));
  CHECK(b.gap_to_bound_us_median == doctest::Approx(20));
  CHECK(b.bound_layer_time_us_median == doctest::Approx(180));  // 90, 270, 180
  CHECK(b.layer_time_us_mean == doctest::Approx(200));
  CHECK(b.layer_time_us_p95 == doctest::Approx(290));  // 200 + 0.9 x (300 - 200)
  CHECK(b.crit_bound == "waiting");                    // the metrics' default
  CHECK(b.bound_nvlink_domain_median == doctest::Approx(1.10));
  CHECK(b.token_idle_fraction_median == doctest::Approx(1 - 1 / 1.2));
  CHECK(b.ep_token_bytes_mean == doctest::Approx(2e6));
  CHECK(b.nvlink_out_util_max_mean == doctest::Approx(0.6));
  CHECK(b.weight_bytes_mean == 0);
  CHECK_FALSE(b.token_excess_reduction.has_value());  // not before apply_reductions

  const ComparisonRow& o = rows[1];
  CHECK(o.records == 4);
  CHECK(o.token_excess_median == doctest::Approx(0.035));  // (0.02 + 0.05) / 2
  CHECK(o.gemm_excess_median == doctest::Approx(0.10));    // (0.10 + 0.10) / 2
  CHECK(o.layer_time_us_median == doctest::Approx(165));
  CHECK(o.gap_to_bound_us_median == doctest::Approx(2.5));
  CHECK(o.layer_time_us_p95 == doctest::Approx(178.5));  // 170 + 0.85 x 10
  CHECK(o.weight_bytes_mean == doctest::Approx(1e6));
  CHECK(o.gradient_bytes_mean == doctest::Approx(5e5));
  CHECK(o.ce_token_bytes_mean == doctest::Approx(4e5));
  CHECK(o.copy_engine_util_max_mean == doctest::Approx(0.25));
  CHECK(o.planner_us_mean == doctest::Approx(9));

  epsim::apply_reductions(rows, "static_ep");
  REQUIRE(rows[0].token_excess_reduction.has_value());
  CHECK(*rows[0].token_excess_reduction == 0);  // the baseline against itself
  CHECK(*rows[0].gemm_excess_reduction == 0);
  REQUIRE(rows[1].token_excess_reduction.has_value());
  CHECK(*rows[1].token_excess_reduction == doctest::Approx(1 - 0.035 / 0.20));  // 0.825
  CHECK(*rows[1].gemm_excess_reduction == doctest::Approx(1 - 0.10 / 0.25));    // 0.6
}

TEST_CASE("comparison rows: the bounding resource is the most frequent one, ties to the first in name order") {
  std::vector<LayerMetrics> records(5, record(0.1, 0.1, 100, 5));
  records[0].crit_bound = records[1].crit_bound = "SM";
  records[2].crit_bound = records[3].crit_bound = "NVLink";
  records[4].crit_bound = "InfiniBand";
  // Two each for NVLink and SM: NVLink, the first of the two in name order.
  CHECK(summarise(records, {"c", 8, "static_ep", "static_ep"}).crit_bound == "NVLink");
  records[4].crit_bound = "SM";
  CHECK(summarise(records, {"c", 8, "static_ep", "static_ep"}).crit_bound == "SM");
}

TEST_CASE("comparison rows: warm-up records are counted apart, and a row of warm-up only is n/a") {
  std::vector<LayerMetrics> records = {record(0.5, 0.5, 400, 40), record(0.5, 0.5, 400, 40), record(0.1, 0.1, 100, 5)};
  records[0].warmup = records[1].warmup = true;
  const ComparisonRow r = summarise(records, {"c", 8, "eplb", "deepseek_eplb"});
  CHECK(r.records == 1);
  CHECK(r.warmup_records == 2);
  CHECK(r.layer_time_us_median == 100);
  CHECK(r.token_excess_median == doctest::Approx(0.1));
  records.pop_back();
  const ComparisonRow none = summarise(records, {"c", 8, "eplb", "deepseek_eplb"});
  CHECK(none.records == 0);
  CHECK(none.warmup_records == 2);
  CHECK(none.not_served.find("n/a: all 2 records are the balancer's warm-up") == 0);
}

TEST_CASE("comparison reductions: a balanced baseline or no baseline leaves them empty") {
  std::vector<ComparisonRow> rows = {
      summarise({record(0, 0, 10, 0), record(0, 0, 10, 0)}, {"flat", 16, "static_ep", "static_ep"}),
      summarise({record(0.1, 0.2, 10, 0)}, {"flat", 16, "mine", "oracle"}),
      summarise({record(0.1, 0.2, 10, 0)}, {"flat", 8, "mine", "oracle"}),  // no baseline at EP 8
      summarise({record(0.2, 0, 10, 0)}, {"other", 16, "static_ep", "static_ep"}),
      summarise({record(0.3, 0.1, 10, 0)}, {"other", 16, "mine", "oracle"}),
  };
  epsim::apply_reductions(rows, "static_ep");
  for (int i = 0; i < 3; ++i) {
    CAPTURE(i);
    CHECK_FALSE(rows[i].token_excess_reduction.has_value());
    CHECK_FALSE(rows[i].gemm_excess_reduction.has_value());
  }
  // Case "other": the token excess got worse (negative reduction); the baseline has no GEMM excess.
  REQUIRE(rows[4].token_excess_reduction.has_value());
  CHECK(*rows[4].token_excess_reduction == doctest::Approx(-0.5));
  CHECK_FALSE(rows[4].gemm_excess_reduction.has_value());

  const std::string csv = epsim::comparison_csv(rows);
  CHECK(csv.find("nan") == std::string::npos);
  CHECK(csv.find("inf") == std::string::npos);
  CHECK(csv.find("flat,16,mine,oracle,1,0,1.1,0.1,,") != std::string::npos);
  const std::string md = epsim::comparison_markdown(rows);
  CHECK(md.find("nan") == std::string::npos);
  CHECK(md.find("n/a") != std::string::npos);
  CHECK(md.find("-50.0%") != std::string::npos);
}

namespace {

/// Three rows with round numbers, for the exact text of the CSV and the Markdown table.
std::vector<ComparisonRow> format_rows() {
  ComparisonRow a;
  a.key = {"glm5", 8, "static_ep", "static_ep"};
  a.records = 16;
  a.token_straggler_ratio_median = 1.25;
  a.token_excess_median = 0.25;
  a.token_excess_reduction = 0.0;
  a.token_idle_fraction_median = 0.2;
  a.gemm_straggler_ratio_median = 1.5;
  a.gemm_excess_median = 0.5;
  a.gemm_excess_reduction = -0.0;
  a.layer_time_us_median = 1234.5;
  a.layer_time_us_mean = 1250;
  a.layer_time_us_p95 = 1400;
  a.bound_layer_time_us_median = 1134.25;
  a.gap_to_bound_us_median = 100.25;
  a.crit_bound = "SM";
  a.bound_nvlink_domain_median = 1.125;
  a.ep_token_bytes_mean = 2.5e6;
  a.nvlink_out_util_max_mean = 0.4;
  ComparisonRow b;
  b.key = {"glm5", 8, "perfect", "ideal-balance"};
  b.records = 16;
  b.warmup_records = 4;
  b.layer_time_us_mean = 1000;
  b.layer_time_us_p95 = 1000;
  b.bound_layer_time_us_median = 1000;
  b.crit_bound = "NVLink";
  b.token_straggler_ratio_median = 1;
  b.token_excess_reduction = 1.0;
  b.gemm_straggler_ratio_median = 1.1;
  b.gemm_excess_median = 0.1;
  b.gemm_excess_reduction = 0.8;
  b.layer_time_us_median = 1000;
  b.bound_nvlink_domain_median = 1.125;
  b.ep_token_bytes_mean = 2.5e6;
  b.ce_token_bytes_mean = 1e5;
  b.weight_bytes_mean = 3e6;
  b.gradient_bytes_mean = 1.5e6;
  b.planner_us_mean = 12.5;
  b.copy_engine_util_max_mean = 0.125;
  b.nvlink_out_util_max_mean = 0.5;
  ComparisonRow c;
  c.key = {"flat", 16, "mine", "ideal-balance"};
  c.records = 4;
  c.token_straggler_ratio_median = 1;
  c.gemm_straggler_ratio_median = 1;
  c.token_excess_reduction = -0.00004;  // rounds to 0.0%, written without a sign
  c.layer_time_us_median = 500;
  c.layer_time_us_mean = 500;
  c.layer_time_us_p95 = 500;
  c.bound_layer_time_us_median = 500.01;
  c.gap_to_bound_us_median = -0.01;
  c.crit_bound = "waiting";
  c.bound_nvlink_domain_median = 1;
  return {a, b, c};
}

}  // namespace

TEST_CASE("comparison.csv: exact text") {
  const std::string expected =
      "case,ep_degree,balancer,balancer_name,records,warmup_records,token_straggler_ratio_median,"
      "token_excess_median,token_excess_reduction,token_idle_fraction_median,gemm_straggler_ratio_median,"
      "gemm_excess_median,gemm_excess_reduction,layer_time_us_median,layer_time_us_mean,layer_time_us_p95,"
      "bound_layer_time_us_median,gap_to_bound_us_median,crit_bound,bound_nvlink_domain_median,"
      "ep_token_bytes_mean,ce_token_bytes_mean,weight_bytes_mean,gradient_bytes_mean,planner_us_mean,"
      "copy_engine_util_max_mean,nvlink_out_util_max_mean,not_served\n"
      "glm5,8,static_ep,static_ep,16,0,1.25,0.25,0,0.2,1.5,0.5,0,1234.5,1250,1400,1134.25,100.25,SM,1.125,"
      "2500000,0,0,0,0,0,0.4,\n"
      "glm5,8,perfect,ideal-balance,16,4,1,0,1,0,1.1,0.1,0.8,1000,1000,1000,1000,0,NVLink,1.125,2500000,100000,"
      "3000000,1500000,12.5,0.125,0.5,\n"
      "flat,16,mine,ideal-balance,4,0,1,0,-4e-05,0,1,0,,500,500,500,500.01,-0.01,waiting,1,0,0,0,0,0,0,0,\n";
  CHECK(epsim::comparison_csv(format_rows()) == expected);
  CHECK(epsim::comparison_csv_columns().size() == 28);
  CHECK(epsim::comparison_csv({}) == expected.substr(0, expected.find('\n') + 1));
}

TEST_CASE("comparison.md table: exact text") {
  // 1134.25 and 100.25 print as 1134.2 and 100.2 (round half to even); a gap of -0.01 as 0.0.
  const std::string expected =
      "| case | EP | balancer  | token max/mean | token excess reduction | GEMM max/mean |"
      " GEMM excess reduction | NVLink floor | layer time us | layer p95 us | bound us | gap us |"
      " critical path | EP token MB | CE token MB | weight+grad MB | CE util max | NVLink util max |\n"
      "| ---- | -: | --------- | -------------: | ---------------------: | ------------: |"
      " --------------------: | -----------: | ------------: | -----------: | -------: | -----: |"
      " ------------- | ----------: | ----------: | -------------: | ----------: | --------------: |\n"
      "| glm5 |  8 | static_ep |          1.250 |                   0.0% |         1.500 |"
      "                  0.0% |        1.125 |        1234.5 |       1400.0 |   1134.2 |  100.2 |"
      " SM            |        2.50 |        0.00 |           0.00 |       0.000 |           0.400 |\n"
      "| glm5 |  8 | perfect   |          1.000 |                 100.0% |         1.100 |"
      "                 80.0% |        1.125 |        1000.0 |       1000.0 |   1000.0 |    0.0 |"
      " NVLink        |        2.50 |        0.10 |           4.50 |       0.125 |           0.500 |\n"
      "| flat | 16 | mine      |          1.000 |                   0.0% |         1.000 |"
      "                   n/a |        1.000 |         500.0 |        500.0 |    500.0 |    0.0 |"
      " waiting       |        0.00 |        0.00 |           0.00 |       0.000 |           0.000 |\n";
  CHECK(epsim::comparison_markdown(format_rows()) == expected);
}

/// A comparison file whose last case, `sample`, is the bundled sample trace on the GLM-5-like model,
/// after `cases_before` (YAML list entries, or nothing).
std::string sample_comparison(const std::string& name, const std::string& hardware, const std::string& cases_before,
                              const std::string& ep_degrees, const std::string& balancers, const std::string& output,
                              int max_records) {
  const std::filesystem::path src = epsim::test::source_dir();
  return "kind: comparison\nname: " + name + "\nhardware: " + hardware + "\ncases:\n" + cases_before +
         "  - name: sample\n"
         "    trace: " + (src / "traces/samples/glm5-128e-ep16.eptrace").string() + "\n"
         "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
         "ep_degrees: " + ep_degrees + "\nbalancers:\n" + balancers + "output: " + output +
         "\nmax_records: " + std::to_string(max_records) + "\n";
}

TEST_CASE("epsim compare: outputs, skipped cases and byte-identical reruns") {
  namespace fs = std::filesystem;
  using namespace epsim::test;
  const fs::path dir = scratch_dir("compare_cli");
  const fs::path src = source_dir();
  write_file(dir / "cmp.yaml",
             sample_comparison("cli", (src / "models/h100-sxm-8.yaml").string(),
                               "  - name: absent\n"
                               "    trace: absent.eptrace\n"
                               "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
                               "    optional: true\n",
                               "[8, 16]", "  - name: static_ep\n  - name: ideal-balance\n", "out", 2));
  const CliResult r = run_epsim("compare cmp.yaml", dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("epsim compare: skipped case absent: trace absent.eptrace not found (optional: true)\n") !=
        std::string::npos);
  const std::string csv = read_file(dir / "out/comparison.csv");
  const std::string md = read_file(dir / "out/comparison.md");
  CHECK(epsim::test::leftovers(dir).empty());
  CHECK(r.out.find(md) == 0);  // stdout: the Markdown document, then where the outputs are
  std::istringstream lines(csv);
  std::string line;
  std::vector<std::string> all;
  while (std::getline(lines, line)) all.push_back(line);
  REQUIRE(all.size() == 5);  // header + 1 case x 2 EP degrees x 2 balancers
  CHECK(all[1].rfind("sample,8,static_ep,static_ep,2,", 0) == 0);
  CHECK(all[2].rfind("sample,8,ideal-balance,ideal-balance,2,", 0) == 0);
  CHECK(all[3].rfind("sample,16,static_ep,static_ep,2,", 0) == 0);
  CHECK(all[4].rfind("sample,16,ideal-balance,ideal-balance,2,", 0) == 0);
  CHECK(md.find("Skipped case absent: trace absent.eptrace not found (optional).") != std::string::npos);
  // The preset names no sharing: auto, exact at both degrees.
  CHECK(md.find("\n\nBandwidth sharing `auto`: exact at EP 8, 16 (exact up to 256 GPUs, coupled up to 1024, local "
                "beyond; `engine.bandwidth_sharing` in the hardware file, docs/config.md).\n\n") != std::string::npos);

  // An existing folder is kept unless --overwrite; a second run elsewhere gives the same bytes.
  const CliResult again = run_epsim("compare cmp.yaml", dir);
  CHECK(again.status == 2);
  CHECK(again.err.find("output folder already exists") != std::string::npos);
  const CliResult other = run_epsim("compare cmp.yaml -o out2 --quiet", dir);
  REQUIRE(other.status == 0);
  CHECK(other.out.empty());
  CHECK(read_file(dir / "out2/comparison.csv") == csv);
  CHECK(read_file(dir / "out2/comparison.md") == md);

  // Bad input: one line, exit status 2, no output folder.
  write_file(dir / "bad.yaml", "kind: comparison\nname: bad\n");
  const CliResult bad = run_epsim("compare bad.yaml -o out3", dir);
  CHECK(bad.status == 2);
  CHECK(bad.err == "epsim: error: bad.yaml:1:1: missing key 'hardware'\n");
  CHECK_FALSE(fs::exists(dir / "out3"));
}

TEST_CASE("epsim compare: comparison.md names the bandwidth sharing each EP degree ran with") {
  namespace fs = std::filesystem;
  using namespace epsim::test;
  const fs::path dir = scratch_dir("compare_sharing");
  const fs::path src = source_dir();
  const auto md_with = [&](const std::string& engine, const std::string& out) {
    write_file(dir / "hw.yaml", read_file(src / "models/h100-sxm-8.yaml") + "engine:\n" + engine);
    write_file(dir / "cmp.yaml", sample_comparison("sharing", "hw.yaml", "", "[16, 4, 8]", "  - name: static_ep\n", out, 1));
    const CliResult r = run_epsim("compare cmp.yaml -q", dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return read_file(dir / out / "comparison.md");
  };
  // auto picks by degree: each mode once, with its degrees in the file's order.
  CHECK(md_with("  bandwidth_sharing: auto\n  exact_max_gpus: 4\n  coupled_max_gpus: 8\n", "a")
            .find("Bandwidth sharing `auto`: local at EP 16; exact at EP 4; coupled at EP 8 (exact up to 4 GPUs, "
                  "coupled up to 8, local beyond;") != std::string::npos);
  CHECK(md_with("  exact_max_gpus: 8\n  coupled_max_gpus: 0\n", "b")
            .find("Bandwidth sharing `auto`: local at EP 16; exact at EP 4, 8 (exact up to 8 GPUs, local beyond;") !=
        std::string::npos);
  // A mode named in the hardware file is named alone.
  CHECK(md_with("  bandwidth_sharing: exact\n", "c").find("\n\nBandwidth sharing `exact`.\n\n") != std::string::npos);
}

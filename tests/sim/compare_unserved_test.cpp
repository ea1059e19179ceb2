// A balancer that cannot serve one configuration of a comparison shows n/a and its reason on that row;
// the other rows are replayed as usual and the comparison exits 0.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "sim/report/comparison_table.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace {

std::vector<std::string> lines_of(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

}  // namespace

TEST_CASE("comparison table: a row not served has only its key, n/a and its reason") {
  using namespace epsim;
  ComparisonRow served;
  served.key = {"c", 8, "static_ep", "static_ep"};
  served.records = 2;
  served.token_excess_median = 0.5;
  served.gemm_excess_median = 0.25;
  const ComparisonRow unserved = unserved_row({"c", 8, "eplb", "deepseek_eplb"}, "needs x, got \"y\", z");
  std::vector<ComparisonRow> rows = {served, unserved};
  apply_reductions(rows, "static_ep");
  CHECK(rows[0].token_excess_reduction == 0.0);
  CHECK_FALSE(rows[1].token_excess_reduction);
  const auto csv = lines_of(comparison_csv(rows));
  REQUIRE(csv.size() == 3);
  // Key columns, 23 empty measurements, then the reason quoted (it holds a comma and quotes).
  CHECK(csv[2] == "c,8,eplb,deepseek_eplb" + std::string(23, ',') + ",\"needs x, got \"\"y\"\", z\"");
  const auto md = lines_of(comparison_markdown(rows));
  REQUIRE(md.size() == 4);
  CHECK(md[0].find("| not served") != std::string::npos);
  CHECK(md[3].find(" n/a |") != std::string::npos);
  CHECK(md[3].find("needs x, got \"y\", z |") != std::string::npos);
  // Without unserved rows the Markdown table has no "not served" column.
  CHECK(comparison_markdown({served}).find("not served") == std::string::npos);
  // A baseline row not served gives no reductions.
  std::vector<ComparisonRow> no_base = {served, unserved};
  apply_reductions(no_base, "eplb");
  CHECK_FALSE(no_base[0].token_excess_reduction);
}

TEST_CASE("epsim compare: deepseek_eplb at EP 4 on 8-GPU nodes runs, one that cannot serve is n/a") {
  namespace fs = std::filesystem;
  using namespace epsim::test;
  const fs::path dir = scratch_dir("compare_unserved");
  const fs::path src = source_dir();
  write_file(dir / "cmp.yaml",
             "kind: comparison\n"
             "name: unserved\n"
             "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
             "cases:\n"
             "  - name: sample\n"
             "    trace: " + (src / "traces/samples/glm5-128e-ep16.eptrace").string() + "\n"
             "    model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
             "ep_degrees: [4, 8]\n"
             "balancers:\n"
             "  - name: static_ep\n"
             "  - name: deepseek_eplb\n"
             "    params: {window: 1, period: 1}\n"
             "  - name: deepseek_eplb\n"
             "    label: eplb-groups3\n"
             "    params: {num_groups: 3}\n"
             "output: out\n"
             "max_records: 8\n");
  const CliResult r = run_epsim("compare cmp.yaml --quiet", dir);
  INFO(r.err);
  // Before: "internal error" (exit 3) at the first deepseek_eplb row, EP 4 on 8-GPU nodes.
  REQUIRE(r.status == 0);
  const std::string reason = "balancer 'deepseek_eplb' cannot serve EP 4 on h100-sxm-8-ndr: num_groups 3 must "
                             "divide the 128 experts";
  CHECK(r.err.find("epsim compare: sample EP 4 eplb-groups3: n/a: ") != std::string::npos);
  CHECK(r.err.find(reason) != std::string::npos);
  const auto csv = lines_of(read_file(dir / "out/comparison.csv"));
  REQUIRE(csv.size() == 7);  // header + 2 EP degrees x 3 balancers
  CHECK(csv[1].rfind("sample,4,static_ep,static_ep,8,0,", 0) == 0);
  // The trace has 4 MoE layers per step: with a one-record window each layer's first record is warm-up.
  CHECK(csv[2].rfind("sample,4,deepseek_eplb,deepseek_eplb,4,4,", 0) == 0);
  CHECK(csv[3].rfind("sample,4,eplb-groups3,deepseek_eplb,,", 0) == 0);
  CHECK(csv[3].find(reason) != std::string::npos);
  CHECK(csv[5].rfind("sample,8,deepseek_eplb,deepseek_eplb,4,4,", 0) == 0);
  CHECK(csv[6].rfind("sample,8,eplb-groups3,deepseek_eplb,,", 0) == 0);
  const std::string md = read_file(dir / "out/comparison.md");
  CHECK(md.find("not served") != std::string::npos);
}

// A sweep's statistics are over each balancer's steady state: warm-up records (planned before a
// history-based balancer's window was full) are left out of them and of `records`, and a balancer whose
// records are all warm-up at a point is n/a there with the reason.
#include <doctest/doctest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "sim/sweep/sweep_loader.hpp"
#include "sim/sweep/sweep_runner.hpp"
#include "tests/cli/run_cli.hpp"
#include "tests/sweep/sweep_test_files.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim;
using namespace epsim::test;

namespace {

std::vector<std::string> split_csv_simple(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool quoted = false;
  for (char c : line) {
    if (c == '"') quoted = !quoted;
    else if (c == ',' && !quoted) {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += c;
    }
  }
  cells.push_back(cell);
  return cells;
}

}  // namespace

TEST_CASE("sweep: warm-up records are left out of the statistics and of records, all warm-up is n/a") {
  // The default experiment's sample trace has 4 MoE layers per step, in trace order layer by layer:
  // with a one-record window and period each layer's first record is warm-up, so of 8 records 4 are
  // steady. With vLLM's default schedule (every 3000 steps from the last 1000) all 8 are warm-up.
  const fs::path dir = scratch_dir("sweep_warmup");
  write_file(dir / "s.yaml", sweep_yaml("balancers:\n"
                                        "  - name: static_ep\n"
                                        "  - name: deepseek_eplb\n"
                                        "    label: eplb-1\n"
                                        "    params: {period: 1, window: 1}\n"
                                        "  - name: deepseek_eplb\n"
                                        "    label: eplb-vllm\n"
                                        "set:\n  max_records: 8\n"
                                        "grid:\n  ep_degree: [16]\n"));
  const SweepSpec spec = load_sweep((dir / "s.yaml").string(), {});
  SweepRunOptions o;
  o.output_dir = (dir / "out").string();
  o.threads = 1;
  std::ostringstream log;
  run_sweep(spec, o, log);
  const std::string csv = read_file(dir / "out/results.csv");
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split_csv_simple(line);
  const auto column = [&](const char* name) {
    for (std::size_t i = 0; i < header.size(); ++i)
      if (header[i] == name) return i;
    FAIL("no column " << name);
    return std::size_t{0};
  };
  const std::size_t balancer = column("balancer"), records = column("records"),
                    not_served = column("not_served");
  int static_rows = 0, steady_rows = 0, na_rows = 0;
  while (std::getline(in, line)) {
    const std::vector<std::string> c = split_csv_simple(line);
    INFO(line);
    if (c[balancer] == "static_ep") {
      ++static_rows;
      CHECK(c[records] == "8");
    } else if (c[balancer] == "eplb-1") {
      ++steady_rows;
      CHECK(c[records] == "4");
      CHECK(c[not_served].empty());
    } else if (c[balancer] == "eplb-vllm") {
      ++na_rows;
      CHECK(c[records] == "0");
      CHECK(c[not_served].rfind("n/a: all 8 records are the balancer's warm-up", 0) == 0);
    }
  }
  CHECK(static_rows > 0);
  CHECK(steady_rows == static_rows);
  CHECK(na_rows >= 1);
}

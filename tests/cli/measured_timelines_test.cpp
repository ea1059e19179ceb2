// epsim's own plan runs on real GPUs (models/measurements/timelines/) stay comparable: the plans that
// epsim writes today for those experiments are the plans that ran, so every GEMM the GPU ran pairs with
// a predicted one of the same group, and the static-EP GEMMs (no copies, no planner: GEMM time alone)
// stay within 10% of what the H100 and the H200 measured in the median. With the loop GEMMs no pair is
// off by more than 30%: FEPLB's on-arrival group runs before the held-back group in the simulator and
// after it on the GPU, and pairing them by occurrence gave -51% and +157% (docs/validation.md).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "tests/cli/run_cli.hpp"
#include "tests/test_paths.hpp"

namespace fs = std::filesystem;
using namespace epsim::test;

namespace {

std::vector<std::vector<std::string>> csv_rows(const fs::path& file) {
  std::istringstream in(read_file(file));
  std::vector<std::vector<std::string>> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> cells;
    std::istringstream cell_in(line);
    std::string cell;
    while (std::getline(cell_in, cell, ',')) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

struct Compared {
  int gemms = 0;                ///< matched GEMM tasks (tasks.csv kind "gemm ...")
  int named_gemms = 0;          ///< of those, named by their group ("gemm fwd g2")
  int measured_only_gemms = 0;  ///< measured compute tasks without a predicted one
  double median_abs_gemm_error = 0;
  double worst_abs_gemm_error = 0;
};

// tasks.csv: ...,kind(7),...,error(13); unmatched.csv: side(0),...,track(5),...
Compared compare(const fs::path& dir) {
  Compared c;
  std::vector<double> errors;
  for (const auto& row : csv_rows(dir / "tasks.csv"))
    if (row.size() == 14 && row[7].rfind("gemm", 0) == 0) {
      ++c.gemms;
      if (row[6].find(" g") != std::string::npos) ++c.named_gemms;
      errors.push_back(std::fabs(std::stod(row[13])));
    }
  for (const auto& row : csv_rows(dir / "unmatched.csv"))
    if (row.size() > 5 && row[0] == "measured" && row[5] == "compute") ++c.measured_only_gemms;
  if (!errors.empty()) {
    std::sort(errors.begin(), errors.end());
    const std::size_t n = errors.size();
    c.median_abs_gemm_error = n % 2 ? errors[n / 2] : (errors[n / 2 - 1] + errors[n / 2]) / 2;
    c.worst_abs_gemm_error = errors.back();
  }
  return c;
}

}  // namespace

TEST_CASE("the measured plan runs pair with the plans epsim writes, GEMM for GEMM") {
  const fs::path src = source_dir();
  const fs::path timelines = src / "models/measurements/timelines";
  if (!fs::exists(timelines)) {
    MESSAGE("no models/measurements/timelines: skipped");
    return;
  }
  const fs::path dir = scratch_dir("measured_timelines");
  // The FEPLB experiment of experiments/validate-feplb-ep8.yaml, its trace made as validate-hw.sh makes it.
  write_file(dir / "feplb.yaml", "kind: experiment\nname: validate-feplb-ep8\ntrace: trace.eptrace\n"
                                 "model: " + (src / "models/glm5-like-128.yaml").string() + "\n"
                                 "hardware: " + (src / "models/h100-sxm-8.yaml").string() + "\n"
                                 "ep_degree: 8\nplacement: contiguous\nbalancer:\n  name: feplb\n"
                                 "output: out\nseed: 1\nbackward: true\ntimeline_records: 1\n");
  REQUIRE(run_epsim("trace generate --ranks 8 --experts 128 --top-k 8 --layers 2 --micro-batches 2 --steps 1 "
                    "--tokens-per-rank 4096 --dist lognormal --lognormal-sigma 0.6 --rank-skew 0.2 --drift 0.05 "
                    "--seed 1 -o trace.eptrace",
                    dir)
              .status == 0);
  REQUIRE(run_epsim("run feplb.yaml --write-plans -o plans-feplb -q", dir).status == 0);
  REQUIRE(run_epsim("run " + (src / "experiments/default.yaml").string() + " --write-plans -o plans-default -q", dir)
              .status == 0);

  struct Case {
    const char* timeline;
    const char* plans;
    const char* hardware;
    int gemms;  // the runner's log: FEPLB plan GPU 0 runs 9, 6, 9, 6 GEMMs; static EP 3 in each of 16 plans
  };
  const Case cases[] = {
      {"h100-sxm-feplb-ep8-loop", "plans-feplb", "h100-sxm-8", 30},
      {"h100-sxm-feplb-ep8-grouped", "plans-feplb", "h100-sxm-8", 30},
      {"h200-feplb-ep8-loop", "plans-feplb", "h200", 30},
      {"h100-sxm-default-loop", "plans-default", "h100-sxm-8", 48},
      {"h100-sxm-default-grouped", "plans-default", "h100-sxm-8", 48},
      {"h200-default-loop", "plans-default", "h200", 48},
      // Three runs each on another H200 two days later (timelines/README.md): the same plans pair the same.
      {"h200-feplb-ep8-loop-20261129-1", "plans-feplb", "h200", 30},
      {"h200-feplb-ep8-loop-20261129-2", "plans-feplb", "h200", 30},
      {"h200-feplb-ep8-loop-20261129-3", "plans-feplb", "h200", 30},
      {"h200-default-loop-20261129-1", "plans-default", "h200", 48},
      {"h200-default-loop-20261129-2", "plans-default", "h200", 48},
      {"h200-default-loop-20261129-3", "plans-default", "h200", 48},
  };
  for (const Case& c : cases) {
    const std::string timeline = c.timeline;  // a std::string, so that the capture prints the name
    CAPTURE(timeline);
    const std::string out = std::string("v-") + c.timeline;
    const CliResult r = run_epsim(std::string("validate --plans ") + c.plans + "/plans.jsonl --measured " +
                                      (timelines / (std::string(c.timeline) + ".json")).string() + " --hardware " +
                                      (src / "models" / (std::string(c.hardware) + ".yaml")).string() +
                                      " --model " + (src / "models/glm5-like-128.yaml").string() +
                                      " --backward -q -o " + out,
                                  dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const Compared got = compare(dir / out);
    CHECK(got.gemms == c.gemms);
    CHECK(got.named_gemms == c.gemms);
    CHECK(got.measured_only_gemms == 0);
    // The worst is a weight-gradient GEMM the simulator puts 28% over the first H200 run; the later runs'
    // GEMMs took 2 to 3% less in total (run-to-run scatter, docs/hw-backend.md), which puts it at 30.6%.
    if (std::string(c.timeline).find("-loop") != std::string::npos) CHECK(got.worst_abs_gemm_error <= 0.35);
    // Static EP with the loop GEMMs that epsim-hw suite calibrates on: GEMM time alone.
    if (std::string(c.timeline).find("default-loop") != std::string::npos) CHECK(got.median_abs_gemm_error <= 0.10);
  }
}

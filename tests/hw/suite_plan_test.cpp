// What `epsim-hw suite` runs (hw/host/suite_plan.hpp): the multi-GPU parts only with 2 or more GPUs,
// FP8 GEMMs only where they can run, a reduced grid with --quick, the suite's options passed on.
#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "hw/host/hw_commands.hpp"
#include "hw/host/suite_plan.hpp"

using namespace epsim::hw;

namespace {

HwArgs suite_args(std::vector<std::string> extra) {
  std::vector<std::string> argv{"suite", "-o", "set.yaml"};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return parse_invocation(argv, "v").args;
}

std::vector<std::string> benches(const SuitePlan& p) {
  std::vector<std::string> out;
  for (const auto& s : p.steps) out.push_back(s.bench);
  return out;
}

/// GEMM points a plan's gemm steps measure: experts x tokens per step (the bench's default tokens: 28).
std::size_t gemm_points(const SuitePlan& p) {
  std::size_t n = 0;
  for (const auto& s : p.steps)
    if (s.bench == "gemm") n += s.args.integers("experts", {}, 1, 4096).size() *
                                s.args.integers("tokens", std::vector<std::int64_t>(28, 1), 1, 1 << 20).size();
  return n;
}

}  // namespace

TEST_CASE("suite on one GPU: GEMMs, copies and contention, the NCCL parts skipped and said so") {
  const SuitePlan p = suite_plan(suite_args({}), 1, true);
  CHECK(benches(p) == std::vector<std::string>{"gemm", "gemm", "gemm", "gemm", "copy", "contention"});
  REQUIRE(p.skipped.size() == 1);
  CHECK(p.skipped[0].find("2 or more GPUs") != std::string::npos);
  // BF16 then FP8, DeepSeek-V3's and Qwen3's expert shapes; only the FP8 steps may be skipped.
  CHECK(p.steps[0].args.text("dtype", "") == "bf16");
  CHECK(p.steps[0].args.text("hidden", "") == "7168");
  CHECK(p.steps[1].args.text("hidden", "") == "4096");
  CHECK_FALSE(p.steps[0].optional);
  CHECK(p.steps[2].args.text("dtype", "") == "fp8");
  CHECK(p.steps[2].optional);
  CHECK(gemm_points(p) == 2 * (3 * 28 + 2 * 28));
  CHECK(p.steps[4].args.text("kinds", "") == "ce_local,h2d,d2h,sm_copy");  // no peer copies on one GPU
  // The GEMM rows are the faster implementation at each point, beside the copies too.
  for (const auto& s : p.steps)
    if (s.bench == "gemm" || s.bench == "contention") CHECK(s.args.text("impl", "") == "best");
}

TEST_CASE("suite on 8 GPUs adds the all-to-all and ep_comm sweeps on all of them") {
  const SuitePlan p = suite_plan(suite_args({"--nccl-timeout-s", "30", "--no-verify", "--device", "2"}), 8, false);
  CHECK(benches(p) == std::vector<std::string>{"gemm", "gemm", "copy", "contention", "alltoall", "ep_comm"});
  REQUIRE(p.skipped.size() == 1);
  CHECK(p.skipped[0].find("FP8") != std::string::npos);
  CHECK(p.steps[2].args.text("kinds", "") == "ce_local,ce_peer,h2d,d2h,sm_copy");
  for (const auto& s : p.steps) {
    CAPTURE(s.bench);
    const bool multi = s.bench == "alltoall" || s.bench == "ep_comm";
    if (multi) {
      CHECK(s.args.integer("gpus", 0, 1, 8) == 8);
      CHECK(s.args.text("nccl-timeout-s", "") == "30");
    } else {
      CHECK(s.args.integer("device", 0, 0, 7) == 2);
    }
    if (s.bench != "gemm") CHECK(s.args.flags.count("no-verify") == 1);
  }
}

TEST_CASE("suite --quick: one GEMM shape, fewer points, fewer repetitions and sizes") {
  const SuitePlan full = suite_plan(suite_args({}), 2, true);
  const SuitePlan quick = suite_plan(suite_args({"--quick"}), 2, true);
  CHECK(benches(quick) == std::vector<std::string>{"gemm", "gemm", "copy", "contention", "alltoall", "ep_comm"});
  CHECK(gemm_points(quick) == 2 * 8);
  CHECK(gemm_points(full) == 2 * (3 * 28 + 2 * 28));
  for (const auto& s : quick.steps) {
    CAPTURE(s.bench);
    CHECK(s.args.integer("reps", 100, 1, 1000) <= 10);
  }
  CHECK(quick.steps[2].args.text("sizes", "") == "64K,1M,16M,256M");
  CHECK(quick.steps[5].args.integers("tokens", {}, 1, 1 << 20) == std::vector<std::int64_t>{512, 4096});
}

TEST_CASE("suite --shapes adds the model's own expert shapes to both GEMM dtypes, with 1, 8 and 32 experts") {
  const SuitePlan p = suite_plan(suite_args({"--shapes", "6144x2048,5120x1536"}), 1, true);
  // The two built-in shapes and the two given, each in BF16 and FP8.
  CHECK(benches(p) == std::vector<std::string>{"gemm", "gemm", "gemm", "gemm", "gemm", "gemm", "gemm", "gemm",
                                               "copy", "contention"});
  CHECK(p.steps[2].args.text("hidden", "") == "6144");
  CHECK(p.steps[2].args.text("ffn", "") == "2048");
  CHECK(p.steps[2].args.text("experts", "") == "1,8,32");
  CHECK(p.steps[3].args.text("hidden", "") == "5120");
  CHECK(p.steps[6].args.text("dtype", "") == "fp8");
  CHECK(p.steps[6].args.text("hidden", "") == "6144");
  CHECK(gemm_points(p) == 2 * (3 * 28 + 2 * 28 + 3 * 28 + 3 * 28));
  const SuitePlan quick = suite_plan(suite_args({"--quick", "--shapes", "6144x2048"}), 1, true);
  CHECK(quick.steps[1].args.text("experts", "") == "8");

  CHECK(parse_expert_shapes("").empty());
  CHECK(parse_expert_shapes("6144x2048") == std::vector<std::pair<int, int>>{{6144, 2048}});
  for (const char* bad : {"6144", "6144x", "x2048", "6144x2050", "0x2048", "61a4x2048", "6144x2048,"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_expert_shapes(bad), std::invalid_argument);
  }
}

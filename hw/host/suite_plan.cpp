#include "hw/host/suite_plan.hpp"

#include <stdexcept>

#include "hw/host/hw_commands.hpp"

namespace epsim::hw {

namespace {

const HwCommand& bench_command(const std::string& bench) {
  for (const auto& c : hw_commands())
    if (c.name == "bench " + bench) return c;
  throw std::logic_error("no bench command '" + bench + "'");
}

SuiteStep step(const std::string& bench, const std::string& what, std::vector<std::string> words, bool optional = false) {
  const HwCommand& c = bench_command(bench);
  words.insert(words.begin(), c.name);
  SuiteStep s;
  s.bench = bench;
  s.what = what;
  s.args = parse_hw_args(words, c.options, c.switches);
  s.optional = optional;
  return s;
}

}  // namespace

std::vector<std::pair<int, int>> parse_expert_shapes(const std::string& text) {
  std::vector<std::pair<int, int>> out;
  if (text.empty()) return out;
  for (std::size_t begin = 0;;) {  // every item, an empty one too ("a,,b", "a,")
    const std::size_t end = std::min(text.find(',', begin), text.size());
    const std::string item = text.substr(begin, end - begin);
    const std::size_t x = item.find('x');
    auto number = [&](const std::string& digits) {
      if (digits.empty() || digits.size() > 7 || digits.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("--shapes: '" + item + "' is not HIDDENxFFN (for example 6144x2048)");
      return std::stoi(digits);
    };
    if (x == std::string::npos)
      throw std::invalid_argument("--shapes: '" + item + "' is not HIDDENxFFN (for example 6144x2048)");
    const int hidden = number(item.substr(0, x));
    const int ffn = number(item.substr(x + 1));
    // FP8 GEMMs (cuBLASLt) need both multiples of 16; the suite measures BF16 and FP8 alike.
    if (hidden == 0 || ffn == 0 || hidden % 16 != 0 || ffn % 16 != 0)
      throw std::invalid_argument("--shapes: '" + item + "': hidden and ffn must be positive multiples of 16");
    out.emplace_back(hidden, ffn);
    if (end == text.size()) return out;
    begin = end + 1;
  }
}

SuitePlan suite_plan(const HwArgs& suite, int gpus, bool fp8) {
  const bool quick = suite.flags.count("quick") > 0;
  std::vector<std::string> single{"--device", suite.text("device", "0")};
  std::vector<std::string> multi{"--gpus", std::to_string(gpus)};
  if (suite.has("nccl-timeout-s")) multi.insert(multi.end(), {"--nccl-timeout-s", suite.text("nccl-timeout-s", "")});
  std::vector<std::string> verify_single = single, verify_multi = multi;
  if (suite.flags.count("no-verify")) {
    verify_single.push_back("--no-verify");
    verify_multi.push_back("--no-verify");
  }
  auto with = [](std::vector<std::string> base, const std::vector<std::string>& more) {
    base.insert(base.end(), more.begin(), more.end());
    return base;
  };

  SuitePlan plan;
  // GEMMs: DeepSeek-V3's expert (hidden 7168, FFN 2048) and Qwen3-235B-A22B's (hidden 4096, FFN 1536),
  // gated (3 matrices), rows per expert from 1 to 8192 (the bench's default list) or a quick subset.
  // --impl best: the rows are the faster of cuBLAS's grouped call and a per-expert loop at each point.
  // On an H200 with cuBLAS 13.0 the grouped call reached about 300 TFLOP/s where the loop reached 700 to
  // 790 (models/measurements/epsim-suite-h200.yaml), so a suite that kept one would calibrate a GPU
  // slower than the one the user trains on. FP8 (a cuBLASLt loop) ignores it.
  // --shapes adds the user's own expert shapes (their model's), with 1, 8 and 32 experts (8 with
  // --quick): calibration fits one efficiency curve over every shape measured, so the model's own shape
  // should be among them.
  struct Shape {
    std::string hidden;
    std::string ffn;
    std::string experts;
  };
  // (Pushed one by one: GCC 12 took a string of the braced lists this was built from in a conditional
  // for "maybe uninitialized", a false warning of its inlining.)
  std::vector<Shape> shapes;
  if (quick) {
    shapes.push_back({"7168", "2048", "8"});
  } else {
    shapes.push_back({"7168", "2048", "1,8,32"});
    shapes.push_back({"4096", "1536", "8,32"});
  }
  for (const auto& [hidden, ffn] : parse_expert_shapes(suite.text("shapes", "")))
    shapes.push_back({std::to_string(hidden), std::to_string(ffn), quick ? "8" : "1,8,32"});
  const std::vector<std::string> gemm_grid =
      quick ? std::vector<std::string>{"--tokens", "16,64,128,256,512,1024,2048,4096", "--warmup", "2", "--reps", "10"}
            : std::vector<std::string>{"--reps", "30"};
  for (const char* dtype : {"bf16", "fp8"}) {
    if (std::string(dtype) == "fp8" && !fp8) continue;
    for (const auto& s : shapes)
      plan.steps.push_back(step("gemm",
                                std::string(dtype) + " grouped GEMM, hidden " + s.hidden + ", ffn " + s.ffn +
                                    ", experts " + s.experts,
                                with(single, with({"--hidden", s.hidden, "--ffn", s.ffn, "--matrices", "3", "--experts",
                                                   s.experts, "--dtype", dtype, "--impl", "best"},
                                                  gemm_grid)),
                                std::string(dtype) == "fp8"));
  }
  if (!fp8) plan.skipped.push_back("FP8 grouped GEMMs: the device's compute capability is below 8.9");

  // ce_peer copies to another GPU: only when the suite may use more than one.
  const std::string kinds = gpus >= 2 ? "ce_local,ce_peer,h2d,d2h,sm_copy" : "ce_local,h2d,d2h,sm_copy";
  plan.steps.push_back(step("copy", "copies: " + kinds,
                            with(with(verify_single, {"--kinds", kinds}),
                                 quick ? std::vector<std::string>{"--sizes", "64K,1M,16M,256M", "--reps", "10", "--trials",
                                                                  "2", "--sm-blocks", "2"}
                                       : std::vector<std::string>{})));
  plan.steps.push_back(
      step("contention", "GEMM beside a copy loop within the GPU",
           with(verify_single, with({"--hidden", "7168", "--ffn", "2048", "--matrices", "3", "--experts", "8",
                                     "--impl", "best"},
                                    quick ? std::vector<std::string>{"--tokens", "64,1024", "--reps", "10"}
                                          : std::vector<std::string>{"--tokens", "16,64,256,1024,4096"}))));
  if (gpus >= 2) {
    plan.steps.push_back(step("alltoall", "NCCL all-to-all, " + std::to_string(gpus) + " GPUs",
                              with(verify_multi, quick ? std::vector<std::string>{"--sizes", "64K,1M,16M", "--reps", "10"}
                                                       : std::vector<std::string>{})));
    plan.steps.push_back(step("ep_comm", "EP dispatch/combine as NCCL all-to-all-v, " + std::to_string(gpus) + " GPUs",
                              with(verify_multi, quick ? std::vector<std::string>{"--tokens", "512,4096", "--reps", "10"}
                                                       : std::vector<std::string>{})));
  } else {
    plan.skipped.push_back("the NCCL all-to-all and ep_comm sweeps and ce_peer copies: they need 2 or more GPUs (" +
                           std::to_string(gpus) + " used)");
  }
  return plan;
}

}  // namespace epsim::hw

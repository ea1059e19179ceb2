// What `epsim-hw suite` runs: the benchmarks, each with the arguments its own `epsim-hw bench` command
// would take, for the full grid or --quick, on one GPU or several. CPU-only (tested without a GPU):
// every step's arguments are parsed with its bench command's own options, so the suite can only ask
// for what the benchmarks accept.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "hw/host/hw_args.hpp"

namespace epsim::hw {

struct SuiteStep {
  std::string bench;    ///< "gemm", "copy", "contention", "alltoall", "ep_comm"
  std::string what;     ///< one line for the progress output
  HwArgs args;          ///< as `epsim-hw bench BENCH ...` would have parsed them (no -o)
  bool optional = false;  ///< FP8 GEMMs: a device or cuBLASLt that cannot run them skips the step
};

struct SuitePlan {
  std::vector<SuiteStep> steps;
  std::vector<std::string> skipped;  ///< what is left out and why (printed on stderr)
};

/// The steps for the suite's own arguments `suite` (--quick, --shapes, --device, --nccl-timeout-s,
/// --no-verify), `gpus` GPUs for the multi-GPU parts (fewer than 2: those parts are skipped) and whether
/// FP8 GEMMs can run (compute capability >= 8.9). Throws std::invalid_argument for a bad --shapes.
SuitePlan suite_plan(const HwArgs& suite, int gpus, bool fp8);

/// --shapes "6144x2048,5120x1536": (hidden, ffn) pairs, each a positive multiple of 16 (FP8 GEMMs need
/// it); "" gives none. Throws std::invalid_argument naming the item.
std::vector<std::pair<int, int>> parse_expert_shapes(const std::string& text);

}  // namespace epsim::hw

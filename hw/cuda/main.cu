// epsim-hw: microbenchmarks that write `kind: measurements` files for `epsim calibrate`, and the
// single-GPU plan runner. See docs/hw-backend.md.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <string>
#include <vector>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "sim/core/input_error.hpp"
#include "sim/core/signal_cleanup.hpp"

namespace {

const char* kUsage =
    "usage:\n"
    "  epsim-hw bench gemm       [--device D] [--hidden 6144] [--ffn 2048] [--matrices 3] [--experts 1,2,4,8,16,32]\n"
    "                            [--tokens LIST] [--impl grouped|loop] [--warmup 5] [--reps 50] [--force] -o FILE.yaml\n"
    "  epsim-hw bench copy       [--device D] [--sizes 4K,...,1G] [--reps 20] [--trials 5] [--sm-blocks 1,2,4]\n"
    "                            [--kinds ce_local,ce_peer,h2d,d2h,sm_copy] [--no-verify] [--force] -o FILE.yaml\n"
    "  epsim-hw bench contention [--device D] [--hidden ..] [--ffn ..] [--matrices ..] [--experts 8]\n"
    "                            [--tokens 16,64,256,1024,4096] [--copy-bytes 256M] [--reps 30] [--no-verify]\n"
    "                            [--force] -o FILE.yaml\n"
    "  epsim-hw bench alltoall   [--gpus N] [--sizes 4K,...,64M] [--warmup 5] [--reps 30] [--nccl-timeout-s 120]\n"
    "                            [--no-verify] [--force] -o FILE.yaml\n"
    "  epsim-hw run PLANS.jsonl --gpu G [--device D] [--record N] [--warmup 1] [--hidden ..] [--ffn ..]\n"
    "                            [--matrices ..] [--impl grouped|loop] [--no-verify] [--force] -o measured_timeline.json\n"
    "Exit status: 0 ok, 1 a failed CUDA/cuBLAS/NCCL call, a collective past --nccl-timeout-s or a checksum\n"
    "mismatch, 2 bad arguments or input.\n";

}  // namespace

int main(int argc, char** argv) {
  using namespace epsim::hw;
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "-h" || args[0] == "--help") {
    std::fputs(kUsage, args.empty() ? stderr : stdout);
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("%s\n", kToolVersion);
    return 0;
  }
  try {
    const std::set<std::string> common = {"o", "device", "hidden", "ffn", "matrices", "experts", "tokens", "impl",
                                          "warmup", "reps", "trials", "sizes", "sm-blocks", "kinds", "copy-bytes",
                                          "gpus", "gpu", "record", "nccl-timeout-s"};
    const HwArgs a = parse_hw_args(args, common, {"no-verify", "force"});
    // Ctrl-C or a kill removes the half-written output; refusing an existing one happens now, not after
    // minutes on the GPU (the writer checks again when it renames the finished file into place).
    epsim::SignalCleanup::install();
    if (a.has("o") && !a.flags.count("force") && std::filesystem::exists(a.text("o", "")))
      throw epsim::InputError(a.text("o", ""), "", "the output file already exists; pass --force to replace it or "
                                                   "choose another output");
    if (a.command == "bench") {
      if (a.positional.size() != 1) throw std::invalid_argument("bench needs one kind: gemm, copy, contention, alltoall");
      if (!a.has("o")) throw std::invalid_argument("missing -o FILE.yaml");
      const std::string& kind = a.positional[0];
      if (kind == "gemm") return bench_gemm(a);
      if (kind == "copy") return bench_copy(a);
      if (kind == "contention") return bench_contention(a);
      if (kind == "alltoall") return bench_alltoall(a);
      throw std::invalid_argument("unknown bench '" + kind + "' (gemm, copy, contention, alltoall)");
    }
    if (a.command == "run") {
      if (a.positional.size() != 1) throw std::invalid_argument("run needs one PLANS.jsonl");
      if (!a.has("o")) throw std::invalid_argument("missing -o measured_timeline.json");
      if (!a.has("gpu")) throw std::invalid_argument("missing --gpu G (the plan GPU to run)");
      return run_plans(a);
    }
    throw std::invalid_argument("unknown command '" + a.command + "' (bench, run)");
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "epsim-hw: %s\n%s", e.what(), kUsage);
    return 2;
  } catch (const epsim::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epsim-hw: error: %s\n", e.what());
    return 1;
  }
}

// epsim-hw: microbenchmarks that write `kind: measurements` files for `epsim calibrate`, the suite that
// runs them all into one file, and the single-GPU plan runner. See docs/hw-backend.md. The commands,
// their options and help texts are in hw/host/hw_commands.hpp.
#include <cstdio>
#include <exception>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/host/hw_commands.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/signal_cleanup.hpp"

int main(int argc, char** argv) {
  using namespace epsim::hw;
  const std::vector<std::string> args(argv + 1, argv + argc);
  HwInvocation inv;
  try {
    inv = parse_invocation(args, kToolVersion);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  if (inv.action != HwInvocation::Action::run) {
    std::fputs(inv.text.c_str(), stdout);
    return 0;
  }
  const HwArgs& a = inv.args;
  const std::string& name = inv.command->name;
  try {
    // Ctrl-C or a kill removes the half-written output; refusing an existing one happens now, not after
    // minutes on the GPU (the writer checks again when it renames the finished file into place).
    epsim::SignalCleanup::install();
    if (!a.flags.count("force") && std::filesystem::exists(a.text("o", "")))
      throw epsim::InputError(a.text("o", ""), "", "the output file already exists; pass --force to replace it or "
                                                   "choose another output");
    const int device = static_cast<int>(a.integer("device", 0, 0, 1023));
    if (name == "suite") return run_suite(a);
    if (name == "run") return run_plans(a);
    if (name == "bench gemm") return bench_command(a, "gemm", device, measure_gemm);
    if (name == "bench copy") return bench_command(a, "copy", device, measure_copy);
    if (name == "bench contention") return bench_command(a, "contention", device, measure_contention);
    if (name == "bench alltoall") return bench_command(a, "alltoall", 0, measure_alltoall);
    if (name == "bench ep_comm") return bench_command(a, "ep_comm", 0, measure_ep_comm);
    throw std::logic_error("no handler for '" + name + "'");
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "epsim-hw %s: %s (epsim-hw %s --help)\n", name.c_str(), e.what(), name.c_str());
    return 2;
  } catch (const epsim::InputError& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epsim-hw: error: %s\n", e.what());
    return 1;
  }
}

// The epsim-hw subcommands. Each returns the process exit status.
#pragma once

#include "hw/host/hw_args.hpp"

namespace epsim::hw {

int bench_gemm(const HwArgs& args);
int bench_copy(const HwArgs& args);
int bench_contention(const HwArgs& args);
int bench_alltoall(const HwArgs& args);
int run_plans(const HwArgs& args);

}  // namespace epsim::hw

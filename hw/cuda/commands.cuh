// The epsim-hw commands. Each benchmark is a measure_* function that runs it with the options of its
// `epsim-hw bench KIND` command and appends its points to `m` and its observations (written as `#`
// comments) to `comments`; `bench KIND` writes one benchmark's file, `suite` runs them all into one.
#pragma once

#include <string>
#include <vector>

#include "hw/calibration/measurements.hpp"
#include "hw/host/hw_args.hpp"

namespace epsim::hw {

#if defined(EPSIM_HAVE_NCCL)
constexpr bool kHaveNccl = true;
#else
constexpr bool kHaveNccl = false;
#endif

using MeasureFn = void (*)(const HwArgs& args, Measurements& m, std::vector<std::string>& comments);

void measure_gemm(const HwArgs& args, Measurements& m, std::vector<std::string>& comments);
void measure_copy(const HwArgs& args, Measurements& m, std::vector<std::string>& comments);
void measure_contention(const HwArgs& args, Measurements& m, std::vector<std::string>& comments);
/// Needs NCCL and 2 or more GPUs (throws std::runtime_error otherwise).
void measure_alltoall(const HwArgs& args, Measurements& m, std::vector<std::string>& comments);
/// Needs NCCL and 2 or more GPUs (throws std::runtime_error otherwise).
void measure_ep_comm(const HwArgs& args, Measurements& m, std::vector<std::string>& comments);

/// `epsim-hw bench KIND`: runs `measure` and writes -o with the header of `device` (plus --hardware,
/// source "epsim-hw bench KIND" and the command line).
int bench_command(const HwArgs& args, const std::string& kind, int device, MeasureFn measure);
/// `epsim-hw suite`: every benchmark (hw/host/suite_plan.hpp) into one measurement file.
int run_suite(const HwArgs& args);
int run_plans(const HwArgs& args);

/// Points in `m` (all series), for progress lines.
std::size_t point_count(const Measurements& m);

}  // namespace epsim::hw

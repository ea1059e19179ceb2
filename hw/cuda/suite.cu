// epsim-hw suite: every benchmark epsim calibrate fits, run one after the other on 1 to 8 GPUs, into
// one measurement file (hw/host/suite_plan.hpp says which, with which grid). The file is written only
// when every step has run; a failed step ends the suite like its bench command would (exit 1, nothing
// written). Also the shared ending of every `bench KIND`: header, file, summary line.
#include <algorithm>
#include <cstdio>
#include <stdexcept>

#include "hw/cuda/commands.cuh"
#include "hw/cuda/common.cuh"
#include "hw/cuda/grouped_gemm.cuh"
#include "hw/host/measurement_writer.hpp"
#include "hw/host/suite_plan.hpp"

namespace epsim::hw {

namespace {

constexpr int kMaxSuiteGpus = 8;
constexpr const char* kNoNcclSuiteNote =
    "this epsim-hw was built without NCCL: the NCCL all-to-all and ep_comm sweeps are skipped";

MeasureFn measure_of(const std::string& bench) {
  if (bench == "gemm") return measure_gemm;
  if (bench == "copy") return measure_copy;
  if (bench == "contention") return measure_contention;
  if (bench == "alltoall") return measure_alltoall;
  if (bench == "ep_comm") return measure_ep_comm;
  throw std::logic_error("no benchmark '" + bench + "'");
}

MeasurementHeader header_for(const HwArgs& a, int device, const std::string& source) {
  MeasurementHeader h = describe_device(device);
  h.hardware = a.text("hardware", "");
  h.source = source;
  return h;
}

void write_set(const HwArgs& a, const Measurements& m, const std::vector<std::string>& comments) {
  const std::string out = a.text("o", "");
  write_measurements_file(out, m, comments, a.flags.count("force") > 0, a.command_line);
  std::printf("wrote %s (%zu points)\n", out.c_str(), point_count(m));
}

}  // namespace

std::size_t point_count(const Measurements& m) {
  return m.grouped_gemm.size() + m.copy.size() + m.gemm_with_copy.size() + m.all_to_all.size() + m.gemm.size() +
         m.ep_comm.size();
}

int bench_command(const HwArgs& a, const std::string& kind, int device, MeasureFn measure) {
  Measurements m;
  std::vector<std::string> comments;
  measure(a, m, comments);
  m.header = header_for(a, device, "epsim-hw bench " + kind);
  write_set(a, m, comments);
  return 0;
}

int run_suite(const HwArgs& a) {
  const int device = static_cast<int>(a.integer("device", 0, 0, 1023));
  const std::int64_t gpus_wanted = a.integer("gpus", 0, 1, kMaxSuiteGpus);  // 0: all visible, at most 8
  a.number("nccl-timeout-s", 120, 1e-3, 86400.0);  // checked now, used by the NCCL steps
  parse_expert_shapes(a.text("shapes", ""));        // likewise: a bad shape is refused before the GPU
  int count = 0;
  CUDA_CHECK(cudaGetDeviceCount(&count));
  if (device >= count)
    throw std::runtime_error("--device " + std::to_string(device) + ": only " + std::to_string(count) + " GPUs visible");
  if (gpus_wanted > count)
    throw std::runtime_error("--gpus " + std::to_string(gpus_wanted) + ": only " + std::to_string(count) +
                             " GPUs visible");
  int gpus = gpus_wanted > 0 ? static_cast<int>(gpus_wanted) : std::min(count, kMaxSuiteGpus);
  if (gpus >= 2 && !kHaveNccl) {
    std::fprintf(stderr, "epsim-hw suite: %s\n", kNoNcclSuiteNote);
    gpus = 1;
  }
  SuitePlan plan = suite_plan(a, gpus, fp8_gemm_capable(device));
  for (const auto& line : plan.skipped) std::fprintf(stderr, "epsim-hw suite: skipped: %s\n", line.c_str());

  Measurements m;
  std::vector<std::string> comments = {"epsim-hw suite" + std::string(a.flags.count("quick") ? " --quick" : "") +
                                       ": " + std::to_string(gpus) + " GPU(s) for the multi-GPU parts, device " +
                                       std::to_string(device) + " for the others"};
  for (const auto& line : plan.skipped) comments.push_back("skipped: " + line);
  for (std::size_t i = 0; i < plan.steps.size(); ++i) {
    const SuiteStep& step = plan.steps[i];
    std::printf("== suite step %zu of %zu: %s\n", i + 1, plan.steps.size(), step.what.c_str());
    std::fflush(stdout);
    const std::size_t before = point_count(m), gemm_before = m.grouped_gemm.size();
    try {
      measure_of(step.bench)(step.args, m, comments);
    } catch (const Fp8Unavailable& e) {
      if (!step.optional) throw;
      m.grouped_gemm.resize(gemm_before);  // no partial FP8 sweep
      std::fprintf(stderr, "epsim-hw suite: skipped: %s: %s\n", step.what.c_str(), e.what());
      comments.push_back("skipped: " + step.what + ": " + e.what());
      continue;
    }
    std::printf("== %s: %zu points\n", step.what.c_str(), point_count(m) - before);
  }
  m.header = header_for(a, device, "epsim-hw suite");
  CUDA_CHECK(cudaSetDevice(device));
  write_set(a, m, comments);
  std::printf("next: epsim calibrate %s --base models/h100-sxm-8.yaml -o models/my-cluster.yaml\n",
              a.text("o", "").c_str());
  return 0;
}

}  // namespace epsim::hw

// The hw runner's plan loader (hw/host/plan_tasks.*: load_gpu_tasks, which reads each plan and keeps
// GPU 0's tasks), followed by what `epsim-hw run` processes on the other GPUs do with every plan: the
// task lists of each of its GPUs (the first 64).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hw/host/plan_tasks.hpp"
#include "sim/validate/plans_file.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "plans.jsonl");
  epsim::fuzz::expect_only_input_errors([&] {
    epsim::hw::load_gpu_tasks(path, 0, 0, 64, 2);
    epsim::for_each_plan(path, 0, [](epsim::Plan&& plan, std::uint64_t, std::uint64_t) {
      for (int gpu = 1; gpu < std::min(plan.num_gpus, 64); ++gpu) epsim::hw::extract_gpu_tasks(plan, gpu, 64, 2);
    });
  });
  return 0;
}

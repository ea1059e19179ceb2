// The hw runner's plan loader (hw/host/plan_tasks.*: load_plans_jsonl), followed by what `epsim-hw run`
// does with every plan it loaded: the per-GPU task lists of each of its GPUs (the first 64).
#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "hw/host/plan_tasks.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "plans.jsonl");
  epsim::fuzz::expect_only_input_errors([&] {
    for (const epsim::Plan& plan : epsim::hw::load_plans_jsonl(path)) {
      for (int gpu = 0; gpu < std::min(plan.num_gpus, 64); ++gpu)
        epsim::hw::extract_gpu_tasks(plan, gpu, 64, 2);
    }
  });
  return 0;
}

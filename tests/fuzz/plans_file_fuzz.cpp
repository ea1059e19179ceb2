// The plans.jsonl reader of `epsim validate` (sim/validate/plans_file.*: read_plans_jsonl).
#include <cstddef>
#include <cstdint>

#include "sim/plan/plan.hpp"
#include "sim/validate/plans_file.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "plans.jsonl");
  epsim::fuzz::expect_only_input_errors([&] {
    for (const epsim::Plan& plan : epsim::read_plans_jsonl(path)) {
      plan.tokens_per_instance();
      plan.tokens_per_gpu();
    }
  });
  return 0;
}

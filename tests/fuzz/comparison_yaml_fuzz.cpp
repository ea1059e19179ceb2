// The comparison YAML loader (sim/config/comparison_loader.*: load_comparison).
#include <cstddef>
#include <cstdint>

#include "sim/config/comparison_spec.hpp"
#include "tests/fuzz/config_tree.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::config_input_path("fuzz-input.yaml");
  epsim::fuzz::write_bytes(path, data, size);
  epsim::fuzz::expect_only_input_errors([&] { epsim::load_comparison(path); });
  return 0;
}

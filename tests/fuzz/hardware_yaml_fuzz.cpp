// The hardware YAML loader (sim/config/loaders.*: load_hardware).
#include <cstddef>
#include <cstdint>

#include "sim/config/loaders.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "hardware.yaml");
  epsim::fuzz::expect_only_input_errors([&] { epsim::load_hardware(path); });
  return 0;
}

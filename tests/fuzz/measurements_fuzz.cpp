// Measurement files of `epsim calibrate` (hw/calibration/measurements.*: load_measurements).
#include <cstddef>
#include <cstdint>

#include "hw/calibration/measurements.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "measurements.yaml");
  epsim::fuzz::expect_only_input_errors([&] { epsim::load_measurements(path); });
  return 0;
}

// The measured timeline of `epsim validate` (sim/validate/measured_timeline.*: read_measured_timeline).
// What it accepts must survive a round trip through measured_timeline_to_json unchanged.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/validate/measured_timeline.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "measured.json");
  epsim::fuzz::expect_only_input_errors([&] {
    const epsim::MeasuredTimeline timeline = epsim::read_measured_timeline(path);
    const nlohmann::json once = epsim::measured_timeline_to_json(timeline);
    const nlohmann::json twice = epsim::measured_timeline_to_json(epsim::measured_timeline_from_json(once, "again"));
    if (once != twice) epsim::fuzz::fail("measured timeline round trip changed it");
  });
  return 0;
}

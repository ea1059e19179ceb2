// The measured timeline of `epsim validate` (sim/validate/measured_timeline.*: read_measured_timeline).
// What it accepts must survive a round trip through measured_timeline_to_json unchanged. It reads
// each record as the parser completes it; the document reader (measured_timeline_from_json of
// parse_json) must give the same timeline, or the same error, place and words.
#include <cstddef>
#include <cstdint>
#include <string>

#include "sim/core/json_input.hpp"
#include "sim/validate/measured_timeline.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

template <class Read>
std::string outcome(Read&& read) {
  try {
    return epsim::measured_timeline_to_json(read()).dump();
  } catch (const epsim::InputError& e) {
    return std::string("error: ") + e.what();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "measured.json");
  epsim::fuzz::expect_only_input_errors([&] {
    const epsim::MeasuredTimeline timeline = epsim::read_measured_timeline(path);
    const nlohmann::json once = epsim::measured_timeline_to_json(timeline);
    const nlohmann::json twice = epsim::measured_timeline_to_json(epsim::measured_timeline_from_json(once, "again"));
    if (once != twice) epsim::fuzz::fail("measured timeline round trip changed it");
  });
  const std::string text(reinterpret_cast<const char*>(data), size);
  const std::string streamed = outcome([&] { return epsim::read_measured_timeline(path); });
  const std::string whole =
      outcome([&] { return epsim::measured_timeline_from_json(epsim::parse_json(text, path), path); });
  if (streamed != whole) epsim::fuzz::fail("read as it streams by:\n" + streamed + "\nread from its text:\n" + whole);
  return 0;
}

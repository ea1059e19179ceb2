// The plans.jsonl reader of `epsim validate` and the hw runner (sim/validate/plans_file.*:
// read_plans_jsonl, which reads each line as it streams by: sim/plan/plan_json.*: read_plan_line).
// Besides taking only InputError from bad input, the streaming reader must give, line by line, what
// the document reader gives for the line's text (plan_from_json(parse_json(line))): the same plan, or
// the same error, place and words.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

#include "sim/core/json_input.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/plan_json.hpp"
#include "sim/validate/plans_file.hpp"
#include "tests/fuzz/fuzz_input.hpp"

namespace {

/// A plan's JSON or an error's message; "blank" for a line without one.
template <class Read>
std::string outcome(Read&& read) {
  try {
    const std::optional<epsim::Plan> plan = read();
    return plan ? epsim::plan_to_json(*plan).dump() : "blank";
  } catch (const epsim::InputError& e) {
    return std::string("error: ") + e.what();
  }
}

bool blank(const std::string& line) { return line.find_first_not_of(" \t\r") == std::string::npos; }

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string path = epsim::fuzz::input_file(data, size, "plans.jsonl");
  epsim::fuzz::expect_only_input_errors([&] {
    for (const epsim::Plan& plan : epsim::read_plans_jsonl(path)) {
      plan.tokens_per_instance();
      plan.tokens_per_gpu();
    }
  });
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::istringstream stream(text);
  std::istringstream lines(text);
  std::string line;
  for (std::uint64_t number = 1; std::getline(lines, line); ++number) {
    std::uint64_t bytes = 0;
    const std::string streamed = outcome([&] { return epsim::read_plan_line(stream, path, number, bytes); });
    const std::string whole = outcome([&]() -> std::optional<epsim::Plan> {
      if (blank(line)) return std::nullopt;
      return epsim::plan_from_json(epsim::parse_json(line, path, number), path, "line " + std::to_string(number));
    });
    if (streamed != whole)
      epsim::fuzz::fail("line " + std::to_string(number) + " read as it streams by:\n" + streamed +
                        "\nread from its text:\n" + whole);
    if (streamed.rfind("error: ", 0) == 0) break;  // the stream stopped inside the line
    if (bytes != line.size() + (lines.eof() ? 0 : 1))
      epsim::fuzz::fail("line " + std::to_string(number) + ": " + std::to_string(bytes) + " bytes read, " +
                        std::to_string(line.size()) + " in the line");
  }
  return 0;
}

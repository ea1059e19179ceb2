// One Plan as JSON (sim/plan/plan_json.*: plan_from_json). A plan the reader accepts must be safe to
// use (its token sums are what the engine and the hw runner compute first) and must survive a round
// trip through plan_to_json unchanged, and write_plan_json must write plan_to_json's text.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "sim/plan/plan_json.hpp"
#include "tests/fuzz/fuzz_input.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // JSON syntax is nlohmann's; the plans.jsonl target covers epsim's handling of syntax errors.
  const nlohmann::json json = nlohmann::json::parse(data, data + size, nullptr, false);
  if (json.is_discarded()) return -1;
  epsim::fuzz::expect_only_input_errors([&] {
    const epsim::Plan plan = epsim::plan_from_json(json, "fuzz.json", "");
    plan.tokens_per_instance();
    plan.tokens_per_gpu();
    const std::string once = epsim::plan_to_json(plan).dump();
    const std::string twice = epsim::plan_to_json(epsim::plan_from_json(epsim::plan_to_json(plan), "again", "")).dump();
    if (once != twice) epsim::fuzz::fail("plan JSON round trip changed the plan:\n" + once + "\n" + twice);
    // --write-plans writes the text straight, not through the document: the same bytes.
    std::ostringstream straight;
    epsim::write_plan_json(straight, plan);
    if (straight.str() != once) epsim::fuzz::fail("write_plan_json differs from plan_to_json:\n" + straight.str() + "\n" + once);
  });
  return 0;
}

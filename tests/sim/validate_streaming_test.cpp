// `epsim validate` keeps plans on disk: PlansIndex checks the whole file as read_plans_jsonl does,
// then reads back only the plan a measured record asks for; the report is the one made from plans in
// memory.
#include <doctest/doctest.h>

#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/plan/plan_json.hpp"
#include "sim/validate/plans_file.hpp"
#include "sim/validate/validation.hpp"
#include "tests/sim/validation_fixture.hpp"
#include "tests/test_paths.hpp"

using namespace epsim;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const InputError& e) {
    return e.what();
  }
  return "accepted";
}

std::string outputs_of(const ValidationReport& r) {
  std::ostringstream out;
  write_tasks_csv(out, r);
  write_layers_csv(out, r);
  write_unmatched_csv(out, r);
  write_summary_md(out, r, {"header"});
  return out.str();
}

}  // namespace

TEST_CASE("PlansIndex: each plan read back from its line, blank and CRLF lines included, none for other records") {
  const auto dir = test::scratch_dir("validate_index");
  const auto path = (dir / "plans.jsonl").string();
  std::vector<Plan> plans;
  for (std::uint32_t i = 0; i < 5; ++i) {
    Plan p = test::validation_plan();
    p.step = i / 2;
    p.micro_batch = i % 2;
    p.layer = 3;
    p.routes[0].tokens = 100 + static_cast<std::int64_t>(i);  // tells the plans apart
    plans.push_back(p);
  }
  {
    std::ofstream out(path, std::ios::binary);
    out << "\n" << plan_to_json(plans[0]).dump() << "\r\n" << plan_to_json(plans[1]).dump() << "\n  \n";
    for (std::size_t i = 2; i < plans.size(); ++i) out << plan_to_json(plans[i]).dump() << "\n";
  }
  PlansIndex index(path);
  CHECK(index.size() == 5);
  // Out of file order, and one asked for twice.
  for (const std::size_t i : {4u, 0u, 2u, 1u, 3u, 0u}) {
    const std::optional<Plan> p = index.find(plans[i].step, plans[i].micro_batch, 3);
    REQUIRE(p);
    CHECK(plan_to_json(*p) == plan_to_json(plans[i]));
  }
  CHECK_FALSE(index.find(0, 0, 2));
  CHECK_FALSE(index.find(9, 0, 3));
}

TEST_CASE("PlansIndex: a bad file is refused on opening with read_plans_jsonl's error") {
  const auto dir = test::scratch_dir("validate_index_bad");
  const auto path = (dir / "plans.jsonl").string();
  const std::string good = plan_to_json(test::validation_plan()).dump();
  for (const std::string& text : {good + "\n" + good + "\n", good + "\n{\"version\": \n", std::string("\n")}) {
    std::ofstream(path, std::ios::binary) << text;
    const std::string expected = error_of([&] { read_plans_jsonl(path); });
    CHECK(expected != "accepted");
    CHECK(error_of([&] { PlansIndex index(path); }) == expected);
  }
}

TEST_CASE("PlansIndex: a file changed after it was opened is an error, not another plan") {
  const auto dir = test::scratch_dir("validate_index_changed");
  const auto path = (dir / "plans.jsonl").string();
  Plan a = test::validation_plan(), b = test::validation_plan();
  b.micro_batch = 1;
  std::ofstream(path, std::ios::binary) << plan_to_json(a).dump() << "\n" << plan_to_json(b).dump() << "\n";
  PlansIndex index(path);
  // Same length, so line 2 now starts where it did but holds micro_batch 2.
  b.micro_batch = 2;
  std::ofstream(path, std::ios::binary) << plan_to_json(a).dump() << "\n" << plan_to_json(b).dump() << "\n";
  CHECK(error_of([&] { index.find(0, 1, 0); }) == path + ":line 2: the file changed while it was read");
}

TEST_CASE("PlansIndex: a file of one plan hands out the plan it checked once, then reads the file again") {
  const auto dir = test::scratch_dir("validate_index_one");
  const auto path = (dir / "plans.jsonl").string();
  Plan a = test::validation_plan();
  a.layer = 4;
  std::ofstream(path, std::ios::binary) << "\n" << plan_to_json(a).dump() << "\n";
  PlansIndex index(path);
  REQUIRE(index.size() == 1);
  CHECK_FALSE(index.find(0, 0, 3));
  // Changed after opening: the first find is the plan checked on opening, not read again.
  Plan other = a;
  other.layer = 5;
  std::ofstream(path, std::ios::binary) << "\n" << plan_to_json(other).dump() << "\n";
  const std::optional<Plan> first = index.find(0, 0, 4);
  REQUIRE(first);
  CHECK(plan_to_json(*first) == plan_to_json(a));
  // A second find reads the file, as with many plans, and sees the change.
  CHECK(error_of([&] { index.find(0, 0, 4); }) == path + ":line 2: the file changed while it was read");
}

TEST_CASE("validate_measurements from PlansIndex gives the report made from every plan in memory") {
  const auto fixtures = test::source_dir() / "tests/fixtures/validation";
  const std::string plans_path = (fixtures / "two-gpu.plans.jsonl").string();
  const MeasuredTimeline m = read_measured_timeline((fixtures / "two-gpu.measured.json").string());
  const HardwareSpec hw = load_hardware((fixtures / "h100-sxm-8-frozen.yaml").string());
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  const ValidationReport in_memory =
      validate_measurements(read_plans_jsonl(plans_path), m, hw, model, true, "plans", "measured");
  PlansIndex index(plans_path);
  const ValidationReport streamed = validate_measurements(
      [&](const RecordId& id) { return index.find(id.step, id.micro_batch, id.layer); }, m, hw, model, true, "plans",
      "measured");
  REQUIRE(in_memory.tasks.size() > 40);
  CHECK(outputs_of(streamed) == outputs_of(in_memory));

  // A measured record without a plan: the same error either way.
  MeasuredTimeline extra = m;
  extra.records.push_back(m.records.front());
  extra.records.back().step = 77;
  const std::string expected = error_of(
      [&] { validate_measurements(read_plans_jsonl(plans_path), extra, hw, model, true, "plans", "measured"); });
  CHECK(expected.find("measured:records[2]: no plan for step 77") == 0);
  CHECK(error_of([&] {
          validate_measurements([&](const RecordId& id) { return index.find(id.step, id.micro_batch, id.layer); },
                                extra, hw, model, true, "plans", "measured");
        }) == expected);
}

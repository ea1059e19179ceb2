#include <doctest/doctest.h>

#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "sim/balancers/cannot_serve.hpp"
#include "sim/balancers/registry.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/json_input.hpp"
#include "sim/plan/plan_json.hpp"
#include "tests/sim/simple_cluster.hpp"
#include "tests/test_paths.hpp"
#include "traces/synth/synthetic_trace.hpp"

using namespace epsim;

namespace {

/// A plan with every field set, by hand.
Plan every_field_plan() {
  Plan plan;
  plan.balancer = "hand";
  plan.step = 3;
  plan.micro_batch = 2;
  plan.layer = 1;
  plan.num_gpus = 2;
  plan.exchange_stages = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {0, 1, InstanceKind::dynamic_expert},
                    {1, 1, InstanceKind::replica}};
  plan.routes = {{0, 0, 5, Carrier::none, -1, 0}, {1, 1, 7, Carrier::copy_engine, 0, 1},
                 {1, 2, 9, Carrier::none, -1, -1}};
  plan.transfers = {{TransferKind::gradients, PassKind::backward, Carrier::copy_engine, TransferStart::after_dispatch,
                     1, 1, 0, 1234}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1, 2}}}};
  plan.planner = {PlannerSite::host_cpu, 3'000'000, PlannerStart::after_dispatch, 64};
  return plan;
}

/// The plan read_plan_line takes from `text`, the one line of a plans.jsonl, as line `line`.
std::optional<Plan> streamed(const std::string& text, std::uint64_t line = 7) {
  std::istringstream in(text);
  std::uint64_t bytes = 0;
  return read_plan_line(in, "p.jsonl", line, bytes);
}

/// What reading `text` gives, as text: the plan's JSON, or the error's message.
std::string outcome(const std::function<Plan()>& read) {
  try {
    return plan_to_json(read()).dump();
  } catch (const InputError& e) {
    return std::string("error: ") + e.what();
  }
}

/// The same outcome from both readers of a plan's line: the document's and the streaming one.
void check_readers_agree(const std::string& text) {
  CAPTURE(text);
  const std::string tree = outcome([&] { return plan_from_json(parse_json(text, "p.jsonl", 7), "p.jsonl", "line 7"); });
  const std::string stream = outcome([&] {
    std::optional<Plan> plan = streamed(text);
    REQUIRE(plan.has_value());
    return std::move(*plan);
  });
  CHECK(stream == tree);
}

}  // namespace

TEST_CASE("a Plan survives JSON both ways, every field") {
  const Plan plan = every_field_plan();
  const Plan back = plan_from_json(plan_to_json(plan), "test", "");
  CHECK(plan_to_json(back) == plan_to_json(plan));
  CHECK(back.routes[1].via_gpu == 0);
  CHECK(back.routes[1].stage == 1);
  CHECK(back.routes[2].stage == -1);
  CHECK(back.planner.start == PlannerStart::after_dispatch);
  CHECK(back.gemm_order[1][0].instances == std::vector<int>{1, 2});
}

TEST_CASE("transfer start and group marks survive JSON, plans without them read as before") {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {0, 1, InstanceKind::replica},
                    {1, 1, InstanceKind::static_expert}};
  plan.routes = {{0, 1, 4, Carrier::ep_backend, -1, 0}};
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::ep_backend, TransferStart::before_dispatch, 1,
                     0, 1, 100},
                    {TransferKind::weights, PassKind::forward, Carrier::ep_backend, TransferStart::prefetch, 1, 0, 1,
                     50}};
  GemmGroup marked{1, {1}};
  marked.on_arrival = true;
  marked.after_planner = true;
  plan.gemm_order = {{{0, {0}}}, {GemmGroup{1, {2}}, marked}};
  nlohmann::json j = plan_to_json(plan);
  CHECK(j["gemm_order"][1][0] == nlohmann::json::array({2}));
  CHECK(j["gemm_order"][1][1]["on_arrival"] == true);
  const Plan back = plan_from_json(j, "test", "");
  CHECK(back.transfers[0].start == TransferStart::before_dispatch);
  CHECK(back.transfers[1].start == TransferStart::prefetch);
  CHECK(back.gemm_order[1][1].on_arrival);
  CHECK(back.gemm_order[1][1].after_planner);
  CHECK_FALSE(back.gemm_order[1][0].on_arrival);

  j["transfers"][0].erase("start");
  CHECK(plan_from_json(j, "test", "").transfers[0].start == TransferStart::after_dispatch);
  j["gemm_order"][1][1]["on_arrival"] = 1;
  CHECK_THROWS_WITH_AS(plan_from_json(j, "plans.jsonl", "line 2"),
                       "plans.jsonl:line 2, gemm_order[1][1].on_arrival: expected true or false, found a number", InputError);
  j["gemm_order"][1][1]["on_arrival"] = true;
  j["gemm_order"][1][1]["instances"][0] = 9;
  CHECK_THROWS_WITH_AS(plan_from_json(j, "plans.jsonl", "line 2"),
                       doctest::Contains("gemm_order[1][1]"), InputError);
}

TEST_CASE("a plan of another version or with a bad field is refused with its place") {
  Plan plan;
  plan.num_gpus = 1;
  plan.gemm_order = {{}};
  nlohmann::json j = plan_to_json(plan);
  j["version"] = 99;
  CHECK_THROWS_WITH_AS(plan_from_json(j, "plans.jsonl", "line 1"),
                       "plans.jsonl:line 1, version: plan version 99 is not supported (expected 1)", InputError);
  j = plan_to_json(plan);
  j["planner"]["site"] = "moon";
  CHECK_THROWS_WITH_AS(plan_from_json(j, "plans.jsonl", "line 4"),
                       "plans.jsonl:line 4, planner.site: unknown value \"moon\" (expected none, host_cpu, gpu)",
                       InputError);
}

namespace {

/// Two GPUs, one instance each, one route 0 -> 1, one Copy Engine weight transfer: every list of a
/// plan holds an entry to break.
nlohmann::json two_gpu_json() {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 2;
  plan.instances = {{0, 0, InstanceKind::static_expert}, {1, 1, InstanceKind::dynamic_expert}};
  plan.routes = {{0, 1, 5, Carrier::ep_backend, -1, 0}};
  plan.transfers = {{TransferKind::weights, PassKind::forward, Carrier::copy_engine, TransferStart::after_dispatch, 1,
                     0, 1, 1000}};
  plan.gemm_order = {{{0, {0}}}, {{1, {1}}}};
  return plan_to_json(plan);
}

}  // namespace

TEST_CASE("a structurally impossible plan is refused by the reader, naming the key and what was expected") {
  struct Case {
    const char* pointer;  ///< JSON pointer of the value to replace
    nlohmann::json value;
    const char* expect;  ///< the whole message after "p.jsonl:line 7, "
  };
  const std::vector<Case> cases = {
      {"/routes/0/instance", 2, "routes[0].instance: value 2 outside [0, 2) (the plan's instances)"},
      {"/routes/0/instance", -1, "routes[0].instance: value -1 outside [0, 2147483647]"},
      {"/routes/0/src_rank", 2, "routes[0].src_rank: value 2 outside [0, 2) (num_gpus)"},
      {"/routes/0/tokens", -5, "routes[0].tokens: value -5 outside [0, 1099511627776]"},
      {"/routes/0/tokens", 2.5, "routes[0].tokens: expected an integer, found a fraction: 2.5"},
      {"/routes/0/via_gpu", -2, "routes[0].via_gpu: value -2 outside [-1, 2147483647]"},
      {"/routes/0/via_gpu", 2, "routes[0].via_gpu: value 2 outside [-1, 2) (-1 for none, or a GPU)"},
      {"/routes/0/stage", 1, "routes[0].stage: value 1 outside [-1, 1) (exchange_stages)"},
      {"/routes/0/carrier", "none", "routes[0].carrier: carrier 'none' for tokens that change GPU"},
      {"/instances/1/gpu", 2, "instances[1].gpu: value 2 outside [0, 2) (num_gpus)"},
      {"/instances/1/expert", 1e10, "instances[1].expert: value 10000000000 outside [0, 2147483647]"},
      {"/instances/1/expert", 65536, "instances[1].expert: value 65536 outside [0, 65536)"},
      {"/transfers/0/instance", 5, "transfers[0].instance: value 5 outside [0, 2) (the plan's instances)"},
      {"/transfers/0/dst_gpu", 3, "transfers[0].dst_gpu: value 3 outside [0, 2) (num_gpus)"},
      {"/transfers/0/bytes", -1, "transfers[0].bytes: value -1 outside [0, 1125899906842624]"},
      {"/num_gpus", 0, "num_gpus: value 0 outside [1, 65536]"},
      {"/num_gpus", 1e300, "num_gpus: value 1e+300 outside [1, 65536]"},
      {"/num_gpus", 3, "gemm_order: has 2 lists, expected one per GPU (3)"},
      {"/num_gpus", 2.5, "num_gpus: expected an integer, found a fraction: 2.5"},
      {"/exchange_stages", 0, "exchange_stages: value 0 outside [1, 1048576]"},
      {"/step", 4294967296.0, "step: value 4294967296 outside [0, 4294967295]"},
      {"/step", "3", "step: expected an integer, found the string \"3\""},
      {"/gemm_order/1/0/0", 0, "gemm_order[1][0][0]: instance 0 lives on GPU 0, not on GPU 1"},
      {"/gemm_order/1/0/0", 9, "gemm_order[1][0][0]: value 9 outside [0, 2) (the plan's instances)"},
      {"/gemm_order/1/0", nlohmann::json::array(), "gemm_order: instance 1 is in no GEMM group"},
      {"/gemm_order/0/0", nlohmann::json::array({0, 0}), "gemm_order[0][0][1]: instance 0 is in a second GEMM group"},
      {"/gemm_order/0", 7, "gemm_order[0]: expected an array, found a number"},
      {"/instances", nlohmann::json::object(), "instances: expected an array, found an object"},
      {"/planner/duration_ps", -1, "planner.duration_ps: value -1 outside [0, 3600000000000000]"},
      {"/planner/d2h_bytes", 1.5, "planner.d2h_bytes: expected an integer, found a fraction: 1.5"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.pointer);
    nlohmann::json j = two_gpu_json();
    REQUIRE_NOTHROW(plan_from_json(j, "p.jsonl", "line 7"));
    j[nlohmann::json::json_pointer(c.pointer)] = c.value;
    CHECK_THROWS_WITH_AS(plan_from_json(j, "p.jsonl", "line 7"), (std::string("p.jsonl:line 7, ") + c.expect).c_str(),
                         InputError);
    // Read as its line streams by, the plan meets the same check.
    CHECK_THROWS_WITH_AS(streamed(j.dump()), (std::string("p.jsonl:line 7, ") + c.expect).c_str(), InputError);
  }
  nlohmann::json j = two_gpu_json();
  j.erase("routes");
  CHECK_THROWS_WITH_AS(plan_from_json(j, "p.jsonl", "line 7"), "p.jsonl:line 7: missing key 'routes'", InputError);
  CHECK_THROWS_WITH_AS(plan_from_json(nlohmann::json::array(), "p.jsonl", "line 7"),
                       "p.jsonl:line 7: expected a plan (a JSON object)", InputError);
}

TEST_CASE("the balancers' check and the reader's are one: validate_plan names the same defect") {
  Plan plan;
  plan.balancer = "hand";
  plan.num_gpus = 1;
  plan.instances = {{0, 0, InstanceKind::static_expert}};
  plan.routes = {{0, 3, 5, Carrier::none, -1, 0}};
  plan.gemm_order = {{{0, {0}}}};
  CHECK_THROWS_WITH_AS(validate_plan(plan, 1),
                       "invalid plan from balancer 'hand' (step 0, micro-batch 0, layer 0): routes[0].instance: value "
                       "3 outside [0, 1) (the plan's instances)",
                       std::logic_error);
  plan.routes[0].instance = 0;
  CHECK_NOTHROW(validate_plan(plan, 1));
  // With the model known, the expert id is checked against its experts.
  plan.instances[0].expert = 1;
  CHECK_THROWS_WITH_AS(validate_plan(plan, 1), doctest::Contains("instances[0].expert: value 1 outside [0, 1)"),
                       std::logic_error);
}

namespace {

std::string written(const Plan& plan) {
  std::ostringstream out;
  write_plan_json(out, plan);
  return out.str();
}

}  // namespace

TEST_CASE("a plan written straight to text is plan_to_json's dump, byte for byte") {
  // By hand: every kind of group (plain, marked, marked backward_first, a GPU without groups), a
  // negative via and stage, a name to escape.
  Plan plan = every_field_plan();
  plan.balancer = "hand \"quoted\" \\ name";
  plan.step = 4'000'000'000u;
  plan.num_gpus = 3;
  plan.transfers.push_back({TransferKind::weights, PassKind::forward, Carrier::ep_backend, TransferStart::prefetch, 1,
                            0, 1, 9'000'000'000});
  GemmGroup marked{1, {1}};
  marked.on_arrival = true;
  GemmGroup first{1, {2}};
  first.after_planner = true;
  first.backward_first = true;
  plan.gemm_order = {{{0, {0}}}, {marked, first, GemmGroup{1, {}}}, {}};
  plan.planner = {PlannerSite::gpu, 3'000'000, PlannerStart::after_dispatch, 64};
  CHECK(written(plan) == plan_to_json(plan).dump());
  CHECK(written(Plan{}) == plan_to_json(Plan{}).dump());

  // Every balancer's plans of a skewed EP 16 record, on the bundled model and hardware.
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  HardwareSpec hw = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  hw.nodes = 2;
  SyntheticOptions o;
  o.ranks = 16;
  o.experts = static_cast<std::uint32_t>(model.num_experts);
  o.top_k = static_cast<std::uint32_t>(model.top_k);
  o.tokens_per_rank = 512;
  o.dist = PopularityDist::lognormal;
  o.lognormal_sigma = 0.8;
  o.seed = 3;
  SyntheticTrace trace(o);
  TraceRecord record;
  trace.next(record);
  const BalancerContext context = test::context_for(model, hw);
  int balancers = 0;
  for (const BalancerInfo& info : balancer_registry()) {
    CAPTURE(info.name);
    std::unique_ptr<Balancer> balancer = make_balancer(BalancerChoice{info.name, YAML::Node(), ""}, "test");
    Plan p;
    try {
      p = balancer->plan(record, context);
      p = balancer->plan(record, context);  // (planned from history where a balancer keeps one)
    } catch (const CannotServe&) {
      continue;
    }
    CHECK(written(p) == plan_to_json(p).dump());
    const std::optional<Plan> read = streamed(written(p));
    REQUIRE(read.has_value());
    CHECK(plan_to_json(*read) == plan_to_json(p));
    ++balancers;
  }
  CHECK(balancers >= 8);
}

TEST_CASE("a plan read as its line streams by is the document reader's plan, or its error") {
  const nlohmann::json good = two_gpu_json();
  check_readers_agree(good.dump());
  CHECK(outcome([&] { return *streamed(good.dump()); }) == plan_to_json(plan_from_json(good, "p", "")).dump());

  // The first defect is the one the document reader's order of checks meets first, wherever it sits
  // in the text: "version" comes last in a written plan, after the routes.
  nlohmann::json j = good;
  j["version"] = 2;
  j["routes"][0]["tokens"] = "many";
  check_readers_agree(j.dump());
  CHECK_THROWS_WITH_AS(streamed(j.dump()), doctest::Contains("version: plan version 2 is not supported"), InputError);
  // Of two bad lists, the instances are checked before the routes, and in a list the first bad one.
  j = good;
  j["routes"][0]["carrier"] = "pigeon";
  j["instances"][1]["kind"] = 3;
  check_readers_agree(j.dump());
  j = good;
  j["routes"].push_back(j["routes"][0]);
  j["routes"][1]["tokens"] = -1;
  j["routes"].push_back(j["routes"][0]);
  j["routes"][2]["tokens"] = 2.5;
  check_readers_agree(j.dump());
  CHECK_THROWS_WITH_AS(streamed(j.dump()), doctest::Contains("routes[1].tokens: value -1"), InputError);

  // Elements that are not objects, or hold arrays and objects of their own; lists that are not arrays.
  for (const char* text : {R"("routes":[5])", R"("routes":[[1,2]])", R"("routes":[{"src_rank":[0],"instance":{}}])",
                           R"("routes":{"a":[1]})", R"("routes":"none")", R"("transfers":[null])",
                           R"("instances":[{"expert":0,"gpu":0,"kind":"static","extra":[[{}]]},{"expert":1,"gpu":1,"kind":"dynamic"}])"}) {
    std::string line = good.dump();
    // A repeated key: the last value counts, for both readers.
    line.insert(line.size() - 1, std::string(",") + text);
    check_readers_agree(line);
    // The first value is replaced by the good one after it.
    std::string first = good.dump();
    first.insert(1, std::string(text) + ",");
    check_readers_agree(first);
    CHECK(outcome([&] { return *streamed(first); }) == plan_to_json(plan_from_json(good, "p", "")).dump());
  }

  // Text the parser refuses: the same place and words as parse_json's.
  const std::string text = good.dump();
  for (const std::string& bad : {text.substr(0, text.size() / 2), text + " x", "  \t" + text.substr(0, 40) + "\x01",
                                 std::string("[") + std::string(70, '['), std::string(" {\"a\":") + std::string(80, '[')}) {
    check_readers_agree(bad);
  }
}

TEST_CASE("a plans line: blank lines, a carriage return, the stream's end and the bytes read") {
  const std::string plan = two_gpu_json().dump();
  std::istringstream in(" \t\r\n" + plan + "\r\n\n" + plan);
  std::uint64_t bytes = 0;
  CHECK_FALSE(read_plan_line(in, "p.jsonl", 1, bytes).has_value());
  CHECK(bytes == 4);
  std::optional<Plan> first = read_plan_line(in, "p.jsonl", 2, bytes);
  REQUIRE(first.has_value());
  CHECK(bytes == plan.size() + 2);
  CHECK_FALSE(read_plan_line(in, "p.jsonl", 3, bytes).has_value());
  CHECK(bytes == 1);
  std::optional<Plan> last = read_plan_line(in, "p.jsonl", 4, bytes);
  REQUIRE(last.has_value());
  CHECK(bytes == plan.size());  // no newline at the file's end
  CHECK(plan_to_json(*last) == plan_to_json(*first));
  CHECK_FALSE(read_plan_line(in, "p.jsonl", 5, bytes).has_value());
  CHECK(bytes == 0);
  // A line's error is placed on its own line and column.
  std::istringstream bad("\n\n{\"version\": 1,}\n");
  read_plan_line(bad, "p.jsonl", 1, bytes);
  read_plan_line(bad, "p.jsonl", 2, bytes);
  CHECK_THROWS_WITH_AS(read_plan_line(bad, "p.jsonl", 3, bytes), doctest::Contains("p.jsonl:line 3, column 15: invalid JSON"),
                       InputError);
}

// GEMM events named by their group before matching (sim/validate/gemm_groups.hpp): each side in the
// order it ran the groups, so that a group run earlier on one side still pairs with itself.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "sim/validate/gemm_groups.hpp"
#include "sim/validate/task_matching.hpp"

using namespace epsim;

namespace {

// GPU 0 of a one-GPU plan with three GEMM groups; group 2 runs on arrival and may go first.
Plan three_groups(bool second_backward_first) {
  Plan plan;
  plan.num_gpus = 1;
  plan.gemm_order = {{{0, {0}}, {0, {1}}, {0, {2}}}};
  plan.gemm_order[0][1].backward_first = second_backward_first;
  plan.gemm_order[0][2].on_arrival = true;
  return plan;
}

TimelineEvent gemm(const char* name, Pass pass, Time_ps start, Time_ps end) {
  return {0, Track::compute, pass, name, start, end, 0};
}

/// Three forward GEMMs as the simulator ran groups 0, 2, 1 (200, 50 and 100 us), or as another side
/// named them: `names` in that order, starting at `origin`.
std::vector<TimelineEvent> three_gemms(const std::vector<const char*>& names, Time_ps origin,
                                       const std::vector<Time_ps>& durations) {
  std::vector<TimelineEvent> out;
  Time_ps t = origin;
  for (std::size_t i = 0; i < names.size(); ++i) {
    out.push_back(gemm(names[i], Pass::forward, t, t + durations[i]));
    t += durations[i];
  }
  return out;
}

std::vector<std::string> names(const std::vector<TimelineEvent>& events) {
  std::vector<std::string> out;
  for (const auto& e : events) out.push_back(e.name);
  return out;
}

}  // namespace

TEST_CASE("the backward runs backward_first groups first, then data gradients, then weight gradients") {
  const Plan plan = three_groups(true);
  const GemmGroupOrder o = gemm_group_order(plan.gemm_order[0], {0, 2, 1});
  CHECK(o.fwd == std::vector<int>{0, 2, 1});
  CHECK(o.dgrad == std::vector<int>{1, 0, 2});  // group 1 first, the others in forward order
  CHECK(o.wgrad == std::vector<int>{1, 0, 2});
  const GemmGroupOrder plain = gemm_group_order(three_groups(false).gemm_order[0], {0, 1, 2});
  CHECK(plain.dgrad == std::vector<int>{0, 1, 2});
}

TEST_CASE("an on-arrival group run second in the simulator pairs with the GPU's third GEMM") {
  const Plan plan = three_groups(false);
  // Simulated: groups 0, 2, 1 (200, 50, 100 us). Measured in the plan's order: 0, 1, 2.
  std::vector<TimelineEvent> predicted = three_gemms({"gemm fwd", "gemm fwd", "gemm fwd"}, 0, {200, 50, 100});
  std::vector<TimelineEvent> measured = three_gemms({"gemm fwd", "gemm fwd", "gemm fwd"}, 1000, {210, 110, 55});
  name_gemm_groups(plan, {{0, 2, 1}}, predicted, measured);
  CHECK(names(predicted) == std::vector<std::string>{"gemm fwd g0", "gemm fwd g2", "gemm fwd g1"});
  CHECK(names(measured) == std::vector<std::string>{"gemm fwd g0", "gemm fwd g1", "gemm fwd g2"});
  const TaskMatch m = match_tasks(predicted, measured);
  REQUIRE(m.matched.size() == 3);
  for (const auto& t : m.matched) {
    CAPTURE(t.predicted.name);
    // Each group 5 to 10% slower on the GPU; by occurrence 50 us would have met 110 us.
    const double ratio = static_cast<double>(t.measured.end_ps - t.measured.start_ps) /
                         static_cast<double>(t.predicted.end_ps - t.predicted.start_ps);
    CHECK(ratio > 1.0);
    CHECK(ratio <= 1.1);
    CHECK(task_kind(t.predicted.name) == "gemm fwd");
  }
}

TEST_CASE("measured events that name their group keep it, and counts that differ leave both sides unnamed") {
  const Plan plan = three_groups(false);
  const std::vector<TimelineEvent> predicted = three_gemms({"gemm fwd", "gemm fwd", "gemm fwd"}, 0, {200, 50, 100});
  // A recorder that names groups itself, in its own (dynamic) order.
  std::vector<TimelineEvent> named = three_gemms({"gemm fwd g0", "gemm fwd g2", "gemm fwd g1"}, 0, {210, 55, 110});
  std::vector<TimelineEvent> p1 = predicted;
  name_gemm_groups(plan, {{0, 2, 1}}, p1, named);
  CHECK(names(named) == std::vector<std::string>{"gemm fwd g0", "gemm fwd g2", "gemm fwd g1"});
  CHECK(names(p1) == std::vector<std::string>{"gemm fwd g0", "gemm fwd g2", "gemm fwd g1"});

  // Two measured GEMMs for three groups: nothing is named, matching falls back to occurrence.
  std::vector<TimelineEvent> short_measured = {gemm("gemm fwd", Pass::forward, 0, 210),
                                               gemm("gemm fwd", Pass::forward, 210, 265)};
  std::vector<TimelineEvent> p2 = predicted;
  name_gemm_groups(plan, {{0, 2, 1}}, p2, short_measured);
  CHECK(names(p2) == std::vector<std::string>{"gemm fwd", "gemm fwd", "gemm fwd"});
  CHECK(names(short_measured) == std::vector<std::string>{"gemm fwd", "gemm fwd"});
  // Two predicted GEMMs for three groups, measured ones named by epsim-hw run: their names come off,
  // so the two sides still pair by occurrence rather than not at all.
  std::vector<TimelineEvent> short_predicted = three_gemms({"gemm fwd", "gemm fwd"}, 0, {200, 50});
  std::vector<TimelineEvent> runner = three_gemms({"gemm fwd g0", "gemm fwd g1", "gemm fwd g2"}, 0, {210, 110, 55});
  name_gemm_groups(plan, {{0, 2, 1}}, short_predicted, runner);
  CHECK(names(runner) == std::vector<std::string>{"gemm fwd", "gemm fwd", "gemm fwd"});
  CHECK(match_tasks(short_predicted, runner).matched.size() == 2);
  CHECK(names_gemm_group("gemm fwd g12"));
  CHECK_FALSE(names_gemm_group("gemm fwd"));
  CHECK_FALSE(names_gemm_group("gemm fwd g"));
  CHECK_FALSE(names_gemm_group("dispatch s1"));
}

// FEPLB's timing on the simulated layer, on the round-number cluster of simple_cluster.hpp (a token
// costs 2 us of GEMM): a GPU's dynamic experts wait for the node's planner, since their rows are only
// known once it has decided, and moved-in work runs as soon as its tokens and weights are there, ahead
// of the receiver's own groups that have not started.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "sim/balancers/feplb.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/sim/simple_cluster.hpp"

using namespace epsim;

namespace {

std::vector<TimelineEvent> forward_gemms(const LayerResult& r, int gpu) {
  std::vector<TimelineEvent> gemms;
  for (const TimelineEvent& e : r.timeline.events)
    if (e.gpu == gpu && e.track == Track::compute && e.name == "gemm fwd") gemms.push_back(e);
  std::sort(gemms.begin(), gemms.end(),
            [](const TimelineEvent& a, const TimelineEvent& b) { return a.start_ps < b.start_ps; });
  return gemms;
}

Time_ps planner_end(const LayerResult& r) {
  Time_ps end = -1;
  for (const TimelineEvent& e : r.timeline.events)
    if (e.track == Track::host_cpu && e.name == "planner") end = std::max(end, e.end_ps);
  return end;
}

}  // namespace

TEST_CASE("FEPLB: the home share of a split expert is computed only after the planner has decided it") {
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const ModelSpec model = test::simple_model(4);
  // GPU 0: experts 0, 1 = 30, 10 tokens; GPU 1: experts 2, 3 = 2, 0. Token splits: target 21, so 19
  // of expert 0's tokens go to GPU 1 and its home share is 11. Both of GPU 0's experts are dynamic,
  // so it has no static group: everything it computes waits for the 100 us planner.
  const TraceRecord rec = test::record_of({{15, 5, 1, 0}, {15, 5, 1, 0}});
  FeplbParams p;
  p.scheduler.granularity = FeplbGranularity::tokens;
  p.scheduler.min_gain = 0;
  p.planner_time_us = 100;
  const Plan plan = Feplb(p).plan(rec, test::context_for(model, hw));
  REQUIRE(plan.tokens_per_gpu() == std::vector<std::int64_t>{21, 21});
  REQUIRE(plan.gemm_order[0].size() == 1);
  CHECK(plan.gemm_order[0][0].after_planner);

  const LayerResult r = simulate_layer(hw, model, plan, {20, 20}, false);
  const Time_ps decided = planner_end(r);
  REQUIRE(decided >= 100'000'000);
  const auto gemms = forward_gemms(r, 0);
  REQUIRE_FALSE(gemms.empty());
  CHECK(gemms.front().start_ps >= decided);
  // 21 tokens at 2 us each.
  CHECK(gemms.front().end_ps - gemms.front().start_ps == 42'000'000);

  // Unmarked, the group would start right after the dispatch, on a row count not decided yet.
  Plan unmarked = plan;
  unmarked.gemm_order[0][0].after_planner = false;
  const LayerResult early = simulate_layer(hw, model, unmarked, {20, 20}, false);
  CHECK(forward_gemms(early, 0).front().start_ps < planner_end(early));
}

TEST_CASE("FEPLB: a receiver computes moved-in work as soon as it has arrived, before its own dynamic expert") {
  const HardwareSpec hw = test::simple_hardware(1, 2);
  const ModelSpec model = test::simple_model(8);
  // GPU 0: experts 0-3 = 40, 39, 39, 39 (157); GPU 1: experts 4-7 = 10, 9, 9, 9 (37). One dynamic
  // expert per GPU (0 and 4). Expert 0 moved whole to GPU 1 gains 157 - max(117, 77) = 40; then GPU 0
  // (117) has nothing left to move. GPU 1 runs its static experts 5-7 (27 tokens, 54 us) from its
  // dispatch; its own dynamic expert 4 (10 tokens, 20 us) is ready when the planner is done (3 us
  // after the counts reach the host), expert 0's 40 tokens (80 us) once its weights (1 MB at 50 GB/s,
  // 20 us) and tokens have come: both before the static GEMM ends. On arrival, expert 0 goes first.
  const TraceRecord rec = test::record_of({{20, 20, 20, 20, 5, 5, 5, 5}, {20, 19, 19, 19, 5, 4, 4, 4}});
  FeplbParams p;
  p.scheduler.dynamic_experts_per_gpu = 1;
  const Plan plan = Feplb(p).plan(rec, test::context_for(model, hw));
  REQUIRE(plan.tokens_per_gpu() == std::vector<std::int64_t>{117, 77});
  REQUIRE(plan.gemm_order[1].size() == 3);

  const LayerResult r = simulate_layer(hw, model, plan, {100, 100}, true);
  const auto gemms = forward_gemms(r, 1);
  REQUIRE(gemms.size() == 3);
  Time_ps tokens_in = -1;
  for (const TimelineEvent& e : r.timeline.events)
    if (e.track == Track::copy_engine && e.pass == Pass::forward && e.name == "tokens") tokens_in = e.end_ps;
  REQUIRE(tokens_in >= 0);
  REQUIRE(tokens_in < gemms[0].end_ps);  // the moved work is there before the static GEMM ends
  auto duration = [](const TimelineEvent& e) { return e.end_ps - e.start_ps; };
  CHECK(duration(gemms[0]) == 54'000'000);
  CHECK(duration(gemms[1]) == 80'000'000);  // expert 0, moved in
  CHECK(duration(gemms[2]) == 20'000'000);  // expert 4, at home
  CHECK(gemms[1].start_ps == gemms[0].end_ps);

  // Without the mark, the receiver keeps plan order: its own expert 4 first, the moved work after.
  Plan in_order = plan;
  in_order.gemm_order[1][2].on_arrival = false;
  const auto late = forward_gemms(simulate_layer(hw, model, in_order, {100, 100}, false), 1);
  REQUIRE(late.size() == 3);
  CHECK(late[1].end_ps - late[1].start_ps == 20'000'000);
  // Backward: expert 0's weight gradients return to GPU 0 in FP32, 1e6 parameters x 4 bytes.
  CHECK(r.gradient_bytes == doctest::Approx(4'000'000));
}

// Layer time per pass with and without two-micro-batch overlap, and the busy times read off a
// timeline, against hand-worked numbers.
#include <doctest/doctest.h>

#include "sim/step/overlap_time.hpp"
#include "sim/step/pass_busy.hpp"

using namespace epsim;

namespace {

GpuPassBusy busy(double compute, double comm, double active) {
  GpuPassBusy b;
  b.compute_us = compute;
  b.comm_us = comm;
  b.active_us = active;
  return b;
}

TimelineEvent event(int gpu, Track track, Pass pass, double start_us, double end_us) {
  TimelineEvent e;
  e.gpu = gpu;
  e.track = track;
  e.pass = pass;
  e.start_ps = static_cast<Time_ps>(start_us * kPsPerUs);
  e.end_ps = static_cast<Time_ps>(end_us * kPsPerUs);
  return e;
}

}  // namespace

TEST_CASE("without overlap a layer pass is its non-MoE work plus the simulated MoE pass") {
  CHECK(layer_pass_us(StepOverlap::none, 100, 500, {busy(300, 200, 500)}) == 600);
}

TEST_CASE("two micro-batches hide one half's communication under the other half's computation") {
  // N = 100, C = 300, M = 200, P = 500 with no idle time:
  //   max(100, 200/2) + max(300, 200/2) = 100 + 300 = 400, below the plain 600.
  CHECK(layer_pass_us(StepOverlap::two_micro_batch, 100, 500, {busy(300, 200, 500)}) == 400);
  // Communication bound: N = 50, C = 100, M = 400: max(50, 200) + max(100, 200) = 400.
  CHECK(layer_pass_us(StepOverlap::two_micro_batch, 50, 500, {busy(100, 400, 500)}) == 400);
  // Idle time (a planner every GPU waits for) is not hidden: active 450 of 500 adds 50.
  CHECK(layer_pass_us(StepOverlap::two_micro_batch, 50, 500, {busy(100, 400, 450)}) == 450);
  // Only what even the busiest GPU left idle counts: a GPU idle because it waited for a straggler
  // adds nothing, the straggler's own time gates the layer. GPU 1 (active 500) leaves none:
  // max(max(50, 200) + max(100, 200), max(50, 50) + max(300, 50)) = 400.
  CHECK(layer_pass_us(StepOverlap::two_micro_batch, 50, 500, {busy(100, 400, 450), busy(300, 100, 500)}) == 400);
}

TEST_CASE("the slowest GPU gates the overlapped layer, and overlap never makes a layer slower than the plain one") {
  // GPU 0: 100 + 300 = 400; GPU 1 (a straggler): max(100, 50) + max(450, 50) = 550.
  CHECK(layer_pass_us(StepOverlap::two_micro_batch, 100, 500, {busy(300, 200, 500), busy(450, 100, 500)}) == 550);
  // Compute and communication overlapped already in the plain run (C + M > P): the pairing would
  // give max(10, 25) + max(50, 25) = 75, more than the plain 10 + 50 = 60, so the plain time stands.
  CHECK(layer_pass_us(StepOverlap::two_micro_batch, 10, 50, {busy(50, 50, 50)}) == 60);
}

TEST_CASE("busy times are interval unions per GPU and pass") {
  Timeline t;
  t.events.push_back(event(0, Track::compute, Pass::forward, 0, 10));
  t.events.push_back(event(0, Track::compute, Pass::forward, 5, 20));   // overlaps: union 0..20
  t.events.push_back(event(0, Track::compute, Pass::forward, 30, 35));  // 25 us in all
  t.events.push_back(event(0, Track::comm_kernel, Pass::forward, 15, 40));  // a kernel's span: not data moving
  t.events.push_back(event(0, Track::nvlink_out, Pass::forward, 20, 45));
  t.events.push_back(event(0, Track::nic_out, Pass::forward, 40, 42));     // inside: comm 20..45 = 25
  t.events.push_back(event(0, Track::host_cpu, Pass::forward, 50, 90));    // neither
  t.events.push_back(event(0, Track::compute, Pass::backward, 100, 200));  // other pass
  t.events.push_back(event(1, Track::copy_engine, Pass::forward, 0, 7));
  const std::vector<GpuPassBusy> fwd = pass_busy(t, Pass::forward, 2);
  REQUIRE(fwd.size() == 2);
  CHECK(fwd[0].compute_us == doctest::Approx(25));
  CHECK(fwd[0].comm_us == doctest::Approx(25));
  CHECK(fwd[0].active_us == doctest::Approx(45));  // 0..45
  CHECK(fwd[1].compute_us == 0);
  CHECK(fwd[1].comm_us == doctest::Approx(7));
  const std::vector<GpuPassBusy> bwd = pass_busy(t, Pass::backward, 2);
  CHECK(bwd[0].compute_us == doctest::Approx(100));
  CHECK(bwd[0].comm_us == 0);
}

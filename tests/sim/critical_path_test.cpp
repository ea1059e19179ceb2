// The critical path walk on timelines small enough to trace by hand.
#include <doctest/doctest.h>

#include "sim/replay/critical_path.hpp"

using namespace epsim;

namespace {
TimelineEvent task(int gpu, Track track, Time_ps start, Time_ps end, Pass pass = Pass::forward) {
  return TimelineEvent{gpu, track, pass, "t", start, end, 0};
}
}  // namespace

TEST_CASE("the critical path follows the last-arriving task back to the start") {
  Timeline tl;
  tl.events = {task(0, Track::compute, 0, 10), task(1, Track::nvlink_out, 5, 20), task(0, Track::compute, 22, 30),
               task(1, Track::compute, 0, 25), task(2, Track::compute, 12, 20),
               task(0, Track::compute, 0, 40, Pass::backward)};
  // From 30: GPU 0's GEMM [22, 30] (8 on SMs); at 22 the latest end is 20, where GPU 1's NVLink flow
  // [5, 20] wins the tie over GPU 2's GEMM (the fabric first): 2 waiting, 15 on NVLink; at 5 nothing
  // has ended: 5 waiting.
  const CriticalPath p = critical_path(tl, Pass::forward, 0, 30);
  CHECK(p.last_gpu == 0);
  CHECK(p.length_ps == 30);
  CHECK(p.time_ps[static_cast<int>(PathResource::sm)] == 8);
  CHECK(p.time_ps[static_cast<int>(PathResource::nvlink)] == 15);
  CHECK(p.time_ps[static_cast<int>(PathResource::wait)] == 7);
  CHECK(p.tasks == 2);
  CHECK(p.bound() == PathResource::nvlink);
  CHECK(p.share(PathResource::nvlink) == doctest::Approx(0.5));

  // A task on the path's own GPU ending at the same instant is preferred: GPU 0's copy [15, 20].
  tl.events.push_back(task(0, Track::copy_engine, 15, 20));
  const CriticalPath q = critical_path(tl, Pass::forward, 0, 30);
  CHECK(q.time_ps[static_cast<int>(PathResource::copy_engine)] == 5);
  // then at 15: GPU 0's GEMM [0, 10] ends latest (5 waiting), 10 on SMs.
  CHECK(q.time_ps[static_cast<int>(PathResource::sm)] == 18);
  CHECK(q.time_ps[static_cast<int>(PathResource::wait)] == 7);
  CHECK(q.bound() == PathResource::sm);
}

TEST_CASE("the critical path of an empty pass is all waiting, tasks before the pass are cut at its start") {
  Timeline tl;
  CHECK(critical_path(tl, Pass::forward, 0, 10).bound() == PathResource::wait);
  tl.events = {task(3, Track::host_cpu, 50, 120, Pass::backward)};
  const CriticalPath p = critical_path(tl, Pass::backward, 100, 130);
  CHECK(p.last_gpu == 3);
  CHECK(p.time_ps[static_cast<int>(PathResource::host)] == 20);
  CHECK(p.time_ps[static_cast<int>(PathResource::wait)] == 10);
  CHECK(p.bound() == PathResource::host);
}

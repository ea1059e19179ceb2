// The critical path of a simulated pass: what the GPU that finishes last was waiting on, traced back
// from the pass's end to its start, and the resource that bounds it.
//
// The engine records tasks, not their dependencies, so the path is recovered the way profilers do it
// from traces: from the pass's end, take the task that ended last at or before the current instant
// (the last-arriving input: nothing that ended later can have held it up), charge its duration to its
// resource, move to its start, and repeat. Between two tasks, time when nothing on the path ran is
// waiting (latencies, launch gaps). Ties prefer the GPU the path is on, then the resource order below,
// so the walk is deterministic.
#pragma once

#include <array>
#include <cstddef>

#include "sim/replay/timeline.hpp"

namespace epsim {

/// The resources a path's time is charged to.
enum class PathResource { sm, copy_engine, nvlink, nic, host, wait };
constexpr std::size_t kPathResources = 6;

const char* to_string(PathResource resource);

struct CriticalPath {
  int last_gpu = 0;        ///< the GPU whose task ends the pass
  Time_ps length_ps = 0;   ///< pass end minus pass start
  std::array<Time_ps, kPathResources> time_ps{};  ///< per resource, summing to length_ps
  int tasks = 0;           ///< tasks on the path

  double share(PathResource r) const;
  /// The resource with the most time on the path (ties: the order of PathResource); `wait` only when
  /// nothing else has any.
  PathResource bound() const;
};

/// The critical path of `pass` in `timeline`, over [start_ps, end_ps].
CriticalPath critical_path(const Timeline& timeline, Pass pass, Time_ps start_ps, Time_ps end_ps);

}  // namespace epsim

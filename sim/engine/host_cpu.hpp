// A node's host CPU as seen by the simulator: a FIFO timeline of tasks with known durations
// (planner runs, device-to-host waits, kernel launches issued by one thread).
#pragma once

#include <functional>

#include "sim/engine/event_queue.hpp"

namespace epsim {

class HostCpu {
 public:
  using DoneCallback = std::function<void(Time_ps started_ps, Time_ps ended_ps)>;

  explicit HostCpu(EventQueue& queue);
  /// Appends a task of `duration_ps`; it starts when the tasks before it have finished.
  void submit(Time_ps duration_ps, DoneCallback on_done);
  Time_ps busy_ps() const;

 private:
  // Implementation's choice.
};

}  // namespace epsim

// A node's host CPU as seen by the simulator: a FIFO timeline of tasks with known durations
// (planner runs, device-to-host waits, kernel launches issued by one thread).
#pragma once

#include <deque>
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
  struct Task {
    Time_ps duration_ps;
    DoneCallback on_done;
  };

  void start_head();
  void finish_head();

  EventQueue& queue_;
  std::deque<Task> tasks_;  ///< front() runs while running_
  bool running_ = false;
  Time_ps started_ps_ = 0;
  Time_ps busy_ps_ = 0;  ///< finished tasks only
};

}  // namespace epsim

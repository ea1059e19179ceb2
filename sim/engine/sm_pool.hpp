// One GPU's streaming multiprocessors. Communication kernels (the EP backend's dispatch and combine)
// hold a fixed number of SMs while they run; compute kernels (grouped GEMMs) run one after another on
// the compute stream and progress at a rate proportional to the SMs left to them. A GEMM's work is
// given as its duration with all SMs; while a communication kernel holds k of S SMs it advances at
// (S - k) / S of that speed, and its completion is rescheduled whenever k changes.
#pragma once

#include <functional>

#include "sim/engine/event_queue.hpp"

namespace epsim {

class SmPool {
 public:
  /// (time the kernel started on the stream, time it finished)
  using DoneCallback = std::function<void(Time_ps started_ps, Time_ps ended_ps)>;

  SmPool(EventQueue& queue, int total_sms);

  int total_sms() const;
  /// SMs currently held by communication kernels.
  int held_sms() const;
  /// A communication kernel takes `sms` SMs now (the total held may not reach total_sms()).
  void acquire(int sms);
  /// A communication kernel gives back `sms` SMs now.
  void release(int sms);

  /// Appends a compute kernel that needs `work_ps` with every SM free. It starts when the kernels
  /// submitted before it have finished.
  void submit(Time_ps work_ps, DoneCallback on_done);

  Time_ps compute_busy_ps() const;  ///< time the compute stream had a kernel running

 private:
  // Implementation's choice.
};

}  // namespace epsim

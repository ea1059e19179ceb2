// One GPU's streaming multiprocessors. Communication kernels (the EP backend's dispatch and combine)
// hold a fixed number of SMs while they run; compute kernels (grouped GEMMs) run one after another on
// the compute stream and progress at a rate proportional to the SMs left to them. A GEMM's work is
// given as its duration with all SMs; while a communication kernel holds k of S SMs it advances at
// (S - k) / S of that speed, and its completion is rescheduled whenever k changes.
#pragma once

#include <cstdint>
#include <deque>
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
  /// submitted before it have finished. `hbm_fraction` (0..1) is the share of HBM bandwidth the kernel
  /// needs at full speed (1 for a memory-bound kernel).
  void submit(Time_ps work_ps, DoneCallback on_done, double hbm_fraction = 0.0);

  /// Share of HBM bandwidth other agents (Copy Engines) take now, 0..1. A kernel needing a share f
  /// runs at min(1, (1 - pressure) / f) of its speed: memory-bound kernels slow down, compute-bound
  /// ones keep their pace until HBM is full.
  void set_hbm_pressure(double pressure);

  Time_ps compute_busy_ps() const;  ///< time the compute stream had a kernel running

 private:
  struct Kernel {
    Time_ps work_ps;
    DoneCallback on_done;
    double hbm_fraction;
  };
  /// Speed of the running kernel under HBM pressure, in thousandths (1000 = full speed).
  std::int64_t hbm_permille() const;

  void start_head();
  /// Brings the running kernel's remaining work up to now() at the current SM share.
  void progress();
  void schedule_end();
  void finish_head();

  EventQueue& queue_;
  int total_sms_;
  int held_sms_ = 0;
  std::deque<Kernel> kernels_;  ///< front() runs while running_
  bool running_ = false;
  Time_ps started_ps_ = 0;
  // Remaining work of the running kernel in milli-SM-picoseconds (work_ps * total_sms * 1000): progress
  // over dt with k SMs held at HBM speed p permille is exactly dt * (total - k) * p, so completion
  // times need no floating point. 128 bits: a kernel as long as the time horizon (1e18 ps) on 1024
  // SMs is 1e24 units, beyond int64.
  __extension__ typedef __int128 WideWork;
  WideWork remaining_sm_ps_ = 0;
  double hbm_pressure_ = 0;
  Time_ps last_update_ps_ = 0;
  EventQueue::Handle end_event_ = 0;
  Time_ps busy_ps_ = 0;  ///< finished kernels only
};

}  // namespace epsim

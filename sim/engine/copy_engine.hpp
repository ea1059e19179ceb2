// One GPU's peer-to-peer Copy Engine: a single FIFO queue (on NVSwitch systems the driver gives all
// peer copies of a GPU one logical engine), a fixed cost per copy (enqueue + P2P latency), then the
// bytes move as a flow over the NVLink ports with the engine's own bandwidth as a cap. It uses no SMs.
// A small copy queued behind a large one waits for it: head-of-line blocking is the point.
#pragma once

#include <deque>
#include <functional>
#include <vector>

#include "sim/engine/flow_network.hpp"

namespace epsim {

class CopyEngine {
 public:
  /// (time the copy left the queue and began its fixed cost, time its last byte arrived)
  using DoneCallback = std::function<void(Time_ps started_ps, Time_ps ended_ps)>;

  CopyEngine(EventQueue& queue, FlowNetwork& network, Time_ps fixed_cost_ps, double bw_GBps);

  /// Appends a copy of `bytes` over `links`; it starts when every copy enqueued before it finished.
  /// `on_start`, if given, runs when the copy leaves the queue.
  void enqueue(const std::vector<LinkId>& links, double bytes, DoneCallback on_done,
               std::function<void()> on_start = {});

  std::size_t queued() const;  ///< copies waiting or running
  Time_ps busy_ps() const;     ///< total time the engine had a copy in progress
  double bytes_copied() const;  ///< bytes of the copies that have completed

 private:
  struct Copy {
    std::vector<LinkId> links;
    double bytes;
    DoneCallback on_done;
    std::function<void()> on_start;
  };

  void start_head();
  void finish_head(Time_ps started_ps, Time_ps ended_ps);

  EventQueue& queue_;
  FlowNetwork& network_;
  Time_ps fixed_cost_ps_;
  double bw_GBps_;
  std::deque<Copy> copies_;  ///< front() is in progress while running_
  bool running_ = false;
  Time_ps running_since_ps_ = 0;
  Time_ps busy_ps_ = 0;  ///< finished copies only
  double bytes_copied_ = 0;
};

}  // namespace epsim

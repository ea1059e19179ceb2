// Fluid flows over directional links with max-min fair bandwidth sharing.
//
// A link is a one-direction pipe (an NVLink port out of a GPU, an IB NIC into a GPU, ...) with a
// capacity in GB/s. A flow crosses an ordered set of links: it first waits its latency (per-message
// latency of the path), then moves its bytes at a rate that is re-solved by progressive filling every
// time a flow starts or finishes on a link it shares (directly or through other flows). Each flow may
// also carry its own rate cap (a Copy Engine cannot exceed its own bandwidth even on a free link).
// Re-solving touches only the connected component of links and flows that changed, as in SimGrid's
// lazy max-min solver.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/event_queue.hpp"

namespace epsim {

using LinkId = int;
using FlowId = std::int64_t;

class FlowNetwork {
 public:
  /// Called when the last byte of a flow arrives: (time the flow was started, time it ended).
  using DoneCallback = std::function<void(Time_ps started_ps, Time_ps ended_ps)>;
  static constexpr double kNoRateCap = std::numeric_limits<double>::infinity();

  explicit FlowNetwork(EventQueue& queue);

  /// Adds a link; `capacity_GBps` > 0.
  LinkId add_link(std::string name, double capacity_GBps);
  std::size_t link_count() const;
  const std::string& link_name(LinkId link) const;
  double link_capacity_GBps(LinkId link) const;

  /// Starts a flow now: after `latency_ps` it moves `bytes` (> 0, or 0 for a pure-latency message)
  /// over `links` (may be empty: then only the latency and the cap apply) at its max-min fair share,
  /// never above `rate_cap_GBps`. `on_done` runs at completion. A flow over no links with no cap
  /// completes after its latency.
  FlowId start_flow(const std::vector<LinkId>& links, double bytes, Time_ps latency_ps,
                    double rate_cap_GBps, DoneCallback on_done);

  /// Current rate of an active flow in GB/s (0 while it is still in its latency phase).
  double flow_rate_GBps(FlowId flow) const;
  std::size_t active_flows() const;

  /// Bytes that have crossed `link` so far (for utilisation = bytes / (capacity * time)).
  double link_bytes(LinkId link) const;
  /// Total time during which `link` carried at least one flow in its transfer phase.
  Time_ps link_busy_ps(LinkId link) const;

 private:
  // Implementation's choice.
};

}  // namespace epsim

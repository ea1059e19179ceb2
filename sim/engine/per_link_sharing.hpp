// Per-link processor sharing: the coarse bandwidth model for wide expert parallelism.
//
// Each link shares its capacity equally among the flows it is still carrying, on its own: a link with
// n flows gives each capacity / n, whatever the flows' other links do. A flow's bytes cross each of
// its links in this way, all at once (the libraries pipeline a message in chunks), and the flow ends
// when the last of its links has carried all of them: its end is the latest of its per-link ends. A
// rate cap (a Copy Engine's bandwidth) is one more such bound, bytes / cap after the latency.
//
// Why: under max-min sharing (FlowNetwork's exact mode) one flow's end can move the rate of every
// flow on an all-to-all's rail, about (EP / 8)^2 of them, so a layer costs about EP^4
// (docs/performance.md, "What exact sharing costs at wide EP"). Here an end touches only its own
// links: each link keeps a virtual clock, the bytes one of its flows has received since the link was
// created, which runs at capacity / n, and a min-heap of its flows' ends on that clock. A flow that
// starts or ends changes n, which moves the link's next end (one event per link, rescheduled) but
// not the other flows' ends on the clock. A flow costs O(hops x log n), a layer about EP^2 log EP.
//
// What it gives up: a link serves a flow at capacity / n even while another link holds that flow
// back, and the share the flow cannot use is not passed to the link's other flows (max-min passes
// it on). A link is busy whenever it carries a flow and then moves its full capacity, so a phase
// bottlenecked at one port ends when that port has moved its bytes, as under max-min; flows that a
// busier port elsewhere holds back end later at their other link than max-min would let them. It
// costs most where a link mixes flows held back elsewhere with flows that are not: a weight copy
// beside token flows that another link holds back gets capacity / n instead of what they leave
// (UltraEP's layers at EP 128 and 256: 5 to 7% late). The error against exact sharing is measured, not bounded:
// tests/engine/per_link_sharing_test.cpp and docs/performance.md; engine.bandwidth_sharing auto keeps
// exact where it is affordable.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_table.hpp"
#include "sim/engine/link_ends.hpp"

namespace epsim {

class PerLinkSharing {
 public:
  /// Called when a flow ends: (time the flow was started, time it ended).
  using DoneCallback = FlowTable<PerLinkSharing>::DoneCallback;
  using FlowId = FlowTable<PerLinkSharing>::FlowId;

  explicit PerLinkSharing(EventQueue& queue);

  /// Makes room for `flows` flows at once (FlowNetwork::reserve_flows).
  void reserve_flows(std::size_t flows);
  /// Adds the next link (ids are 0, 1, ... in order of addition); `capacity_GBps` > 0 and finite.
  void add_link(double capacity_GBps);
  /// Starts a flow now: after `latency_ps` its `bytes` cross every link of `links` at that link's
  /// share, and at most `rate_cap_GBps` (infinite: no cap). The callers (FlowNetwork) check the
  /// arguments. `on_done` runs from an event, never inside start_flow.
  FlowId start_flow(const std::vector<int>& links, double bytes, Time_ps latency_ps, double rate_cap_GBps,
                    DoneCallback&& on_done, EndHints end_hints = {});

  /// The rate a flow moves at now, GB/s: the smallest share among the links still carrying it and its
  /// cap; 0 in its latency phase, once it ended, and for an unknown id.
  double flow_rate_GBps(FlowId flow) const;
  std::size_t active_flows() const { return table_.active(); }
  /// Bytes the link has carried so far.
  double link_bytes(int link) const;
  /// Time during which the link carried at least one flow.
  Time_ps link_busy_ps(int link) const;

 private:
  /// What link_event and enter_transfer touch, in one cache line: a wide layer's links are visited
  /// in event order, nearly at random. What only inspection reads sits apart (LinkBusy), and the
  /// bytes a link's flows still miss are summed over its heap when asked.
  struct alignas(64) Link {
    double capacity = 0;        ///< bytes per ps
    double clock_bytes = 0;     ///< virtual clock: bytes each of its flows received, as of clock_at_ps
    Time_ps clock_at_ps = 0;
    LinkEnds ends;              ///< its flows' ends, earliest first
    EventQueue::Handle event = 0;  ///< its next end
    std::uint32_t joined = 0;   ///< flows that ever joined (wrapping), for LinkEnd::order
    bool dirty = false;         ///< joined by flows entering now; its event is moved once, after them
  };
  static_assert(sizeof(Link) == 64, "a link is one cache line");
  /// What only inspection reads: when a link was busy (carried a flow), and the bytes of every flow
  /// that joined it. A wide layer has a few thousand links: this table stays in the core's cache.
  struct LinkBusy {
    Time_ps busy_ps = 0;
    Time_ps since_ps = 0;
    double joined_bytes = 0;
  };
  /// What entering its links touches, once, after the latency.
  struct FlowPath {
    double bytes = 0;
    double cap = 0;                 ///< bytes per ps, +inf when uncapped
    std::uint32_t hop_begin = 0;    ///< this slot's segment of hop_pool_
    std::uint16_t hop_count = 0;
    std::uint16_t hop_capacity = 0;
  };

  friend class FlowTable<PerLinkSharing>;
  void advance(Link& link);
  /// After its latency: the flow joins its links (FlowTable).
  void enter_transfer(std::int32_t slot);
  /// Once the flows due at one instant entered: each link they joined puts its batch in order and
  /// moves its event, once (FlowTable).
  void settle_entered();
  /// Schedules (or moves) the link's event to its next end.
  void schedule_link(std::int32_t link);
  void link_event(std::int32_t link);

  EventQueue& queue_;
  FlowTable<PerLinkSharing> table_;
  std::vector<Link> links_;
  std::vector<LinkBusy> busy_;  ///< parallel to links_
  std::vector<FlowPath> paths_;  ///< parallel to the table's slots
  std::vector<std::int32_t> hop_pool_;  ///< the flows' links, a segment per slot
  std::vector<std::int32_t> ended_;  ///< scratch of link_event
  /// Links joined by the flows entering at this instant. A rank's kernel starts its messages at once,
  /// so a hundred flows may join its links in one call: each link takes them as one batch, put in
  /// order once (LinkEnds), and its event is moved once, after all.
  struct Joined {
    std::int32_t link;
    std::uint32_t batch_begin;  ///< where the link's batch of ends begins (LinkEnds::begin_batch)
  };
  std::vector<Joined> dirty_;
  std::vector<LinkEnd> settle_scratch_;  ///< LinkEnds::settle's working space
};

}  // namespace epsim

// Group max-min sharing: the `local` bandwidth model for wide expert parallelism.
//
// Links are put in groups (Topology: each GPU's sending links, ep_sms_out, nvlink_out, nic_out and
// pcie_d2h, are one group, its receiving links another). Inside a group the bandwidth is shared
// max-min, exactly: a flow held back by one link of the group (the SM limit of its kernel) leaves its
// share of the group's other links (the NVLink port) to their other flows (a weight copy). Groups
// are not coupled: a flow crosses each group it meets at that group's rate for it, all at once, and
// ends when the last of its groups has carried all its bytes.
//
// Why: exact max-min (FlowNetwork's default) couples every flow of an all-to-all's rail, so a layer
// costs about EP^4 (docs/performance.md, "What exact sharing costs at wide EP"). per_link
// (per_link_sharing.hpp) decouples every link, which costs about EP^2, but no link passes on the
// share a flow held back elsewhere cannot use: a weight copy beside token flows that the SM limit
// holds back crawls (UltraEP 5 to 7% late at EP 128 and 256), and a GPU's one RDMA flow on 2 nodes
// takes its NIC's full rate while max-min holds it to its SM share (6 to 7% early). Both happen
// inside one GPU's sending (or receiving) links, which a group solves exactly; what is left is the
// coupling across the fabric, between a flow's sending and receiving GPUs. Each side is busy whenever
// it has flows, so a receiving side can move bytes its senders have not sent yet: a skewed exchange
// whose kernels start at different times ends early (1 to 2.2% on the layers measured,
// tests/engine/group_sharing_test.cpp and docs/performance.md, "local").
//
// How it stays cheap: flows that cross the same links of a group with the same rate cap get the same
// max-min rate, so a group solves over these classes (a handful: a kernel's NVLink flows, its RDMA
// flows, Copy Engine copies), not over its flows. Each class keeps a virtual clock, the bytes each of
// its flows has received, which runs at the class's rate, and the ends of its flows on that clock
// (LinkEnds), earliest first. A flow that starts or ends re-solves its groups' few classes and moves
// each group's next end (one event a group); no other flow is touched. A flow costs O(groups x log n),
// and a token message crosses two groups where per_link counts four links.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_table.hpp"
#include "sim/engine/link_ends.hpp"

namespace epsim {

class GroupSharing {
 public:
  /// Called when a flow ends: (time the flow was started, time it ended).
  using DoneCallback = FlowTable<GroupSharing>::DoneCallback;
  using FlowId = FlowTable<GroupSharing>::FlowId;
  /// The most links one group may hold (a class names its links as bits of a mask).
  static constexpr int kMaxGroupLinks = 16;
  static constexpr std::uint32_t kNoBatch = 0xffff'ffff;

  explicit GroupSharing(EventQueue& queue);

  /// Makes room for `flows` flows at once (FlowNetwork::reserve_flows).
  void reserve_flows(std::size_t flows);
  /// Adds the next link (ids are 0, 1, ... in order of addition); `capacity_GBps` > 0 and finite.
  /// Links given the same `group` >= 0 share max-min among themselves; a negative group is a group
  /// of the link alone. Throws std::length_error past kMaxGroupLinks links in one group.
  void add_link(double capacity_GBps, int group);
  /// Starts a flow now: after `latency_ps` its `bytes` cross each group of `links` at that group's
  /// max-min rate for it, never above `rate_cap_GBps` (infinite: no cap). The callers (FlowNetwork)
  /// check the arguments. `on_done` runs from an event, never inside start_flow.
  FlowId start_flow(const std::vector<int>& links, double bytes, Time_ps latency_ps, double rate_cap_GBps,
                    DoneCallback&& on_done);

  /// The rate a flow moves at now, GB/s: the smallest rate of the groups still carrying it (its cap
  /// if it crosses none); 0 in its latency phase, once it ended, and for an unknown id.
  double flow_rate_GBps(FlowId flow) const;
  std::size_t active_flows() const { return table_.active(); }
  /// Bytes the link has carried so far.
  double link_bytes(int link) const;
  /// Time during which the link carried at least one flow.
  Time_ps link_busy_ps(int link) const;

 private:
  /// The flows of a group that cross the same links of it (`mask`, bits of Group::links) under the
  /// same cap: max-min gives them one rate, so they share one virtual clock.
  /// A group's event reads every class of the group: each is one cache line.
  struct alignas(64) Class {
    double cap = 0;            ///< bytes per ps, +inf when uncapped
    double rate = 0;           ///< bytes per ps, each of its flows, as last solved
    double clock_bytes = 0;    ///< bytes each of its flows received, as of the group's clock_at_ps
    LinkEnds ends;             ///< its flows' ends on the clock, earliest first
    std::uint32_t mask = 0;
    std::uint32_t joined = 0;  ///< flows that ever joined (wrapping), for LinkEnd::order
    /// Where the ends joined by the flows entering now begin (LinkEnds::begin_batch); kNoBatch
    /// when none did. They are put in order once, after those flows.
    std::uint32_t batch_begin = kNoBatch;
  };
  static_assert(sizeof(Class) == 64, "a class is one cache line");
  /// A link's state, kept in its group (a group's event reads all of its links, side by side).
  struct LinkState {
    double capacity = 0;     ///< bytes per ps
    double load = 0;         ///< bytes per ps it carries, as last solved
    double bytes = 0;        ///< carried up to its group's clock_at_ps
    Time_ps busy_ps = 0;
    Time_ps since_ps = 0;    ///< when it last went from no flow to some
    std::uint32_t flows = 0; ///< flows on it
  };
  struct Group {
    std::vector<LinkState> links;     ///< bit b of a class's mask is links[b]
    std::vector<Class> classes;       ///< never removed: a group sees the same few again and again
    Time_ps clock_at_ps = 0;
    EventQueue::Handle event = 0;     ///< its next end
    /// Its links carrying flows, as last solved (bits of links): the others carry nothing, and
    /// an event of a group whose one class takes two of its four links reads those two alone.
    std::uint32_t loaded = 0;
    bool dirty = false;               ///< joined by flows entering now; solved once, after them
  };
  /// Where a link's state is: its group, and its place there.
  struct LinkPlace {
    std::int32_t group = 0;
    std::int32_t bit = 0;
  };
  /// A flow's part in one group: the class it joins there.
  struct Segment {
    std::int32_t group;
    std::int32_t cls;
  };
  /// Flows crossing at most this many groups keep their segments in their FlowPath: every EP
  /// message does (two groups, or four when forwarded), a copy or a PCIe transfer too.
  static constexpr std::size_t kInlineSegments = 4;
  /// What entering its groups touches, once, after the latency: one cache line, written when the
  /// flow starts and read when it enters, which then leaves the flow's table entry alone. A wide
  /// layer starts and enters a hundred thousand flows in scattered slots, where each line apart
  /// (its segments, its bound count) cost a miss more.
  struct alignas(64) FlowPath {
    double bytes = 0;
    double cap = 0;                 ///< bytes per ps, +inf when uncapped
    std::uint32_t spill_begin = 0;  ///< more groups' segments: seg_pool_[spill_begin ..)
    std::uint16_t seg_count = 0;
    std::uint16_t spill_capacity = 0;
    Segment inline_segs[kInlineSegments];
    bool entered = false;           ///< its latency has passed
  };
  static_assert(sizeof(FlowPath) == 64, "a flow's path is one cache line");
  Segment* segments(FlowPath& path) {
    return path.seg_count <= kInlineSegments ? path.inline_segs : seg_pool_.data() + path.spill_begin;
  }
  const Segment* segments(const FlowPath& path) const {
    return path.seg_count <= kInlineSegments ? path.inline_segs : seg_pool_.data() + path.spill_begin;
  }
  friend class FlowTable<GroupSharing>;
  std::int32_t class_of(Group& group, std::uint32_t mask, double cap);
  /// After its latency: the flow joins its groups' classes (FlowTable).
  void enter_transfer(std::int32_t slot);
  /// Once the flows due at one instant entered: each group they joined puts its classes' batches in
  /// order, re-solves and moves its event, once (FlowTable).
  void settle_entered();
  /// Moves the group's clocks (and its links' bytes) to now at the rates last solved.
  void advance(Group& group);
  /// Max-min over the group's classes (progressive filling), then its links' loads and busy times.
  void solve(std::int32_t group);
  /// The group's links' loads, flow counts and busy periods from its classes' rates (solve's end).
  void settle_links(Group& group);
  /// A link's new load and flow count, opening or closing its busy period.
  void set_link(LinkState& link, double load, std::uint32_t flows) const;
  void schedule_group(std::int32_t group);
  void group_event(std::int32_t group);

  EventQueue& queue_;
  FlowTable<GroupSharing> table_;
  std::vector<LinkPlace> links_;
  std::vector<Group> groups_;
  std::vector<std::int32_t> group_of_key_;  ///< add_link's group number -> index in groups_
  std::vector<FlowPath> paths_;  ///< parallel to the table's slots
  std::vector<Segment> seg_pool_;  ///< segments of flows crossing more than kInlineSegments groups
  std::vector<std::int32_t> dirty_;       ///< groups joined by the flows entering at this instant
  std::vector<std::int32_t> ended_;       ///< scratch of group_event
  std::vector<LinkEnd> settle_scratch_;
  std::vector<Segment> seg_scratch_;         ///< start_flow's: the groups a route crosses
  std::vector<std::uint32_t> mask_scratch_;  ///< start_flow's: the links a route takes in each group
};

}  // namespace epsim

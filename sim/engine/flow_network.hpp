// Fluid flows over directional links with max-min fair bandwidth sharing.
//
// A link is a one-direction pipe (an NVLink port out of a GPU, an IB NIC into a GPU, ...) with a
// capacity in GB/s. A flow crosses an ordered set of links: it first waits its latency (per-message
// latency of the path), then moves its bytes at a rate that is re-solved by progressive filling every
// time a flow starts or finishes on a link it shares (directly or through other flows). Each flow may
// also carry its own rate cap (a Copy Engine cannot exceed its own bandwidth even on a free link).
// Re-solving touches only the connected component of links and flows that changed, as in SimGrid's
// lazy max-min solver.
//
// Three sharing modes (Sharing, chosen by the hardware file's engine.bandwidth_sharing):
//
//  * exact (the default, the reference): rates are re-solved at every instant a flow enters its
//    transfer phase or ends.
//
//  * epochs: a flow that enters its transfer phase is solved at once, but the re-solve after a flow
//    ends may wait up to `tolerance` x (that flow's bytes / its last rate); a re-solve that runs
//    earlier for any reason takes every waiting change along. Waiting pays only where a solve is
//    large: the ends that fall in one wait are about `tolerance` x the flows of a solve, so an end
//    waits only if the last solve of the ended flow re-solved at least `min_batch` / `tolerance`
//    flows. While an end waits, the flows it would speed up keep their rates, which stay feasible
//    (an end only frees capacity). The error is capacity left idle: on each link at most the ended
//    flow's rate for its wait, that is at most `tolerance` x its bytes. Summed over the flows a
//    link carries, a link idles for waiting at most `tolerance` x its bytes / its capacity,
//    `tolerance` x its busy time. A link that is the bottleneck of a phase therefore ends it at most
//    that much later; delays add up along chains of dependent transfers, and max-min sharing can
//    pass a flow's delay on to others, so the bound on a layer's or a GPU's finish time is
//    measured, not proved: tests/engine/flow_fast_path_test.cpp (random flow sets and random layers
//    against the exact mode) and docs/performance.md, which also says where epochs are faster.
//
//  * per_link: not max-min. Each link shares itself equally among its flows, and a flow ends when
//    each of its links has carried its bytes (PerLinkSharing, per_link_sharing.hpp, which says what
//    it gives up). A flow's end touches only its own links, so a wide all-to-all costs about EP^2
//    rather than EP^4; its error against exact is measured in tests/engine/per_link_sharing_test.cpp
//    and docs/performance.md.
//
//  * local: max-min inside groups of links, the groups on their own. Topology puts each GPU's sending
//    links in one group and its receiving links in another, so a flow the SM limit holds back leaves
//    its share of the port to the port's other flows, as under max-min, while an all-to-all still
//    costs about EP^2 (GroupSharing, group_sharing.hpp, which says what is left out).
//
//  * coupled: local, and in the groups named by couple_group_of each flow is held to the rate the
//    group before it on its route gives it, so that a receiving side never runs ahead of its sender
//    (group_coupling.cpp). It costs more the more groups follow (docs/performance.md, "coupled").
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/end_hints.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/group_sharing.hpp"
#include "sim/engine/per_link_sharing.hpp"

namespace epsim {

using LinkId = int;
using FlowId = std::int64_t;

class FlowNetwork {
 public:
  /// Called when the last byte of a flow arrives: (time the flow was started, time it ended).
  using DoneCallback = std::function<void(Time_ps started_ps, Time_ps ended_ps)>;
  static constexpr double kNoRateCap = std::numeric_limits<double>::infinity();

  enum class SharingMode : std::uint8_t { exact, epochs, per_link, local, coupled };
  /// How rates are re-solved after flows end (see the top of this file).
  struct Sharing {
    SharingMode mode = SharingMode::exact;
    /// epochs: the re-solve after a flow ends waits at most this fraction of that flow's bytes / its
    /// last rate. In [0, 1); 0 re-solves at once, as exact.
    double tolerance = 0.001;
    /// epochs: an end waits only if the last solve of the ended flow re-solved at least
    /// min_batch / tolerance flows (>= 0; 0: every end waits).
    double min_batch = 1;
  };

  explicit FlowNetwork(EventQueue& queue);

  /// Chooses the sharing mode, before the first flow starts (links may already be there). Throws
  /// std::invalid_argument for a tolerance outside [0, 1) or a negative min_batch, and
  /// std::logic_error once a flow has started.
  void set_sharing(const Sharing& sharing);
  const Sharing& sharing() const { return sharing_; }
  /// Rate re-solves run so far.
  std::uint64_t solves() const { return solves_; }
  /// Flows those re-solves covered, summed over the re-solves (the solver's work).
  std::uint64_t flows_resolved() const { return flows_resolved_; }
  /// Times a flow's rate actually moved (the least any solver that keeps every flow's exact
  /// max-min rate must do), summed over the re-solves.
  std::uint64_t rate_changes() const { return rate_changes_; }

  /// Makes room for `flows` flows at once, so that a wide exchange's hundreds of thousands of flows do
  /// not move the flow table each time it doubles.
  void reserve_flows(std::size_t flows);

  /// Adds a link; `capacity_GBps` > 0. Links given the same `group` >= 0 are solved together in local
  /// mode (a GPU's sending links, its receiving links); the other modes ignore it.
  LinkId add_link(std::string name, double capacity_GBps, int group = -1);
  /// coupled mode: the group of `link` follows (GroupSharing::couple_group_of). Before the first
  /// flow; std::logic_error in another mode.
  void couple_group_of(LinkId link);
  /// coupled mode: whether the group of `link` follows; false in the other modes.
  bool group_follows(LinkId link) const;
  std::size_t link_count() const;
  const std::string& link_name(LinkId link) const;
  double link_capacity_GBps(LinkId link) const;

  /// Starts a flow now: after `latency_ps` it moves `bytes` (> 0, or 0 for a pure-latency message)
  /// over `links` (may be empty: then only the latency and the cap apply) at its max-min fair share,
  /// never above `rate_cap_GBps`. `on_done` runs at completion. A flow over no links with no cap
  /// completes after its latency. `end_hints` name what `on_done` reads first
  /// (end_hints.hpp): the coarse models (per_link, local, coupled) request it a little before the
  /// call; it changes no result.
  FlowId start_flow(const std::vector<LinkId>& links, double bytes, Time_ps latency_ps,
                    double rate_cap_GBps, DoneCallback on_done, EndHints end_hints = {});

  /// Current rate of an active flow in GB/s (0 while it is still in its latency phase, and for a
  /// finished or unknown id). Rates are re-solved by an event at the current time, once for all the
  /// changes of that instant: a flow that entered its transfer phase reads 0 until that event ran.
  /// In epochs mode the re-solve after a flow ends may come later (see the top of this file).
  double flow_rate_GBps(FlowId flow) const;
  /// Flows started and not yet completed (latency and transfer phases).
  std::size_t active_flows() const;

  /// Bytes that have crossed `link` so far (for utilisation = bytes / (capacity * time)).
  double link_bytes(LinkId link) const;
  /// Total time during which `link` carried at least one flow in its transfer phase.
  Time_ps link_busy_ps(LinkId link) const;

 private:
  enum class FlowState : std::uint8_t { kFree, kLatency, kTransfer };

  /// One link a flow crosses.
  struct Hop {
    LinkId link;
    std::int32_t pos;  ///< index of this hop in the link's flow list
  };
  /// What the solver does not touch.
  struct Flow {
    DoneCallback on_done;
    std::uint32_t hop_begin = 0;     ///< this slot's segment of hop_pool_
    std::uint32_t hop_capacity = 0;
    double bytes = 0;
    double remaining_bytes = 0;  ///< as of last_update_ps
    Time_ps started_ps = 0;
    Time_ps last_update_ps = 0;
    EventQueue::Handle event = 0;  ///< end of latency, then completion
    std::uint32_t generation = 1;
    std::uint32_t solved_with = 0;  ///< epochs: flows its last solve re-solved (itself included)
    FlowState state = FlowState::kFree;
  };
  /// What the solver reads for every flow it meets, packed apart from the rest for the cache.
  struct FlowHot {
    double rate = 0;      ///< bytes per ps
    double cap = 0;       ///< bytes per ps, +inf when uncapped
    double new_rate = 0;  ///< solver output
    std::uint32_t mark = 0;
    /// Bottleneck hops, +1 when the flow runs at its cap: 0 means nothing justifies its rate.
    std::int32_t bottlenecks = 0;
    std::uint32_t hop_begin = 0;  ///< copy of Flow::hop_begin, to reach the hops in one step
    std::uint16_t hop_count = 0;
    bool frozen = false;
    bool at_cap = false;
  };
  /// A flow's hops, contiguous in hop_pool_.
  struct HopSpan {
    Hop* first;
    Hop* last;
    Hop* begin() const { return first; }
    Hop* end() const { return last; }
    bool empty() const { return first == last; }
  };
  /// A flow on a link's list.
  struct FlowRef {
    std::int32_t flow;  ///< slot
    std::int32_t hop;   ///< index into that flow's hops
    /// The link is saturated and this flow has the largest rate on it: the link justifies the
    /// flow's rate in the max-min sense.
    bool bottleneck;
  };
  /// Laid out for the solver: what collecting, filling and checking a region read of each link is
  /// in its first cache line, what the constraint checks on other links read in its second, the
  /// rest after. A re-solve at wide EP walks thousands of links in scattered order, and these fields
  /// were spread over three lines.
  struct alignas(64) Link {
    std::vector<FlowRef> flows;   ///< flows in their transfer phase
    double capacity = 0;          ///< bytes per ps
    double load = 0;              ///< sum of their rates, bytes per ps
    // Solver scratch.
    double residual = 0;
    std::uint32_t mark = 0;     ///< == epoch: a constraining link of the current solve
    std::uint32_t scanned = 0;  ///< == epoch: its residual and unfrozen count are set
    int unfrozen = 0;
    bool saturated = false;
    std::uint32_t watch = 0;  ///< == epoch: an unsaturated link some re-solved flow crosses
    double watch_load = 0;
    double bytes = 0;             ///< carried up to bytes_at_ps
    Time_ps bytes_at_ps = 0;
    Time_ps busy_ps = 0;          ///< closed busy periods
    Time_ps busy_since_ps = 0;    ///< start of the open one, if any flow is on the link
    int group = -1;               ///< local mode's link group
    double capacity_GBps = 0;
    std::string name;
  };
  /// Progressive-filling agenda entry: a lower bound on the level at which a link saturates
  /// (id >= 0), or the level at which a flow reaches its cap (id = ~slot).
  struct Level {
    double level;
    std::int32_t id;
  };

  HopSpan hops(std::int32_t slot);
  const Flow* find(FlowId id) const;
  FlowId id_of(std::int32_t slot) const;
  const Link& link_at(LinkId link) const;
  void advance(Link& link);

  void end_latency(std::int32_t slot);
  void enter_transfer(std::int32_t slot);
  void complete(std::int32_t slot);
  void detach(std::int32_t slot);
  void release(std::int32_t slot);
  void set_rate(std::int32_t slot, double rate);
  void schedule_completion(std::int32_t slot);
  /// Runs the solve at `at_ps` (>= now), or earlier if one is already due before.
  void request_solve(Time_ps at_ps);
  /// When the re-solve after the end of the flow in `slot`, at `rate` (bytes/ps), is due.
  Time_ps solve_due_ps(std::int32_t slot, double rate) const;
  void solve();
  void collect_region(double threshold);
  void add_to_region(std::int32_t slot);
  bool fill_region();
  void freeze(std::int32_t slot, double rate);
  bool watched_links_fit();
  bool passing_flows_fit();
  void refresh_bottlenecks();

  EventQueue& queue_;
  std::vector<Link> links_;
  std::vector<Flow> flows_;
  std::vector<FlowHot> hot_;  ///< parallel to flows_
  /// Hops of all flows, a segment per slot (reused by the slot's next flows while they fit), so that
  /// the solver reaches them without a separate allocation per flow.
  std::vector<Hop> hop_pool_;
  std::vector<std::int32_t> free_flows_;
  std::size_t active_ = 0;
  Sharing sharing_;
  std::uint64_t solves_ = 0;
  std::uint64_t flows_resolved_ = 0;
  std::uint64_t rate_changes_ = 0;
  /// `f` applied to the coarse model in use (per_link or local), or nothing in the exact and epochs
  /// modes, which this class solves itself. The two models have the same interface but no base
  /// class: a virtual call on every flow's start is what that avoids.
  template <class F>
  auto coarse(F&& f) const -> std::optional<decltype(f(std::declval<PerLinkSharing&>()))> {
    if (per_link_) return f(*per_link_);
    if (groups_) return f(*groups_);
    return std::nullopt;
  }

  /// per_link mode: every flow and the links' loads live there (links_ keeps names and capacities).
  std::unique_ptr<PerLinkSharing> per_link_;
  /// local and coupled modes: the same, in GroupSharing.
  std::unique_ptr<GroupSharing> groups_;
  bool flows_started_ = false;

  // Changes since the last solve, which runs once per timestamp as an event at now() (in epochs
  // mode, after a flow ends, possibly later).
  EventQueue::Handle solve_event_ = 0;
  Time_ps solve_at_ps_ = 0;  ///< when solve_event_ runs
  /// Links that gained a flow, or lost one while saturated.
  std::vector<LinkId> seeds_;
  std::vector<std::int32_t> roots_;    ///< flows that entered, or lost their last bottleneck
  bool arrivals_ = false;              ///< some flow entered its transfer phase
  double removed_min_rate_ = std::numeric_limits<double>::infinity();  ///< smallest rate that left

  // Solver scratch, kept to avoid reallocations.
  std::uint32_t epoch_ = 0;
  std::vector<LinkId> forced_;               ///< links constraining the solve whatever their state
  std::vector<LinkId> region_links_;         ///< constraining links
  std::vector<std::int32_t> region_flows_;   ///< flows being re-solved
  std::vector<LinkId> watch_links_;
  std::vector<Level> agenda_;
};

}  // namespace epsim

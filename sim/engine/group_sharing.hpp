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
//
// Coupled (group_coupling.cpp): the groups named by couple_group_of follow. There a flow's class is
// also keyed by the class it belongs to in the group before it on its route (its leader), and is
// capped at the leader's rate, so that a receiving side moves only what its sender sends (a relay's
// sides chain so). A leader whose rate moves tells its followers, and the followers its move changes
// by more than a tolerance (5%) re-solve, in a cascade; the others at their next event. A following
// group's classes move their clocks only when their rates or their ends change (fold_clock), and its
// next end is found among its classes' ends kept side by side (end_at): an event or a cascade's
// re-solve with room touches the classes that end or move, not the hundreds it holds; one without
// room lets the classes its senders hold take their senders' moves while its link-bound classes
// keep their level, within a bound (recap_held), until its next event solves it in full. This closes
// local's early error where skewed traffic meets, at the cost of a following group's many classes
// (one per sending GPU) and of the cascade; a tenth of the GPUs, the busiest, is enough on the
// layers measured (docs/performance.md, "coupled").
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
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
  /// A flow is done in a group once its end is within this many bytes of its class's clock (the
  /// bound of FlowNetwork and PerLinkSharing).
  static constexpr double kDoneBytes = 1e-6;
  /// Floor on a solved rate (bytes/ps), reachable only through rounding on a full link; it gives
  /// every flow a finite end.
  static constexpr double kMinRate = 1e-12;
  /// A following class's end_at (GroupCoupling) while it has no flows.
  static constexpr Time_ps kNoEnd = std::numeric_limits<Time_ps>::max();

  /// `coupled`: each group a flow crosses after its first is capped at the rate the group before
  /// it on the route gives the flow (group_coupling.cpp); otherwise the groups run on their own.
  explicit GroupSharing(EventQueue& queue, bool coupled = false);
  /// coupled: the group of `link` (add_link's) follows: each flow's class there is capped at the
  /// rate of the group before it on the flow's route. Before the first flow; other groups run on
  /// their own, as under local.
  void couple_group_of(int link);
  /// Whether the group of `link` follows (std::out_of_range for an unknown link).
  bool follows(int link) const;

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
                    DoneCallback&& on_done, EndHints end_hints = {});

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
    /// Bytes each of its flows received, as of the group's clock_at_ps (in a following group, as of
    /// the class's own GroupCoupling::clock_at).
    double clock_bytes = 0;
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
  /// A class of one group, named from outside it.
  struct ClassRef {
    std::int32_t group;
    std::int32_t cls;
  };
  /// A class that follows, as its leader lists it, with whether it has flows (whether it is in its
  /// group's GroupCoupling::active), kept here so that a leader's move passes over its idle
  /// followers without reading their records. Eight bytes: a leader's move reads its whole list.
  struct FollowerRef {
    std::int32_t group;
    std::int32_t cls;  ///< ~cls (negative) while the class has no flows
    bool active() const { return cls >= 0; }
    std::int32_t index() const { return cls >= 0 ? cls : ~cls; }
  };
  static_assert(sizeof(FollowerRef) == 8, "a follower's entry is two words");
  /// A following class's leader, and its place in the leader's followers.
  struct LeaderLink {
    ClassRef leader{-1, -1};
    std::uint32_t index = 0;
  };
  /// coupled: what a class follows and what follows it, parallel to Group::classes.
  struct Coupling {
    /// Its leader's rate as the leader last told it (bytes per ps); +inf while the leader has no
    /// flows. Kept here so that a solve reads its own group alone. Told while the class has flows;
    /// read from the leader when flows join it (class_joined).
    double leader_rate = std::numeric_limits<double>::infinity();
    /// A following class's rate as last solved (its Class's, copied): its leader's tell_class
    /// reads it beside leader_rate, where the class's own line, in another group, cost a miss
    /// for each follower of every move.
    double rate = 0;
    bool leader_bound = false;         ///< its rate is its leader's, as last solved
    /// A leading class that gained flows since its group's last solve after it had none: its
    /// followers are told its rate after that solve (keep_rates, moved_by), whatever it was before.
    bool refilled = false;
  };
  // A solve reads the record of each class with flows: 24 bytes, so that eight records take three
  // lines. (The classes that follow it are apart, in GroupCoupling::followers: the receivers' classes,
  // which a solve reads, lead nothing.)
  static_assert(sizeof(Coupling) <= 24, "a coupling record stays within 24 bytes");
  /// coupled: a group's coupling, apart from Group so that local's groups stay as small as they were.
  struct GroupCoupling {
    // Its flags first, and its per-link arrays last: every solve and event of a following group
    // reads the flags, and its few solves that read the arrays read little else of it. (Whether a
    // group follows or leads is in Group.)
    bool queued = false;              ///< waiting in the cascade's list
    /// Its last solve found room on every link for every class at its cap, and since then the flows
    /// that left gave their demand back (room_left) and those that entered added theirs
    /// (room_joined): a solve for moved caps and entered flows alone then moves those classes, if
    /// every link still has room (recap_in_room).
    bool room = false;
    /// Its last solve found no room and no flow has entered or left since (recap_held): each
    /// link's level where it filled in that solve (fill_at, +inf where it did not), below which a
    /// class its leader holds stays held when its leader moves.
    bool held = false;
    std::uint32_t cascade_visits = 0; ///< re-solves in the cascade now running
    std::uint32_t cascade_stamp = 0;  ///< the cascade those were counted in
    std::vector<Coupling> classes;    ///< parallel to Group::classes
    /// Each class's followers: the classes whose leader it is, parallel to Group::classes.
    std::vector<std::vector<FollowerRef>> followers;
    /// Its classes without a leader (coupled_class_of finds the others through their leader).
    std::vector<std::int32_t> roots;
    /// Each class's leader ({-1, -1} for a root), parallel to classes: read when the class gains
    /// its first flow or loses its last, to mark it in its leader's followers.
    std::vector<LeaderLink> leader_of;
    /// A following group's classes with flows, by class index. A following group keeps a class per
    /// sending GPU for the whole layer (66 at EP 512 near-uniform), of which a solve finds about 38
    /// with flows: its events and solves pass over these alone, in the order of the full list, so
    /// that ties and sums come out as over every class.
    std::vector<std::int32_t> active;
    /// A following group's classes' earliest ends (a copy of each class's ends.front(), kNoFront
    /// without flows), parallel to Group::classes. Its event and its schedule compare every active
    /// class's earliest end with its clock, and its schedule names that end's flow: in the classes'
    /// ends arrays that is a line each, hundreds at wide EP, where here they sit side by side. Kept
    /// by refresh_front after every pop and batch.
    std::vector<LinkEnd> front_at;
    /// A following group's classes' clocks run on their own (`fold_clock`): each class's clock_bytes
    /// is as of its clock_at, and end_at is when its earliest end comes at its rate (kNoEnd
    /// without flows), both parallel to Group::classes. A class's clock moves only when its rate
    /// or its ends change, so an event or a cascade's re-solve touches the classes that end or
    /// move, and finds the next end in end_at, side by side, where moving every class's clock was
    /// a line each, hundreds at wide EP.
    std::vector<Time_ps> clock_at;
    std::vector<Time_ps> end_at;
    /// The class with flows whose end_at comes first (the lowest index among ties, as a pass over
    /// `active` finds it; -1 when none has flows), valid while first_known. A cascade re-solves a
    /// following group half a million times in a wide layer, each moving a few classes: note_end
    /// keeps this up to date from those moves, so that its schedule passes over the group's
    /// classes only when the first one's end moved later.
    std::int32_t first = -1;
    bool first_known = false;
    /// With room or held: classes whose leader rate moved since the last solve (with room, also
    /// those that flows joined).
    std::vector<std::int32_t> recapped;
    double demand[kMaxGroupLinks] = {};   ///< with room: what its classes take from each link
    double fill_at[kMaxGroupLinks] = {};  ///< with held (above)
    /// With held: what the held classes' moves since that solve added to or took from each link,
    /// in bytes per ps, summed without sign; the link-bound classes did not move with them.
    double drift[kMaxGroupLinks] = {};
  };

  struct Group {
    std::vector<LinkState> links;     ///< bit b of a class's mask is links[b]
    std::vector<Class> classes;       ///< never removed: a group sees the same few again and again
    Time_ps clock_at_ps = 0;
    EventQueue::Handle event = 0;     ///< its next end
    std::int32_t next_slot = -1;      ///< the flow of that end, as scheduled
    /// Where that end is kept, in its class's ends (in a following group, which keeps a copy in
    /// front_at, its class's line, read first at its event): requested with the flow's entry when
    /// the event comes, so that the two misses overlap (it was read only once the class's line had
    /// come in). Only requested, never read: an address left stale by a change to the class is
    /// harmless.
    const void* next_end = nullptr;
    /// Its links carrying flows, as last solved (bits of links): the others carry nothing, and
    /// an event of a group whose one class takes two of its four links reads those two alone.
    std::uint32_t loaded = 0;
    bool dirty = false;               ///< joined by flows entering now; solved once, after them
    /// coupled: its classes follow the groups before them (couple_group_of). Here, not in
    /// GroupCoupling: every event of every group asks, and the coupling record's line cost a miss
    /// for the nine groups in ten that do not follow.
    bool follows = false;
    bool leads = false;               ///< coupled: some class of it has followers
    /// coupled: which of its first kLeadBits classes have followers (bit c for class c). A leading
    /// group's solve reads the coupling records of these alone: a sending GPU's group leads as soon
    /// as one of its receivers follows (nearly every sender at EP 1,024, whatever coupled_gpus), and
    /// reading every class's record before and after each solve cost a miss each.
    std::uint32_t leading = 0;
  };
  /// Classes past this index are taken to have followers (Group::leading has a bit for each below).
  static constexpr std::int32_t kLeadBits = 32;
  /// Whether class c of the group may have followers: its bit, or an index past the bits.
  static bool may_lead(const Group& g, std::int32_t c) { return c >= kLeadBits || (g.leading >> c & 1u) != 0; }
  /// Calls `f(c)` on each class of the group that may have followers, in class order: its bits while
  /// it holds no more classes than kLeadBits, every class beyond.
  template <class F>
  static void for_each_leading(const Group& g, F&& f) {
    if (g.classes.size() <= static_cast<std::size_t>(kLeadBits)) {
      for (std::uint32_t m = g.leading; m != 0; m &= m - 1) f(static_cast<std::size_t>(__builtin_ctz(m)));
      return;
    }
    for (std::size_t c = 0; c < g.classes.size(); ++c) f(c);
  }
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
  /// The first of the group's classes crossing `mask` under `cap`, -1 if none (class_of's search, and
  /// coupled_class_of's in a group that does not follow).
  static std::int32_t find_class(const Group& group, std::uint32_t mask, double cap) {
    for (std::size_t c = 0; c < group.classes.size(); ++c) {
      const Class& k = group.classes[c];
      if (k.mask == mask && k.cap == cap) return static_cast<std::int32_t>(c);
    }
    return -1;
  }
  /// A following class's front_at while it has no flows.
  static constexpr LinkEnd kNoFront{std::numeric_limits<double>::infinity(), 0, -1};
  /// A following group's front_at (GroupCoupling), or null for a group that keeps none.
  LinkEnd* fronts_of(std::int32_t group) {
    if (!coupled_ || !groups_[static_cast<std::size_t>(group)].follows) return nullptr;
    return coupling_[static_cast<std::size_t>(group)].front_at.data();
  }
  /// Class c's earliest end, which it must have: from `fronts` (fronts_of) where the group keeps
  /// them, else from its ends.
  static double earliest_end(const LinkEnd* fronts, const Group& group, const Class& c) {
    return fronts != nullptr ? fronts[&c - group.classes.data()].at_bytes : c.ends.front().at_bytes;
  }
  /// Class c's entry in `fronts` (fronts_of), if any, after its ends changed.
  static void refresh_front(LinkEnd* fronts, const Group& group, const Class& c) {
    if (fronts == nullptr) return;
    fronts[&c - group.classes.data()] = c.ends.empty() ? kNoFront : c.ends.front();
  }
  // ---- coupled (group_coupling.cpp) ----
  /// The class of `group` for a flow crossing `mask` under `cap` that follows `leader`.
  std::int32_t coupled_class_of(std::int32_t group, std::uint32_t mask, double cap, ClassRef leader);
  /// Max-min over the group's classes under their coupled caps (progressive filling, each run of
  /// caps below the level at once), then its links' loads; notes which classes their leaders hold.
  void solve_coupled(std::int32_t group);
  /// Calls `f` on each class of the group that may have flows, in class order: a following group's
  /// active list, every class elsewhere (local's groups hold a handful).
  template <class F>
  void for_each_class(std::int32_t group, F&& f) {
    Group& g = groups_[static_cast<std::size_t>(group)];
    if (coupled_ && g.follows) {
      for (const std::int32_t c : coupling_[static_cast<std::size_t>(group)].active)
        f(g.classes[static_cast<std::size_t>(c)]);
      return;
    }
    for (Class& c : g.classes) f(c);
  }
  /// coupled: a solve of a following group whose last solve found room, and whose caps moved or
  /// which flows joined since: the classes named take their caps if every link still has room
  /// (true), else nothing changes and the full solve runs (false).
  bool recap_in_room(std::int32_t group);
  /// coupled: a solve of a following group without room whose last solve was a full one and whose
  /// held classes' caps alone moved since: they take their new caps if those stay below their
  /// links' levels (true), else the full solve runs (false).
  bool recap_held(std::int32_t group);
  /// Following class c, with flows, takes its cap as its rate (a recap's move of one class).
  void take_cap(Group& g, GroupCoupling& gc, std::int32_t c);
  /// Following class c's solve is done: if its group leads and c's rate is not the one its
  /// followers were last told (its rate before the solve, copied in its Coupling; -1 if it
  /// refilled), c goes on moved_ with that rate in old_rates_. A solve calls it in class order.
  void moved_by(const Group& g, GroupCoupling& gc, std::int32_t c) {
    if (!g.leads) return;  // (nor does any class of it refill: coupled_join)
    Coupling& cp = gc.classes[static_cast<std::size_t>(c)];
    const double told = cp.refilled ? -1 : cp.rate;
    cp.refilled = false;
    if (g.classes[static_cast<std::size_t>(c)].rate == told) return;
    old_rates_[static_cast<std::size_t>(c)] = told;
    moved_.push_back(c);
  }
  /// A recap's list in class order, each class once.
  static void once_each(std::vector<std::int32_t>& classes);
  /// Following class c's cap: its own or its leader's, whichever is lower (a recap's new rate).
  static double cap_of(const GroupCoupling& gc, std::size_t c, const Class& k) {
    return std::max(std::min(k.cap, gc.classes[c].leader_rate), kMinRate);
  }
  /// A following group's class `c`: its clock moved to now at its rate (before the rate or its
  /// ends change), and its next end worked out again (after). In the header: the following solve
  /// runs both for each of its classes whose rate moves, and the event, in another file, for each
  /// that ends.
  void fold_clock(Group& g, GroupCoupling& gc, std::int32_t c) const {
    const Time_ps now = queue_.now_ps();
    Time_ps& at = gc.clock_at[static_cast<std::size_t>(c)];
    // A class without flows keeps its clock where it stopped, as a local group's does.
    Class& k = g.classes[static_cast<std::size_t>(c)];
    if (now != at && !k.ends.empty()) k.clock_bytes += k.rate * static_cast<double>(now - at);
    at = now;
  }
  void reckon_end(Group& g, GroupCoupling& gc, std::int32_t c) const {
    const std::size_t ci = static_cast<std::size_t>(c);
    const Class& k = g.classes[ci];
    if (k.ends.empty()) {
      note_end(gc, c, kNoEnd);
      return;
    }
    const double left = gc.front_at[ci].at_bytes - k.clock_bytes - kDoneBytes;
    note_end(gc, c, gc.clock_at[ci] + (left > 0 ? checked_ceil_ps(left / k.rate, "a flow's transfer time") : 0));
  }
  /// Following class c's end_at set to `end`, and the group's first class (GroupCoupling::first)
  /// kept: a class whose end comes before the first's (or with it, at a lower index) is first
  /// now; the first class's end moved later leaves the first unknown, for a pass to find.
  static void note_end(GroupCoupling& gc, std::int32_t c, Time_ps end) {
    Time_ps& at = gc.end_at[static_cast<std::size_t>(c)];
    if (gc.first_known) {
      if (c == gc.first) {
        if (end > at) gc.first_known = false;
      } else if (end != kNoEnd) {
        // (With no first, first_at is kNoEnd, which any end is before.)
        const Time_ps first_at = gc.first < 0 ? kNoEnd : gc.end_at[static_cast<std::size_t>(gc.first)];
        if (end < first_at || (end == first_at && c < gc.first)) gc.first = c;
      }
    }
    at = end;
  }
  /// A following group with room: one flow of class `c` left (its demand and its links settled).
  void room_left(Group& g, GroupCoupling& gc, const Class& c);
  /// coupled: a flow is about to join class `cls` of group `gi`, which follows or leads (out of
  /// line: local's entries stay as they were).
  void coupled_join(Group& g, std::int32_t gi, std::int32_t cls);
  /// A following group with room: one flow joins class `c` (its demand and its links settled; its
  /// class is named for the solve, which takes its cap).
  void room_joined(Group& g, GroupCoupling& gc, std::int32_t c);
  /// coupled: a following group with room (GroupCoupling::room) notes a class whose leader rate
  /// was written or that a flow joined.
  static void note_recapped(GroupCoupling& gc, std::int32_t cls);
  /// coupled: a following group's class gains its first flow (coupled_join).
  void class_joined(std::int32_t group, std::int32_t cls);
  /// coupled: a following class's mark in its leader's followers (FollowerRef::active).
  void mark_in_leader(const GroupCoupling& gc, std::int32_t cls, bool active);
  /// coupled: a following group's classes that lost their last flow in its event (emptied_) leave
  /// its active list.
  void drop_emptied(std::int32_t group);
  /// Before a leading group's solve: its classes' rates (-1 for a class without flows, or one
  /// refilled since the last solve). A group that also follows has its solve list the classes
  /// that moved instead (moved_by).
  void keep_rates(std::int32_t group);
  /// After it: each class whose rate moved tells its followers, and queues those it changes.
  void tell_followers(std::int32_t group);
  /// tell_followers for class `c` of the group, whose followers were last told `told`.
  void tell_class(const Group& g, const GroupCoupling& gc, std::size_t c, double told);
  /// After a leading group's event: the followers of its classes that lost their last flow there
  /// (emptied_) are told that their leader has sent everything, and those with flows left re-solve.
  void release_followers(std::int32_t group);
  /// Re-solves the followers of classes whose rate moved in the groups solved since the last call,
  /// and theirs in turn, until none moves (a group at most kCascadeVisits times).
  void cascade();
  /// After its latency: the flow joins its groups' classes (FlowTable).
  void enter_transfer(std::int32_t slot);
  /// Once the flows due at one instant entered: each group they joined puts its classes' batches in
  /// order, re-solves and moves its event, once (FlowTable).
  void settle_entered();
  /// Moves the group's clocks (and its links' bytes) to now at the rates last solved.
  void advance(std::int32_t group);
  /// Re-solves the group: solve_local, or in a following group solve_coupled; a leading group then
  /// tells its followers.
  void solve(std::int32_t group);
  /// Max-min over the group's classes (progressive filling), then its links' loads and busy times.
  void solve_local(std::int32_t group);
  /// Progressive filling's next link level: the least residual / unfrozen flows over the links
  /// that still carry unfrozen flows, and that link in `full` (kept when none does).
  static double fill_level(const double* residual, const double* unfrozen, std::size_t links, int& full) {
    double level = std::numeric_limits<double>::infinity();
    for (std::size_t b = 0; b < links; ++b) {
      if (unfrozen[b] > 0 && residual[b] / unfrozen[b] < level) {
        level = residual[b] / unfrozen[b];
        full = static_cast<int>(b);
      }
    }
    return level;
  }
  /// The group's links' loads, flow counts and busy periods from its classes' rates (solve's end).
  void settle_links(std::int32_t group);
  /// Class c's flows and their load added to per-link sums (settle_links'; the following solve sums
  /// its classes by mask instead, MaskSums).
  static void add_load(const Class& c, double* load, std::uint32_t* flows) {
    for (std::uint32_t m = c.mask; m != 0; m &= m - 1) {
      const int b = __builtin_ctz(m);
      load[b] += c.ends.size() * c.rate;
      flows[b] += c.ends.size();
    }
  }
  /// The group's links set to those sums (set_link), and its loaded mask.
  void set_links(Group& g, const double* load, const std::uint32_t* flows) const {
    g.loaded = 0;
    const std::size_t nlinks = g.links.size();
    for (std::size_t b = 0; b < nlinks; ++b) {
      set_link(g.links[b], load[b], flows[b]);
      if (flows[b] > 0) g.loaded |= 1u << b;
    }
  }
  /// A link's new load and flow count, opening or closing its busy period.
  void set_link(LinkState& link, double load, std::uint32_t flows) const;
  void schedule_group(std::int32_t group);
  void group_event(std::int32_t group);

  EventQueue& queue_;
  bool coupled_ = false;
  FlowTable<GroupSharing> table_;
  std::vector<LinkPlace> links_;
  std::vector<Group> groups_;
  std::vector<std::int32_t> group_of_key_;  ///< add_link's group number -> index in groups_
  std::vector<FlowPath> paths_;  ///< parallel to the table's slots
  std::vector<Segment> seg_pool_;  ///< segments of flows crossing more than kInlineSegments groups
  std::vector<std::int32_t> dirty_;       ///< groups joined by the flows entering at this instant
  std::vector<std::int32_t> ended_;       ///< scratch of group_event
  std::vector<std::int32_t> emptied_;     ///< coupled, group_event's: classes whose last flow ended
  std::vector<LinkEnd> settle_scratch_;
  std::vector<Segment> seg_scratch_;         ///< start_flow's: the groups a route crosses
  std::vector<std::uint32_t> mask_scratch_;  ///< start_flow's: the links a route takes in each group
  std::vector<GroupCoupling> coupling_;     ///< parallel to groups_
  /// keep_rates's and moved_by's, for tell_followers: the rates before a solve (as many as the most
  /// classes of a group: coupled_class_of)
  std::vector<double> old_rates_;
  /// A group that follows and leads: the classes its solve moved, or that refilled before it, in
  /// class order (moved_by), for its tell_followers, in the same call of solve(). Its tell reads
  /// these alone: a pass before the solve and another after it read every class with flows,
  /// though a recap moves a few (a relay of weight syncs has hundreds of classes with flows:
  /// docs/performance.md, "A relay tells what moved").
  std::vector<std::int32_t> moved_;
  std::vector<double> caps_;                ///< solve_coupled's: each class's cap
  std::vector<std::int32_t> unfrozen_scratch_;  ///< solve_coupled's: the classes not yet frozen
  std::vector<std::int32_t> worklist_;      ///< cascade's: groups to re-solve
  std::uint32_t cascade_stamp_ = 0;
};

}  // namespace epsim

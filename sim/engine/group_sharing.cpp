// Group max-min sharing (the model and why: group_sharing.hpp).
//
// A class's virtual clock counts the bytes each of its flows has received: it runs at the class's
// rate while the class has flows and stands still while it has none. A flow that joins when the clock
// reads v and has b bytes ends in that group when the clock reads v + b, whatever the rate does
// meanwhile, so its end is never recomputed: a change in the group re-solves the rates of its few
// classes and moves the group's next end, one event.
#include "sim/engine/group_sharing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace epsim {

namespace {

/// A burst of flows' starts requests the slots of the next flow and of the one this many after it.
constexpr std::size_t kStartAhead = 3;

constexpr double kInf = std::numeric_limits<double>::infinity();

/// A flow that ends on entering, its one bound: nothing to move, or no group and no cap to bound it.
bool ends_on_entering(double bytes, std::size_t groups, double cap) {
  return bytes <= GroupSharing::kDoneBytes || (groups == 0 && std::isinf(cap));
}

}  // namespace

GroupSharing::GroupSharing(EventQueue& queue, bool coupled)
    : queue_(queue), coupled_(coupled), table_(queue, *this) {}

void GroupSharing::reserve_flows(std::size_t flows) {
  table_.reserve(flows);
  paths_.reserve(flows);
}

void GroupSharing::add_link(double capacity_GBps, int group) {
  std::int32_t index = static_cast<std::int32_t>(groups_.size());
  if (group >= 0) {
    const std::size_t key = static_cast<std::size_t>(group);
    if (key >= group_of_key_.size()) group_of_key_.resize(key + 1, -1);
    if (group_of_key_[key] < 0) group_of_key_[key] = index;
    index = group_of_key_[key];
  }
  if (index == static_cast<std::int32_t>(groups_.size())) {
    groups_.emplace_back();
    if (coupled_) coupling_.emplace_back();
    groups_.back().clock_at_ps = queue_.now_ps();
  }
  Group& g = groups_[static_cast<std::size_t>(index)];
  if (g.links.size() >= static_cast<std::size_t>(kMaxGroupLinks)) {
    throw std::length_error("GroupSharing: more than " + std::to_string(kMaxGroupLinks) + " links in group " +
                            std::to_string(group));
  }
  LinkState state;
  state.capacity = GBps_to_bytes_per_ps(capacity_GBps);
  links_.push_back(LinkPlace{index, static_cast<std::int32_t>(g.links.size())});
  g.links.push_back(state);
}

std::int32_t GroupSharing::class_of(Group& group, std::uint32_t mask, double cap) {
  if (const std::int32_t found = find_class(group, mask, cap); found >= 0) return found;
  group.classes.emplace_back();
  group.classes.back().mask = mask;
  group.classes.back().cap = cap;
  return static_cast<std::int32_t>(group.classes.size() - 1);
}

GroupSharing::FlowId GroupSharing::start_flow(const std::vector<int>& links, double bytes, Time_ps latency_ps,
                                              double rate_cap_GBps, DoneCallback&& on_done,
                                              EndHints end_hints) {
  table_.check_latency(latency_ps);
  if (links.size() > kMaxFlowLinks)
    throw std::length_error("GroupSharing: a route of " + std::to_string(links.size()) + " links");
  const double cap = std::isinf(rate_cap_GBps) ? kInf : GBps_to_bytes_per_ps(rate_cap_GBps);
  // The groups the route crosses, each with the links of it the flow takes: a route is a few links,
  // so the groups are gathered by a scan of those found so far.
  // (On the stack for the routes of every transfer the replay makes; scratch vectors beyond.)
  constexpr std::size_t kShortRoute = 8;
  Segment short_found[kShortRoute];
  std::uint32_t short_mask[kShortRoute];
  Segment* found = short_found;
  std::uint32_t* mask = short_mask;
  if (links.size() > kShortRoute) {
    seg_scratch_.resize(links.size());
    mask_scratch_.resize(links.size());
    found = seg_scratch_.data();
    mask = mask_scratch_.data();
  }
  std::size_t count = 0;
  for (const int id : links) {
    const LinkPlace& l = links_[static_cast<std::size_t>(id)];
    std::size_t s = 0;
    while (s < count && found[s].group != l.group) ++s;
    if (s == count) {
      found[count++] = Segment{l.group, -1};
      mask[s] = 0;
    }
    mask[s] |= 1u << l.bit;
  }
  for (std::size_t s = 0; s < count; ++s) {
    found[s].cls = !coupled_ ? class_of(groups_[static_cast<std::size_t>(found[s].group)], mask[s], cap)
                   : coupled_class_of(found[s].group, mask[s], cap,
                                      s == 0 ? ClassRef{-1, -1} : ClassRef{found[s - 1].group, found[s - 1].cls});
  }
  const std::int32_t slot = table_.open(std::move(on_done), end_hints);
  if (paths_.size() < table_.slots()) paths_.emplace_back();
  FlowPath& path = paths_[static_cast<std::size_t>(slot)];
  // More groups than fit in the path spill to the pool; a slot keeps its room there for its later
  // flows (a route of still more groups abandons it for a larger one: slots rarely grow).
  if (count > kInlineSegments && count > path.spill_capacity) {
    path.spill_begin = static_cast<std::uint32_t>(seg_pool_.size());
    path.spill_capacity = static_cast<std::uint16_t>(count);
    seg_pool_.resize(seg_pool_.size() + count);
  }
  path.seg_count = static_cast<std::uint16_t>(count);
  std::copy(found, found + count, segments(path));
  path.bytes = bytes;
  path.cap = cap;
  path.entered = false;
  // Its bounds are counted now, while its table entry is being written anyway, so that entering
  // touches the path alone: one for a flow that ends on entering or crosses no group (its cap
  // bounds it), else one a group.
  table_[slot].bounds_left =
      ends_on_entering(bytes, count, cap) || count == 0 ? 1 : static_cast<std::uint16_t>(count);
  // A kernel starts its flows in a burst (a GPU's RDMA flows to every other node at once), each in a
  // slot freed long ago: the next one's entry and path are requested now, to be written next, and
  // those of the one kStartAhead after it (a start is a few hundred instructions, too few to hide
  // a miss requested one flow ahead).
  for (const std::size_t later : {std::size_t{0}, kStartAhead}) {
    if (const std::int32_t next = table_.next_free(later); next >= 0) {
      table_.prefetch(next);
      if (static_cast<std::size_t>(next) < paths_.size()) __builtin_prefetch(&paths_[static_cast<std::size_t>(next)], 1);
    }
  }
  const FlowId id = table_.id_of(slot);
  table_.wait(slot, latency_ps);
  return id;
}

void GroupSharing::settle_entered() {
  for (const std::int32_t gi : dirty_) {
    Group& g = groups_[static_cast<std::size_t>(gi)];
    g.dirty = false;
    LinkEnd* const fronts = fronts_of(gi);
    GroupCoupling* const gc = fronts != nullptr ? &coupling_[static_cast<std::size_t>(gi)] : nullptr;
    for_each_class(gi, [this, fronts, gc, &g](Class& c) {
      if (c.batch_begin == kNoBatch) return;
      c.ends.settle(c.batch_begin, settle_scratch_);
      c.batch_begin = kNoBatch;
      refresh_front(fronts, g, c);
      // A following class's end at the rate it has (its clock is at now: coupled_join), which
      // stands if the solve keeps that rate. A rate of 0 (a class that gained its first flows in
      // a group with room: room_joined) always moves, and the solve works the end out then.
      if (gc != nullptr && c.rate > 0) reckon_end(g, *gc, static_cast<std::int32_t>(&c - g.classes.data()));
    });
    solve(gi);
    schedule_group(gi);
  }
  dirty_.clear();
  if (coupled_) cascade();
}

void GroupSharing::enter_transfer(std::int32_t slot) {
  FlowPath& path = paths_[static_cast<std::size_t>(slot)];
  path.entered = true;
  if (ends_on_entering(path.bytes, path.seg_count, path.cap)) {
    table_.bound_met(slot);  // its one bound (start_flow)
    return;
  }
  const Segment* segs = segments(path);
  for (std::uint32_t s = 0; s < path.seg_count; ++s) {
    const Segment seg = segs[s];
    Group& g = groups_[static_cast<std::size_t>(seg.group)];
    if (!g.dirty) {  // its clocks move to now before its classes change
      advance(seg.group);
      g.dirty = true;
      dirty_.push_back(seg.group);
    }
    Class& c = g.classes[static_cast<std::size_t>(seg.cls)];
    if (coupled_ && (g.follows || g.leads)) coupled_join(g, seg.group, seg.cls);
    if (c.batch_begin == kNoBatch) c.batch_begin = c.ends.begin_batch();
    c.ends.add_to_batch(LinkEnd{c.clock_bytes + path.bytes, c.joined++, slot});
  }
  if (path.seg_count == 0) {  // no link: only its cap bounds it
    queue_.schedule_in(checked_ceil_ps((path.bytes - kDoneBytes) / path.cap, "a flow's transfer time"),
                       [this, slot] { table_.bound_met(slot); });
  }
}

void GroupSharing::advance(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  const Time_ps now = queue_.now_ps();
  if (now == g.clock_at_ps) return;
  const double dt = static_cast<double>(now - g.clock_at_ps);
  // A following group's classes keep their own clocks (fold_clock), moved when they change.
  if (fronts_of(gi) == nullptr) {
    for (Class& c : g.classes) {
      if (c.ends.empty()) continue;
      c.clock_bytes += c.rate * dt;
      // Its earliest end is read next (the group's event, its schedule), in a line of its own: a
      // miss at a wide layer's pace, requested here so that it overlaps the links' below.
      __builtin_prefetch(&c.ends.front());
    }
  }
  // (A link without flows has no load: its bytes stay as they are.)
  for (std::uint32_t m = g.loaded; m != 0; m &= m - 1) {
    LinkState& l = g.links[static_cast<std::size_t>(__builtin_ctz(m))];
    l.bytes += l.load * dt;
  }
  g.clock_at_ps = now;
}

void GroupSharing::solve(std::int32_t gi) {
  if (!coupled_) {
    solve_local(gi);
    return;
  }
  const Group& g = groups_[static_cast<std::size_t>(gi)];
  if (g.leads) keep_rates(gi);
  if (g.follows) solve_coupled(gi);
  else solve_local(gi);
  if (g.leads) tell_followers(gi);
}

void GroupSharing::solve_local(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  const std::size_t nlinks = g.links.size();
  // Most solves find one class with flows (a GPU's RDMA flows while its kernel sends across nodes):
  // progressive filling's one step is then written out, the same operations on the same numbers,
  // so the same rate, in well under half the general loop's instructions.
  Class* only = nullptr;
  std::size_t active = 0;
  for (Class& c : g.classes) {
    if (c.ends.empty()) continue;
    only = &c;
    ++active;
  }
  if (active == 1 && only->mask != 0) {
    const double n = only->ends.size();
    double level = kInf;
    for (std::uint32_t m = only->mask; m != 0; m &= m - 1) {
      const double share = g.links[static_cast<std::size_t>(__builtin_ctz(m))].capacity / n;
      if (share < level) level = share;
    }
    if (only->cap < level) level = only->cap;
    only->rate = std::max(level, kMinRate);
    // Its links carry its flows, the group's others none (those that carried some are emptied).
    const std::uint32_t flows = only->ends.size();
    const double load = flows * only->rate;
    for (std::uint32_t m = only->mask; m != 0; m &= m - 1)
      set_link(g.links[static_cast<std::size_t>(__builtin_ctz(m))], load, flows);
    for (std::uint32_t m = g.loaded & ~only->mask; m != 0; m &= m - 1)
      set_link(g.links[static_cast<std::size_t>(__builtin_ctz(m))], 0.0, 0);
    g.loaded = only->mask;
    return;
  }
  double residual[kMaxGroupLinks];
  double unfrozen[kMaxGroupLinks];  // flows of classes not yet frozen on each link
  for (std::size_t b = 0; b < nlinks; ++b) {
    residual[b] = g.links[b].capacity;
    unfrozen[b] = 0;
  }
  std::size_t left = 0;
  for (Class& c : g.classes) {
    if (c.ends.empty()) continue;
    ++left;
    c.rate = -1;  // not frozen yet
    const double n = c.ends.size();
    for (std::uint32_t m = c.mask; m != 0; m &= m - 1) unfrozen[__builtin_ctz(m)] += n;
  }
  // Progressive filling: every unfrozen class rises to the next level at which a link fills (its
  // classes freeze there) or a class reaches its cap. Each step freezes at least one class.
  while (left > 0) {
    int full = -1;
    double level = fill_level(residual, unfrozen, nlinks, full);
    Class* capped = nullptr;
    for (Class& c : g.classes) {
      if (!c.ends.empty() && c.rate < 0 && c.cap < level) {
        level = c.cap;
        capped = &c;
      }
    }
    level = std::max(level, kMinRate);
    for (Class& c : g.classes) {
      if (c.ends.empty() || c.rate >= 0) continue;
      if (capped != nullptr ? &c != capped : (c.mask >> full & 1u) == 0) continue;
      c.rate = level;
      --left;
      const double n = c.ends.size();
      for (std::uint32_t m = c.mask; m != 0; m &= m - 1) {
        const int b = __builtin_ctz(m);
        residual[b] = std::max(0.0, residual[b] - n * level);
        unfrozen[b] -= n;
      }
    }
  }
  settle_links(gi);
}

void GroupSharing::settle_links(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  // The links' loads and busy periods follow from the classes' rates.
  double load[kMaxGroupLinks] = {};
  std::uint32_t flows[kMaxGroupLinks] = {};
  for_each_class(gi, [&load, &flows](const Class& c) {
    if (!c.ends.empty()) add_load(c, load, flows);
  });
  set_links(g, load, flows);
}

void GroupSharing::set_link(LinkState& link, double load, std::uint32_t flows) const {
  const Time_ps now = queue_.now_ps();
  if (link.flows == 0 && flows > 0) link.since_ps = now;
  if (link.flows > 0 && flows == 0) link.busy_ps += now - link.since_ps;
  link.flows = flows;
  link.load = load;
}

void GroupSharing::schedule_group(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  const Time_ps now = queue_.now_ps();
  Time_ps at = kMaxTime_ps;
  std::int32_t next = -1;             // the flow whose end comes first
  const void* next_end = nullptr;     // where that end is kept, to be requested at the event
  if (fronts_of(gi) != nullptr) {
    // A following group's ends are worked out as its classes change (reckon_end), and the first
    // of them is kept as they are (note_end) unless it moved later.
    GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
    if (!gc.first_known) {
      // Found again by note_end's rule, over the classes with flows in class order.
      gc.first = -1;
      gc.first_known = true;
      for (const std::int32_t c : gc.active) note_end(gc, c, gc.end_at[static_cast<std::size_t>(c)]);
    }
    if (gc.first >= 0) {
      const std::size_t c = static_cast<std::size_t>(gc.first);
      at = std::max(gc.end_at[c], now);
      next = gc.front_at[c].slot;
      // (Its class's line: the event reads it first, then its ends.)
      next_end = &g.classes[c];
    }
  } else {
    // Any other group: its few classes, each on the group's clock.
    const Class* first = nullptr;  // the class whose earliest end comes first (the first such)
    for (const Class& c : g.classes) {
      if (c.ends.empty()) continue;
      const double left = c.ends.front().at_bytes - c.clock_bytes - kDoneBytes;
      const Time_ps end = left > 0 ? now + checked_ceil_ps(left / c.rate, "a flow's transfer time") : now;
      if (first == nullptr || end < at) {
        at = end;
        first = &c;
      }
    }
    if (first != nullptr) {
      next = first->ends.front().slot;
      next_end = &first->ends.front();
    }
  }
  if (next < 0) {
    if (g.event != 0) queue_.cancel(g.event);
    g.event = 0;
    return;
  }
  // The flow that ends next here is touched when its end comes: requested now, its line arrives while
  // other events run (as in PerLinkSharing::schedule_link).
  table_.prefetch(next);
  g.next_slot = next;
  g.next_end = next_end;
  if (g.event != 0 && queue_.reschedule(g.event, at)) return;
  g.event = queue_.schedule(at, [this, gi] { group_event(gi); });
}

void GroupSharing::group_event(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  g.event = 0;
  // The flow that ends first was requested when the event was scheduled, long ago at a wide
  // layer's pace: again now, with its end, so that both arrive while the group's clock moves.
  if (g.next_slot >= 0) {
    table_.prefetch(g.next_slot);
    __builtin_prefetch(g.next_end);
  }
  advance(gi);
  ended_.clear();
  emptied_.clear();
  LinkEnd* const fronts = fronts_of(gi);
  GroupCoupling* const coupling = coupled_ && g.follows ? &coupling_[static_cast<std::size_t>(gi)] : nullptr;
  // A following group without room solves in full when flows leave it; one with room keeps it
  // (room_left): the classes left still fit.
  if (coupling != nullptr) coupling->held = false;
  GroupCoupling* const room = coupling != nullptr && coupling->room ? coupling : nullptr;
  const auto pop_ended = [&](Class& c) {
    while (!c.ends.empty() && earliest_end(fronts, g, c) <= c.clock_bytes + kDoneBytes) {
      const LinkEnd e = c.ends.pop();
      refresh_front(fronts, g, c);
      ended_.push_back(e.slot);
      if (room != nullptr) room_left(g, *room, c);
      if (coupled_ && c.ends.empty()) emptied_.push_back(static_cast<std::int32_t>(&c - g.classes.data()));
      // Its table entry is read once the group is solved and rescheduled below. It was requested
      // when this end was scheduled; read now, and with it what the callback reads first if this
      // group is the flow's last bound, the callback's own miss overlaps the solve.
      table_.prefetch_end(e.slot);
      // The clock ran up to a picosecond past the flow's end: its links carried exactly its bytes.
      const double over = c.clock_bytes - e.at_bytes;
      for (std::uint32_t m = c.mask; m != 0; m &= m - 1)
        g.links[static_cast<std::size_t>(__builtin_ctz(m))].bytes -= over;
    }
  };
  if (fronts != nullptr) {
    // A following group: the classes whose end has come, found side by side in end_at.
    GroupCoupling& gc = *coupling;
    const Time_ps now = queue_.now_ps();
    for (const std::int32_t c : gc.active) {
      if (gc.end_at[static_cast<std::size_t>(c)] > now) continue;
      fold_clock(g, gc, c);
      pop_ended(g.classes[static_cast<std::size_t>(c)]);
      reckon_end(g, gc, c);
    }
  } else {
    for (Class& c : g.classes) pop_ended(c);
  }
  if (coupled_) drop_emptied(gi);  // (after the walk, which was over a following group's list)
  solve(gi);
  schedule_group(gi);
  if (coupled_) {
    release_followers(gi);
    cascade();
  }
  // The flows' callbacks may start flows in this group: its state is settled first. They never run a
  // group's event, so ended_ is not touched while it is walked.
  for (std::size_t k = 0; k < ended_.size(); ++k) table_.bound_met(ended_[k]);
}

double GroupSharing::flow_rate_GBps(FlowId id) const {
  const std::int32_t slot = table_.find(id);
  if (slot < 0) return 0;
  const FlowPath& path = paths_[static_cast<std::size_t>(slot)];
  if (!path.entered) return 0;
  double rate = path.cap;
  const Segment* segs = segments(path);
  for (std::uint32_t s = 0; s < path.seg_count; ++s) {
    // A group still carries the flow while its end is in the class's heap (a scan: this is for
    // inspection, not for the simulation).
    const Segment seg = segs[s];
    const Class& c = groups_[static_cast<std::size_t>(seg.group)].classes[static_cast<std::size_t>(seg.cls)];
    const auto on_it = [slot](const LinkEnd& e) { return e.slot == slot; };
    if (std::any_of(c.ends.begin(), c.ends.end(), on_it)) rate = std::min(rate, c.rate);
  }
  return std::isinf(rate) ? 0 : rate / GBps_to_bytes_per_ps(1.0);
}

double GroupSharing::link_bytes(int link) const {
  const LinkPlace& place = links_[static_cast<std::size_t>(link)];
  const Group& g = groups_[static_cast<std::size_t>(place.group)];
  const LinkState& l = g.links[static_cast<std::size_t>(place.bit)];
  return l.bytes + l.load * static_cast<double>(queue_.now_ps() - g.clock_at_ps);
}

Time_ps GroupSharing::link_busy_ps(int link) const {
  const LinkPlace& place = links_[static_cast<std::size_t>(link)];
  const LinkState& l = groups_[static_cast<std::size_t>(place.group)].links[static_cast<std::size_t>(place.bit)];
  return l.busy_ps + (l.flows == 0 ? 0 : queue_.now_ps() - l.since_ps);
}

}  // namespace epsim

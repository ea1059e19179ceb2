// Coupled group sharing (`engine.bandwidth_sharing: coupled`): in the groups chosen to follow, each
// flow's class is capped at the rate the group before it on the flow's route gives the flow, so that
// a receiving side never moves bytes its sender has not sent (the model and why: group_sharing.hpp).
//
// Followers are told, not asked: a leading group's solve writes each moved class's rate into its
// followers' records (those with flows: an idle one reads its leader's rate when flows join it
// again), and queues only the followers that the move changes (one that its leader held, or one
// whose new leader rate is below its rate: a cap that did not bind and still does not leaves
// max-min as it was), and changes by more than kTellTolerance; the others take the new cap at
// their group's next event. A follower's solve then reads its own group alone.
#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>

#include "sim/engine/group_sharing.hpp"
#include "sim/engine/mask_sums.hpp"

namespace epsim {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
/// A cascade re-solves one group at most this many times. Groups can follow each other round a
/// cycle (a relay GPU's receiving side follows a sender whose receiving side follows the relay's
/// sending side for a flow relayed the other way), where the rates would only approach their fixed
/// point; the cut leaves a rate of the cycle up to one round behind until the next event there.
constexpr std::uint32_t kCascadeVisits = 4;
/// A leader's move that leaves a follower's rate within this share of its new cap does not re-solve
/// the follower at once (tell_followers). In a near-uniform exchange a sender's rate moves by about
/// one flow in its hundred whenever one of its flows ends, and each move re-solved every following
/// receiver it feeds, over its hundred classes. At EP 1,024, 38% of the moves that re-solved a
/// follower were under 1% and 58% between 1 and 10%; with 2% the layer costs 0.45 to 0.72 of what it
/// did, and the layers measured moved by up to 0.035 percentage points against exact (one, the
/// others by 0.007 at most; docs/performance.md, "A leader's small moves wait"). With 5% the EP
/// 1,024 near-uniform layer takes 0.89 of 2%'s instructions (0.84 of its CPU time), every layer of
/// the accuracy set up to EP 128 comes out the same, and those past it moved by 0.029 percentage
/// points at most (ideal-balance at EP 1,024, towards exact; 0.018 at most away from it); 10%
/// saved 4% more of the instructions and moved two layers 0.05 points away from exact
/// (docs/performance.md, "A following group reads less").
constexpr double kTellTolerance = 5e-2;
/// A following group without room lets the classes its senders hold take their senders' moves
/// while its link-bound classes keep their level (recap_held), until the moves add up to this share
/// of a link's capacity; then it solves in full. With 2%, UltraEP's uniform layers, exact to the
/// digit otherwise, moved by up to 0.084% (EP 128); with 0.5% every layer of the accuracy set
/// stayed within 0.004 percentage points of what it was, and the EP 512 near-uniform layer took 18%
/// fewer instructions (docs/performance.md, "A group without room lets its held classes move").
constexpr double kHeldDrift = 5e-3;
/// A link whose classes at their caps come within this share of its capacity counts as full, so
/// that a demand meeting the capacity up to rounding goes to the full solve.
constexpr double kRoomMargin = 1e-9;

/// Whether a class solved to `rate` is held by its leader: the leader's rate is below the class's
/// own cap, and the class got the leader's rate.
bool held_by_leader(double rate, double own_cap, double leader_rate) {
  return leader_rate < own_cap && rate == std::max(leader_rate, GroupSharing::kMinRate);
}

}  // namespace

void GroupSharing::couple_group_of(int link) {
  if (link < 0 || static_cast<std::size_t>(link) >= links_.size())
    throw std::out_of_range("GroupSharing: no link " + std::to_string(link));
  if (!coupled_) throw std::logic_error("GroupSharing: groups follow only in the coupled model");
  if (table_.slots() > 0) throw std::logic_error("GroupSharing: groups are coupled before the first flow");
  groups_[static_cast<std::size_t>(links_[static_cast<std::size_t>(link)].group)].follows = true;
}

bool GroupSharing::follows(int link) const {
  if (link < 0 || static_cast<std::size_t>(link) >= links_.size())
    throw std::out_of_range("GroupSharing: no link " + std::to_string(link));
  return coupled_ && groups_[static_cast<std::size_t>(links_[static_cast<std::size_t>(link)].group)].follows;
}

std::int32_t GroupSharing::coupled_class_of(std::int32_t gi, std::uint32_t mask, double cap, ClassRef leader) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  if (!g.follows) leader = ClassRef{-1, -1};
  const auto same = [&](std::int32_t c) {
    const Class& k = g.classes[static_cast<std::size_t>(c)];
    return k.mask == mask && k.cap == cap;
  };
  // A group that does not follow holds a handful of classes, none with a leader: found as local
  // finds them, without reading the group's coupling record (a miss for each flow's every group at
  // wide EP, and nine groups in ten do not follow). A following group holds a class per sending
  // GPU, hundreds at wide EP: a class with a leader is found among its leader's followers (those of
  // one sender, a few), by group first; one without, among the group's few roots.
  if (!g.follows) {
    if (const std::int32_t found = find_class(g, mask, cap); found >= 0) return found;
  } else if (leader.group >= 0) {
    for (const FollowerRef& f :
         coupling_[static_cast<std::size_t>(leader.group)].followers[static_cast<std::size_t>(leader.cls)]) {
      if (f.group == gi && same(f.index())) return f.index();
    }
  } else {
    for (const std::int32_t c : gc.roots) {
      if (same(c)) return c;
    }
  }
  g.classes.emplace_back();
  g.classes.back().mask = mask;
  g.classes.back().cap = cap;
  gc.classes.emplace_back();
  gc.followers.emplace_back();
  gc.leader_of.emplace_back();
  gc.front_at.push_back(kNoFront);
  gc.clock_at.push_back(queue_.now_ps());
  gc.end_at.push_back(kNoEnd);
  if (old_rates_.size() < g.classes.size()) old_rates_.resize(g.classes.size());
  const std::int32_t cls = static_cast<std::int32_t>(g.classes.size() - 1);
  if (leader.group >= 0) {
    GroupCoupling& lc = coupling_[static_cast<std::size_t>(leader.group)];
    Group& lg = groups_[static_cast<std::size_t>(leader.group)];
    lg.leads = true;
    if (leader.cls < kLeadBits) lg.leading |= 1u << leader.cls;
    std::vector<FollowerRef>& followers = lc.followers[static_cast<std::size_t>(leader.cls)];
    gc.leader_of.back() = LeaderLink{leader, static_cast<std::uint32_t>(followers.size())};
    // Idle until flows join it, when it reads its leader's rate and is marked (class_joined).
    followers.push_back(FollowerRef{gi, ~cls});
  } else if (g.follows) {
    gc.roots.push_back(cls);  // (read by the following groups' lookup alone, above)
  }
  return cls;
}

void GroupSharing::solve_coupled(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  if (gc.room && recap_in_room(gi)) return;
  if (gc.held && recap_held(gi)) return;
  gc.recapped.clear();
  const std::size_t nclasses = g.classes.size();
  const std::size_t nlinks = g.links.size();
  if (caps_.size() < nclasses) caps_.resize(nclasses);
  // One pass over the classes with flows: each one's cap, the flows not yet frozen on each link, and
  // what the classes would take from each link at their caps.
  double residual[kMaxGroupLinks];
  double unfrozen[kMaxGroupLinks];  // flows of classes not yet frozen on each link
  for (std::size_t b = 0; b < nlinks; ++b) {
    residual[b] = g.links[b].capacity;
    unfrozen[b] = 0;
  }
  double demand[kMaxGroupLinks];
  for (std::size_t b = 0; b < nlinks; ++b) demand[b] = 0;
  MaskSums sums;  // (each pass adds its classes by mask, then to the links)
  const auto count = [&](int b, double n, double at_cap) {
    unfrozen[b] += n;
    demand[b] += at_cap;
  };
  for (const std::int32_t ci : gc.active) {
    const std::size_t c = static_cast<std::size_t>(ci);
    Class& k = g.classes[c];
    caps_[c] = std::min(k.cap, gc.classes[c].leader_rate);
    const double n = k.ends.size();
    sums.add(k.mask, n, n * std::max(caps_[c], kMinRate), count);
  }
  sums.spread(count);
  // A class's rate as solved. One whose rate moves has its clock moved to now at its old rate and
  // its end worked out at its new one; the others' clocks and ends stand (their ends were worked out
  // as their flows came and went: group_event, settle_entered), and note_end keeps the group's first
  // end as the moved ones' ends move, in any order. A solve after a departure moves the link-bound
  // classes, while those their senders hold keep their rates: 43% of the classes the EP 1,024
  // near-uniform layer's full solves visit, 48% of the log-normal one's.
  const auto set_rate = [&](Class& k, double rate) {
    if (rate == k.rate) return;
    const std::int32_t c = static_cast<std::int32_t>(&k - g.classes.data());
    fold_clock(g, gc, c);
    k.rate = rate;
    reckon_end(g, gc, c);
  };
  // Half the solves of a following group find every link with room for every class at its cap
  // (a receiver whose senders are slower than it): progressive filling would then freeze each class
  // at its cap, one by one, and no link would fill. Those rates are set at once. The margin keeps a
  // link whose demand meets its capacity, up to rounding, for the full solve.
  bool room = true;
  for (std::size_t b = 0; b < nlinks && room; ++b) room = demand[b] < g.links[b].capacity * (1 - kRoomMargin);
  if (room) {
    for (const std::int32_t c : gc.active)
      set_rate(g.classes[static_cast<std::size_t>(c)], std::max(caps_[static_cast<std::size_t>(c)], kMinRate));
    for (std::size_t b = 0; b < nlinks; ++b) gc.demand[b] = demand[b];
  }
  gc.room = room;
  gc.held = !room;
  for (std::size_t b = 0; b < nlinks; ++b) {
    gc.fill_at[b] = kInf;
    gc.drift[b] = 0;
  }
  const auto take = [&](int b, double n, double carried) {
    residual[b] = std::max(0.0, residual[b] - carried);
    unfrozen[b] -= n;
  };
  const auto freeze = [&](Class& k, double level) {
    set_rate(k, level);
    const double n = k.ends.size();
    sums.add(k.mask, n, n * level, take);
  };
  // Progressive filling: the level rises to the lowest cap not frozen (that class freezes there) or
  // to the level at which a link fills (its classes freeze there), whichever comes first. A class
  // frozen at a cap below a link's level leaves that link a level at least as high (it takes less
  // than the link's average share), so every cap below the level found freezes before the links'
  // levels are worked out again, in any order: one pass over the classes not yet frozen per run of
  // caps, reading their caps alone, and none sorted. (Kept in cap order, the classes of a group whose
  // leaders' rates cross each other between solves took an insertion sort of some 60 moves a solve,
  // 4% of the EP 1,024 coupled layer's instructions.) Each pass keeps the classes it leaves unfrozen.
  std::vector<std::int32_t>& left = unfrozen_scratch_;
  left.clear();
  if (!room) left.assign(gc.active.begin(), gc.active.end());
  while (!left.empty()) {
    int full = -1;
    double level = fill_level(residual, unfrozen, nlinks, full);
    std::size_t kept = 0;
    for (const std::int32_t c : left) {
      const double cap = caps_[static_cast<std::size_t>(c)];
      if (cap < level) freeze(g.classes[static_cast<std::size_t>(c)], std::max(cap, kMinRate));
      else left[kept++] = c;
    }
    sums.spread(take);
    const bool capped = kept < left.size();
    left.resize(kept);
    if (capped) continue;
    level = std::max(level, kMinRate);
    gc.fill_at[full] = level;
    kept = 0;
    for (const std::int32_t c : left) {
      Class& k = g.classes[static_cast<std::size_t>(c)];
      if ((k.mask >> full & 1u) != 0) freeze(k, level);
      else left[kept++] = c;
    }
    sums.spread(take);
    left.resize(kept);
  }
  // One pass over the classes for what follows from their rates: whether their leaders hold them,
  // whether their followers hear of them (moved_by), and the links' loads (settle_links' sums, in
  // its order). (A class without flows is never held: drop_emptied cleared its flag.)
  double load[kMaxGroupLinks] = {};
  double flows_on[kMaxGroupLinks] = {};
  const auto carry = [&](int b, double n, double carried) {
    flows_on[b] += n;
    load[b] += carried;
  };
  for (const std::int32_t c : gc.active) {
    const Class& k = g.classes[static_cast<std::size_t>(c)];
    Coupling& cp = gc.classes[static_cast<std::size_t>(c)];
    moved_by(g, gc, c);
    cp.rate = k.rate;
    cp.leader_bound = held_by_leader(k.rate, k.cap, cp.leader_rate);
    const double n = k.ends.size();
    sums.add(k.mask, n, n * k.rate, carry);
  }
  sums.spread(carry);
  std::uint32_t flows[kMaxGroupLinks];
  for (std::size_t b = 0; b < nlinks; ++b) flows[b] = static_cast<std::uint32_t>(flows_on[b]);
  set_links(g, load, flows);
}

// Inline: both recaps run it for each class they move, and a call each cost 0.25% of the EP 512
// coupled layer's instructions.
inline void GroupSharing::take_cap(Group& g, GroupCoupling& gc, std::int32_t c) {
  Class& k = g.classes[static_cast<std::size_t>(c)];
  Coupling& cp = gc.classes[static_cast<std::size_t>(c)];
  fold_clock(g, gc, c);  // (at the rate it ran at)
  k.rate = cap_of(gc, static_cast<std::size_t>(c), k);
  moved_by(g, gc, c);  // (the recaps take their classes in class order: once_each)
  cp.rate = k.rate;
  cp.leader_bound = held_by_leader(k.rate, k.cap, cp.leader_rate);
  reckon_end(g, gc, c);
}

void GroupSharing::once_each(std::vector<std::int32_t>& classes) {
  // (A class told twice since the last solve is moved once.)
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
}

void GroupSharing::note_recapped(GroupCoupling& gc, std::int32_t cls) {
  // A group told of more moves than it has classes with flows before its next solve (its own
  // event, or a cascade's) would keep a long list: it is solved in full instead.
  if (gc.recapped.size() >= gc.active.size()) {
    gc.room = false;
    gc.held = false;
    return;
  }
  gc.recapped.push_back(cls);
}

bool GroupSharing::recap_in_room(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  const std::size_t nlinks = g.links.size();
  // Since the last solve, which found room for every class at its cap, the flows that left gave
  // their demand back (room_left) and those that entered added theirs at their class's rate
  // (room_joined): only the caps and the ends of the classes in `recapped` moved. Their new rates
  // are their new caps if every link still has room for them; the other classes keep theirs.
  // With room, a class's rate is its cap: its own or its leader's, whichever is lower.
  once_each(gc.recapped);
  double demand[kMaxGroupLinks];
  for (std::size_t b = 0; b < nlinks; ++b) demand[b] = gc.demand[b];
  for (const std::int32_t ci : gc.recapped) {
    const std::size_t c = static_cast<std::size_t>(ci);
    const Class& k = g.classes[c];
    if (k.ends.empty()) continue;
    const double to = cap_of(gc, c, k);
    const double n = k.ends.size();
    for (std::uint32_t m = k.mask; m != 0; m &= m - 1) demand[__builtin_ctz(m)] += n * (to - k.rate);
  }
  for (std::size_t b = 0; b < nlinks; ++b) {
    if (!(demand[b] < g.links[b].capacity * (1 - kRoomMargin))) return false;  // a full solve
  }
  for (const std::int32_t ci : gc.recapped) {
    if (!g.classes[static_cast<std::size_t>(ci)].ends.empty()) take_cap(g, gc, ci);
  }
  gc.recapped.clear();
  // Every class is at its cap, so each link carries what the classes demand of it.
  for (std::uint32_t m = g.loaded; m != 0; m &= m - 1) {
    const int b = __builtin_ctz(m);
    gc.demand[b] = demand[b];
    set_link(g.links[static_cast<std::size_t>(b)], demand[b], g.links[static_cast<std::size_t>(b)].flows);
  }
  return true;
}

bool GroupSharing::recap_held(std::int32_t gi) {
  Group& g = groups_[static_cast<std::size_t>(gi)];
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  // Since the last solve, which found a link full, no flow entered or left (either clears
  // gc.held): only the caps of the classes in `recapped`, held by their leaders, moved. A class
  // its leader held froze at its cap before any of its links filled; a new cap still below the
  // levels at which they filled freezes it there again. The link-bound classes keep their level,
  // which moves by a held class's move shared among them, until the group's next event re-solves
  // it in full, or until the moves add up to kHeldDrift of a link.
  once_each(gc.recapped);
  const std::size_t nlinks = g.links.size();
  double drift[kMaxGroupLinks];
  for (std::size_t b = 0; b < nlinks; ++b) drift[b] = gc.drift[b];
  for (const std::int32_t ci : gc.recapped) {
    const std::size_t c = static_cast<std::size_t>(ci);
    const Class& k = g.classes[c];
    if (k.ends.empty()) continue;
    if (!gc.classes[c].leader_bound) return false;  // (released by its leader: a full solve)
    const double to = cap_of(gc, c, k);
    const double moved = k.ends.size() * std::abs(to - k.rate);
    for (std::uint32_t m = k.mask; m != 0; m &= m - 1) {
      const int b = __builtin_ctz(m);
      if (!(to < gc.fill_at[b])) return false;
      drift[b] += moved;
    }
  }
  for (std::size_t b = 0; b < nlinks; ++b)
    if (drift[b] > kHeldDrift * g.links[b].capacity) return false;
  for (std::size_t b = 0; b < nlinks; ++b) gc.drift[b] = drift[b];
  for (const std::int32_t ci : gc.recapped) {
    const std::size_t c = static_cast<std::size_t>(ci);
    const Class& k = g.classes[c];
    if (k.ends.empty()) continue;
    const double n = k.ends.size();
    const double to = cap_of(gc, c, k);
    for (std::uint32_t m = k.mask; m != 0; m &= m - 1) {
      LinkState& link = g.links[static_cast<std::size_t>(__builtin_ctz(m))];
      set_link(link, link.load + n * (to - k.rate), link.flows);
    }
    take_cap(g, gc, ci);
  }
  gc.recapped.clear();
  return true;
}

void GroupSharing::room_left(Group& g, GroupCoupling& gc, const Class& c) {
  // Every class runs at its cap and each link carries what they demand: one flow of `c` less takes
  // its rate off each of its links, and the classes left have more room than before, at the same
  // rates. The links are settled here, the flow counts being known; a link left without flows
  // carries nothing (not a rounding remainder).
  for (std::uint32_t m = c.mask; m != 0; m &= m - 1) {
    const int b = __builtin_ctz(m);
    LinkState& link = g.links[static_cast<std::size_t>(b)];
    const std::uint32_t flows = link.flows - 1;
    gc.demand[b] = flows == 0 ? 0.0 : gc.demand[b] - c.rate;
    set_link(link, gc.demand[b], flows);
    if (flows == 0) g.loaded &= ~(1u << b);
  }
}

void GroupSharing::coupled_join(Group& g, std::int32_t gi, std::int32_t cls) {
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  const Class& c = g.classes[static_cast<std::size_t>(cls)];
  // A leading class that fills again tells its followers its rate at its group's solve, even the
  // rate it had when it emptied: its followers took it as done (release_followers).
  // (A class without followers has nobody to tell: may_lead.)
  if (g.leads && c.ends.empty() && may_lead(g, cls)) gc.classes[static_cast<std::size_t>(cls)].refilled = true;
  if (!g.follows) return;
  gc.held = false;  // (a flow joins: without room, a full solve)
  fold_clock(g, gc, cls);  // (its end is placed on the clock at now)
  if (c.ends.empty()) class_joined(gi, cls);
  if (gc.room) room_joined(g, gc, cls);
}

void GroupSharing::room_joined(Group& g, GroupCoupling& gc, std::int32_t c) {
  // With room every class runs at its cap, and each link carries what they demand: a flow joining
  // class c adds its rate to each of c's links, and its end is worked out at the group's solve
  // (recap_in_room, which takes the cap of each class named, and solves in full if a link has no
  // room left). A fifth of a following group's full solves, each over some 60 classes, were of flows
  // entering a group with room, nearly all of which kept it (EP 1,024 near-uniform).
  Class& k = g.classes[static_cast<std::size_t>(c)];
  if (k.ends.empty()) {
    // Its rate from when it last had flows is stale, and its leader, which flows join at this
    // instant too, may not have told it its rate yet: its flows count for nothing until the solve,
    // which moves it from 0 to its cap then.
    k.rate = 0;
    gc.classes[static_cast<std::size_t>(c)].rate = 0;
  }
  for (std::uint32_t m = k.mask; m != 0; m &= m - 1) {
    const int b = __builtin_ctz(m);
    LinkState& link = g.links[static_cast<std::size_t>(b)];
    gc.demand[b] += k.rate;
    set_link(link, link.load + k.rate, link.flows + 1);
    g.loaded |= 1u << b;
  }
  note_recapped(gc, c);
}

void GroupSharing::class_joined(std::int32_t gi, std::int32_t cls) {
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  Coupling& cp = gc.classes[static_cast<std::size_t>(cls)];
  // (Once a flow: coupled_join calls it while the class has no ends, and the flow's end joins next.)
  const auto at = std::lower_bound(gc.active.begin(), gc.active.end(), cls);
  assert(at == gc.active.end() || *at != cls);
  gc.active.insert(at, cls);
  const ClassRef leader = gc.leader_of[static_cast<std::size_t>(cls)].leader;
  if (leader.group < 0) return;
  // Its leader told its idle followers nothing (tell_class, release_followers): it takes the rate
  // they would have heard last, the leader's rate as of its last solve, or +inf if the leader has
  // no flows or fills again at this instant (it then tells its followers once solved: keep_rates).
  const Class& l = groups_[static_cast<std::size_t>(leader.group)].classes[static_cast<std::size_t>(leader.cls)];
  const Coupling& lc = coupling_[static_cast<std::size_t>(leader.group)].classes[static_cast<std::size_t>(leader.cls)];
  cp.leader_rate = l.ends.empty() || lc.refilled ? kInf : l.rate;
  mark_in_leader(gc, cls, true);
}

void GroupSharing::mark_in_leader(const GroupCoupling& gc, std::int32_t cls, bool active) {
  const LeaderLink& link = gc.leader_of[static_cast<std::size_t>(cls)];
  if (link.leader.group < 0) return;
  FollowerRef& f =
      coupling_[static_cast<std::size_t>(link.leader.group)].followers[static_cast<std::size_t>(link.leader.cls)][link.index];
  f.cls = active ? cls : ~cls;
}

void GroupSharing::drop_emptied(std::int32_t gi) {
  if (emptied_.empty() || !groups_[static_cast<std::size_t>(gi)].follows) return;
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  // The event names the classes it emptied (emptied_, one or two of the group's dozens): they
  // leave the active list, which keeps its order, without a pass that reads every class's line.
  for (const std::int32_t c : emptied_) {
    Coupling& cp = gc.classes[static_cast<std::size_t>(c)];
    cp.leader_bound = false;  // (tell_followers reads it, and solves no longer visit the class)
    mark_in_leader(gc, c, false);
    gc.active.erase(std::lower_bound(gc.active.begin(), gc.active.end(), c));  // (sorted)
  }
}

void GroupSharing::keep_rates(std::int32_t gi) {
  const Group& g = groups_[static_cast<std::size_t>(gi)];
  // A group that follows has its solve list the classes that moved (moved_by): its classes with
  // flows, hundreds at a relay, are not read before every solve.
  if (g.follows) return;
  GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  assert(old_rates_.size() >= g.classes.size());  // (sized as classes are made: coupled_class_of)
  // A class refilled since the last solve keeps the rate it had when it emptied, and its followers
  // took it as done: it is kept as without flows, so that they hear its rate even when it is the same.
  // Only the classes with followers are read (tell_followers tells those alone).
  for_each_leading(g, [&](std::size_t c) {
    Coupling& cp = gc.classes[c];
    old_rates_[c] = g.classes[c].ends.empty() || cp.refilled ? -1 : g.classes[c].rate;
    cp.refilled = false;
  });
}

void GroupSharing::tell_followers(std::int32_t gi) {
  const Group& g = groups_[static_cast<std::size_t>(gi)];
  const GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  if (g.follows) {
    // The classes the solve moved, in class order, as a pass over those with flows told them (the
    // cascade's order follows). A class that refilled is on the list: a flow that joins a class
    // of a group with room names it for the recap (room_joined), and without room the full solve
    // passes over every class with flows.
    for (const std::int32_t c : moved_)
      tell_class(g, gc, static_cast<std::size_t>(c), old_rates_[static_cast<std::size_t>(c)]);
    moved_.clear();
    return;
  }
  for_each_leading(g, [&](std::size_t c) { tell_class(g, gc, c, old_rates_[c]); });
}

void GroupSharing::tell_class(const Group& g, const GroupCoupling& gc, std::size_t c, double told) {
  const std::vector<FollowerRef>& followers = gc.followers[c];
  if (followers.empty()) return;
  const Class& k = g.classes[c];
  const double rate = k.ends.empty() ? -1 : k.rate;
  if (rate == told) return;
  // A leader without flows has sent all of theirs: what its followers still carry comes at their pace.
  const double lead = k.ends.empty() ? kInf : k.rate;
  for (const FollowerRef& f : followers) {
    // An idle follower (no flows) reads its leader's rate when flows join it (class_joined): at a
    // wide layer's near-uniform exchange, 38% of a moving sender's followers are done with it.
    if (!f.active()) continue;
    GroupCoupling& fgc = coupling_[static_cast<std::size_t>(f.group)];
    Coupling& fc = fgc.classes[static_cast<std::size_t>(f.cls)];
    fc.leader_rate = lead;
    // Its rate is in the record just written (`rate`, its class's, copied): its class line, in
    // another group, is not read.
    assert(!groups_[static_cast<std::size_t>(f.group)].classes[static_cast<std::size_t>(f.cls)].ends.empty());
    assert(fc.rate == groups_[static_cast<std::size_t>(f.group)].classes[static_cast<std::size_t>(f.cls)].rate);
    if (fgc.room) note_recapped(fgc, f.cls);
    // A follower re-solves when its rate is off its new cap by more than kTellTolerance: one its
    // leader held, or one whose new cap is below its rate. Within the tolerance it moves at its
    // rate until its group's next event re-solves it with the cap written here.
    if (fc.leader_bound ? std::abs(lead - fc.rate) <= kTellTolerance * fc.rate
                        : !(lead < fc.rate * (1 - kTellTolerance)))
      continue;
    // Without room, a class its leader held may take its new cap alone (recap_held); one the links
    // held is now held by its cap, which moves the level: a full solve.
    if (fgc.held) {
      if (fc.leader_bound) note_recapped(fgc, f.cls);
      else fgc.held = false;
    }
    if (fgc.queued) continue;
    fgc.queued = true;
    worklist_.push_back(f.group);
  }
}

void GroupSharing::release_followers(std::int32_t gi) {
  // tell_followers compares each class's rate before and after the solve, and a class emptied by
  // the event was already empty before it: its followers hear nothing. Within kTellTolerance a
  // follower its leader held may still carry bytes its leader has sent, at the older, slower rate;
  // without its leader it takes them at its own pace.
  if (!groups_[static_cast<std::size_t>(gi)].leads) return;
  const Group& g = groups_[static_cast<std::size_t>(gi)];
  const GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
  for (const std::int32_t c : emptied_) {
    if (!may_lead(g, c)) continue;  // (no followers: its record is not read)
    for (const FollowerRef& f : gc.followers[static_cast<std::size_t>(c)]) {
      if (!f.active()) continue;  // (it reads its leader's state when flows join it: class_joined)
      GroupCoupling& fgc = coupling_[static_cast<std::size_t>(f.group)];
      Coupling& fc = fgc.classes[static_cast<std::size_t>(f.cls)];
      fc.leader_rate = kInf;
      // (A class its leader did not hold is at its own cap, which stays.)
      if (!fc.leader_bound) continue;
      if (fgc.room) note_recapped(fgc, f.cls);
      fgc.held = false;  // (released, it rises to its links' level: a full solve)
      if (fgc.queued) continue;
      fgc.queued = true;
      worklist_.push_back(f.group);
    }
  }
}

void GroupSharing::cascade() {
  if (worklist_.empty()) return;
  ++cascade_stamp_;
  // Breadth-first: the groups told in one round are re-solved before those they tell in turn. The
  // list is read in place while re-solves append to it.
  for (std::size_t i = 0; i < worklist_.size(); ++i) {
    const std::int32_t gi = worklist_[i];
    GroupCoupling& gc = coupling_[static_cast<std::size_t>(gi)];
    gc.queued = false;
    if (gc.cascade_stamp != cascade_stamp_) {
      gc.cascade_stamp = cascade_stamp_;
      gc.cascade_visits = 0;
    }
    if (gc.cascade_visits >= kCascadeVisits) continue;
    ++gc.cascade_visits;
    advance(gi);
    solve(gi);
    schedule_group(gi);
  }
  worklist_.clear();
}

}  // namespace epsim

// Max-min fair fluid flows.
//
// Rates are re-solved once per timestamp (a solve event at now()), so that the N^2 flows of an
// all-to-all entering together cost one solve, not N^2. In epochs mode the solve after a flow ends
// may be due later (solve_due_ps): until then the other flows' rates do not move, so the changes that
// wait (roots, seeds, the smallest rate that left) are those of several ends at one instant, which
// the solve handles as in exact mode. The solve is exact progressive filling, but over as few flows as
// the max-min conditions allow. An allocation is max-min fair iff it is feasible and every flow has a
// bottleneck: a saturated link on which it has the largest rate, or its own cap. Each flow counts its
// bottlenecks, so:
//
//  * A finishing flow unsaturates only its own links. If every flow on them still has another
//    bottleneck, the rates are still max-min fair: nothing is re-solved or rescheduled.
//
//  * Otherwise the flows left without a bottleneck (and new flows) are the roots of the re-solve.
//    Its constraining links are those that lost saturation or gained a flow, plus every saturated
//    link of a re-solved flow; every flow that a constraining link is a bottleneck of is re-solved.
//    Flows elsewhere keep their rates: their bottleneck links carry no re-solved flow, so they stay
//    justified.
//
//  * A flow that only passes through a constraining link (its bottlenecks are elsewhere, on links
//    that are not constraining) keeps its rate and takes it off the link's capacity. That stays fair
//    as long as it does not end above the level at which the link fills; if it would, it joins the
//    re-solve and the solve is repeated. In an all-to-all most flows on a NIC are bottlenecked at
//    the NIC at the other end: re-solving only the NIC's own bottleneck flows keeps a re-solve from
//    spreading over the rail through flows whose rates do not move.
//
//  * Unsaturated links a re-solved flow crosses do not constrain the filling; afterwards each must
//    still be below capacity (else it constrains and the solve is repeated). This is what keeps the
//    rails of an all-to-all apart: they only meet on NVLink ports with spare capacity.
//
//  * When flows only finished, flows slower than every finished one keep their rates: progressive
//    filling raises all rates together and a flow of rate r loaded its links only up to level r, so
//    everything that froze below r froze exactly as before. They only take their share off the
//    constraining links' capacity.
//
// After a solve, a flow whose rate moved by less than a relative 1e-12 keeps its old rate and event.
#include "sim/engine/flow_network.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace epsim {

namespace {

// A flow is done once at most this many bytes are left, so that rounding of rate * elapsed never
// leaves one pending forever with 1e-9 bytes to go. A completion time is the first picosecond at
// which the remainder is within this bound.
constexpr double kDoneBytes = 1e-6;
// Relative tolerance of "this link is full" and "this flow has the link's largest rate".
constexpr double kSaturationTol = 1e-9;
// A re-solved rate this close (relative) to the old one is rounding noise: keep the old rate.
constexpr double kSameRateTol = 1e-12;
// Floor on a solved rate (bytes/ps), reachable only through rounding on an over-full link; it gives
// every transferring flow a finite completion time.
constexpr double kMinRate = 1e-12;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr std::uint32_t kMaxGeneration = 0x7fff'ffff;  // keeps FlowIds positive

}  // namespace

FlowNetwork::FlowNetwork(EventQueue& queue) : queue_(queue) {}

void FlowNetwork::reserve_flows(std::size_t flows) {
  if (coarse([&](auto& model) { model.reserve_flows(flows); return true; })) return;
  flows_.reserve(flows);
  hot_.reserve(flows);
}

void FlowNetwork::set_sharing(const Sharing& sharing) {
  if (!(sharing.tolerance >= 0 && sharing.tolerance < 1)) {
    throw std::invalid_argument("FlowNetwork: the epoch tolerance must be in [0, 1)");
  }
  if (!(sharing.min_batch >= 0) || !std::isfinite(sharing.min_batch)) {
    throw std::invalid_argument("FlowNetwork: the epochs' min_batch must be finite and >= 0");
  }
  if (flows_started_) throw std::logic_error("FlowNetwork: the sharing mode is chosen before the first flow");
  sharing_ = sharing;
  per_link_.reset();
  groups_.reset();
  if (sharing.mode == SharingMode::per_link) {
    per_link_ = std::make_unique<PerLinkSharing>(queue_);
    for (const Link& l : links_) per_link_->add_link(l.capacity_GBps);
  } else if (sharing.mode == SharingMode::local || sharing.mode == SharingMode::coupled) {
    groups_ = std::make_unique<GroupSharing>(queue_, sharing.mode == SharingMode::coupled);
    for (const Link& l : links_) groups_->add_link(l.capacity_GBps, l.group);
  }
}

// ---- links ---------------------------------------------------------------------------------------

LinkId FlowNetwork::add_link(std::string name, double capacity_GBps, int group) {
  if (!(capacity_GBps > 0) || !std::isfinite(capacity_GBps)) {
    throw std::invalid_argument("FlowNetwork: link '" + name + "' needs a positive finite capacity");
  }
  Link link;
  link.name = std::move(name);
  link.capacity_GBps = capacity_GBps;
  link.capacity = GBps_to_bytes_per_ps(capacity_GBps);
  link.group = group;
  link.bytes_at_ps = queue_.now_ps();
  links_.push_back(std::move(link));
  if (per_link_) per_link_->add_link(capacity_GBps);
  if (groups_) groups_->add_link(capacity_GBps, group);  // per_link has no groups: not one call for both
  return static_cast<LinkId>(links_.size() - 1);
}

void FlowNetwork::couple_group_of(LinkId link) {
  if (sharing_.mode != SharingMode::coupled) throw std::logic_error("FlowNetwork: groups follow only in coupled mode");
  groups_->couple_group_of(link);
}

bool FlowNetwork::group_follows(LinkId link) const {
  return sharing_.mode == SharingMode::coupled && groups_->follows(link);
}

std::size_t FlowNetwork::link_count() const { return links_.size(); }
const std::string& FlowNetwork::link_name(LinkId link) const { return link_at(link).name; }
double FlowNetwork::link_capacity_GBps(LinkId link) const { return link_at(link).capacity_GBps; }

double FlowNetwork::link_bytes(LinkId link) const {
  const Link& l = link_at(link);
  if (const auto bytes = coarse([&](auto& model) { return model.link_bytes(link); })) return *bytes;
  return l.bytes + l.load * static_cast<double>(queue_.now_ps() - l.bytes_at_ps);
}

Time_ps FlowNetwork::link_busy_ps(LinkId link) const {
  const Link& l = link_at(link);
  if (const auto busy = coarse([&](auto& model) { return model.link_busy_ps(link); })) return *busy;
  return l.busy_ps + (l.flows.empty() ? 0 : queue_.now_ps() - l.busy_since_ps);
}

const FlowNetwork::Link& FlowNetwork::link_at(LinkId link) const {
  if (link < 0 || static_cast<std::size_t>(link) >= links_.size()) {
    throw std::out_of_range("FlowNetwork: no link " + std::to_string(link));
  }
  return links_[static_cast<std::size_t>(link)];
}

void FlowNetwork::advance(Link& link) {
  const Time_ps now = queue_.now_ps();
  if (now != link.bytes_at_ps) {
    link.bytes += link.load * static_cast<double>(now - link.bytes_at_ps);
    link.bytes_at_ps = now;
  }
}

// ---- flows ---------------------------------------------------------------------------------------

FlowNetwork::HopSpan FlowNetwork::hops(std::int32_t slot) {
  const FlowHot& h = hot_[static_cast<std::size_t>(slot)];
  Hop* first = hop_pool_.data() + h.hop_begin;
  return HopSpan{first, first + h.hop_count};
}

FlowId FlowNetwork::id_of(std::int32_t slot) const {
  return (static_cast<FlowId>(flows_[static_cast<std::size_t>(slot)].generation) << 32) | slot;
}

const FlowNetwork::Flow* FlowNetwork::find(FlowId id) const {
  if (id < 0) return nullptr;
  const std::uint64_t slot = static_cast<std::uint64_t>(id) & 0xffff'ffffULL;
  if (slot >= flows_.size()) return nullptr;
  const Flow& f = flows_[slot];
  if (f.state == FlowState::kFree || f.generation != static_cast<std::uint32_t>(id >> 32)) return nullptr;
  return &f;
}

double FlowNetwork::flow_rate_GBps(FlowId flow) const {
  if (const auto rate = coarse([&](auto& model) { return model.flow_rate_GBps(flow); })) return *rate;
  const Flow* f = find(flow);
  if (f == nullptr || f->state != FlowState::kTransfer) return 0;
  return hot_[static_cast<std::size_t>(f - flows_.data())].rate / GBps_to_bytes_per_ps(1.0);
}

std::size_t FlowNetwork::active_flows() const {
  return coarse([](auto& model) { return model.active_flows(); }).value_or(active_);
}

FlowId FlowNetwork::start_flow(const std::vector<LinkId>& links, double bytes, Time_ps latency_ps,
                               double rate_cap_GBps, DoneCallback on_done, EndHints end_hints) {
  if (!(bytes >= 0) || !std::isfinite(bytes)) throw std::invalid_argument("FlowNetwork: flow bytes must be >= 0");
  if (latency_ps < 0) throw std::invalid_argument("FlowNetwork: negative flow latency");
  if (links.size() > kMaxFlowLinks) throw std::invalid_argument("FlowNetwork: too many links in one flow");
  if (!(rate_cap_GBps > 0)) throw std::invalid_argument("FlowNetwork: flow rate cap must be > 0");
  // Every link must exist (link_at's check, in line: a wide layer starts half a million flows).
  for (LinkId l : links)
    if (static_cast<unsigned>(l) >= links_.size()) link_at(l);  // (a negative id wraps past the end)
  flows_started_ = true;
  const auto coarse_id = coarse([&](auto& model) {
    return model.start_flow(links, bytes, latency_ps, rate_cap_GBps, std::move(on_done), end_hints);
  });
  if (coarse_id) return *coarse_id;

  std::int32_t slot;
  if (!free_flows_.empty()) {
    slot = free_flows_.back();
    free_flows_.pop_back();
  } else {
    slot = static_cast<std::int32_t>(flows_.size());
    flows_.emplace_back();
    hot_.emplace_back();
  }
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  if (links.size() > f.hop_capacity) {  // the old segment is abandoned; slots rarely grow
    f.hop_begin = static_cast<std::uint32_t>(hop_pool_.size());
    f.hop_capacity = static_cast<std::uint32_t>(links.size());
    hop_pool_.resize(hop_pool_.size() + links.size());
  }
  for (std::size_t k = 0; k < links.size(); ++k) hop_pool_[f.hop_begin + k] = Hop{links[k], -1};
  f.on_done = std::move(on_done);
  f.bytes = bytes;
  f.remaining_bytes = bytes;
  f.started_ps = queue_.now_ps();
  f.last_update_ps = f.started_ps;
  f.event = 0;
  f.solved_with = 0;
  f.state = FlowState::kLatency;
  FlowHot& h = hot_[static_cast<std::size_t>(slot)];
  h.rate = 0;
  h.cap = std::isinf(rate_cap_GBps) ? kInf : GBps_to_bytes_per_ps(rate_cap_GBps);
  h.bottlenecks = 0;
  h.at_cap = false;
  h.hop_begin = f.hop_begin;
  h.hop_count = static_cast<std::uint16_t>(links.size());
  ++active_;
  const FlowId id = id_of(slot);

  // A flow that completes as soon as its latency ends always does so from an event, so that
  // on_done never runs inside start_flow.
  const bool instant = bytes <= kDoneBytes || (links.empty() && std::isinf(h.cap));
  if (latency_ps == 0 && !instant) {
    enter_transfer(slot);
  } else {
    f.event = queue_.schedule_in(latency_ps, [this, slot] { end_latency(slot); });
  }
  return id;
}

void FlowNetwork::end_latency(std::int32_t slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  f.event = 0;
  if (f.bytes <= kDoneBytes || (hops(slot).empty() && std::isinf(hot_[static_cast<std::size_t>(slot)].cap))) {
    complete(slot);
  } else {
    enter_transfer(slot);
  }
}

void FlowNetwork::enter_transfer(std::int32_t slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  FlowHot& h = hot_[static_cast<std::size_t>(slot)];
  const Time_ps now = queue_.now_ps();
  f.state = FlowState::kTransfer;
  f.last_update_ps = now;
  h.rate = 0;
  const HopSpan span = hops(slot);
  if (span.empty()) {  // only its cap limits it; nothing to share
    h.rate = h.cap;
    schedule_completion(slot);
    return;
  }
  for (std::int32_t k = 0; k < h.hop_count; ++k) {
    Hop& hop = span.first[k];
    Link& l = links_[static_cast<std::size_t>(hop.link)];
    if (l.flows.empty()) l.busy_since_ps = now;
    hop.pos = static_cast<std::int32_t>(l.flows.size());
    l.flows.push_back(FlowRef{slot, k, false});
    seeds_.push_back(hop.link);
  }
  roots_.push_back(slot);
  arrivals_ = true;
  request_solve(now);
}

void FlowNetwork::complete(std::int32_t slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  if (f.state == FlowState::kTransfer) detach(slot);
  DoneCallback on_done = std::move(f.on_done);
  const Time_ps started_ps = f.started_ps;
  release(slot);  // before the callback: it may start flows that reuse the slot
  if (on_done) on_done(started_ps, queue_.now_ps());
}

void FlowNetwork::detach(std::int32_t slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  const double rate = hot_[static_cast<std::size_t>(slot)].rate;
  const Time_ps now = queue_.now_ps();
  // What is left (within +-rate * 1 ps of zero) is credited to the links so that each carries
  // exactly the flow's bytes.
  const double left = f.remaining_bytes - rate * static_cast<double>(now - f.last_update_ps);
  for (const Hop& hop : hops(slot)) {
    Link& l = links_[static_cast<std::size_t>(hop.link)];
    advance(l);
    l.load -= rate;
    l.bytes += left;
    const FlowRef moved = l.flows.back();
    l.flows[static_cast<std::size_t>(hop.pos)] = moved;
    hops(moved.flow).first[moved.hop].pos = hop.pos;
    l.flows.pop_back();
    if (l.flows.empty()) {
      l.load = 0;
      l.busy_ps += now - l.busy_since_ps;
      l.saturated = false;
    } else if (l.saturated) {
      // The link has spare capacity now, so it justifies nobody's rate any more.
      l.saturated = false;
      for (FlowRef& ref : l.flows) {
        if (!ref.bottleneck) continue;
        ref.bottleneck = false;
        if (--hot_[static_cast<std::size_t>(ref.flow)].bottlenecks == 0) roots_.push_back(ref.flow);
      }
      seeds_.push_back(hop.link);
    }
  }
  removed_min_rate_ = std::min(removed_min_rate_, rate);
  if (!roots_.empty()) {
    request_solve(solve_due_ps(slot, rate));
  } else {
    // Every remaining flow still has a bottleneck: the rates are max-min fair as they are.
    seeds_.clear();
    removed_min_rate_ = kInf;
  }
}

void FlowNetwork::release(std::int32_t slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  hot_[static_cast<std::size_t>(slot)].hop_count = 0;
  f.on_done = nullptr;
  f.state = FlowState::kFree;
  f.event = 0;
  f.generation = f.generation >= kMaxGeneration ? 1 : f.generation + 1;
  hot_[static_cast<std::size_t>(slot)].rate = 0;
  free_flows_.push_back(slot);
  --active_;
}

void FlowNetwork::set_rate(std::int32_t slot, double rate) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  FlowHot& h = hot_[static_cast<std::size_t>(slot)];
  const Time_ps now = queue_.now_ps();
  f.remaining_bytes -= h.rate * static_cast<double>(now - f.last_update_ps);
  f.last_update_ps = now;
  for (const Hop& hop : hops(slot)) {
    Link& l = links_[static_cast<std::size_t>(hop.link)];
    advance(l);
    l.load += rate - h.rate;
  }
  h.rate = rate;
}

void FlowNetwork::schedule_completion(std::int32_t slot) {
  Flow& f = flows_[static_cast<std::size_t>(slot)];
  Time_ps at = queue_.now_ps();
  if (f.remaining_bytes > kDoneBytes) {
    at += checked_ceil_ps((f.remaining_bytes - kDoneBytes) / hot_[static_cast<std::size_t>(slot)].rate,
                          "a flow's transfer time");
  }
  if (f.event != 0 && queue_.reschedule(f.event, at)) return;
  f.event = queue_.schedule(at, [this, slot] { complete(slot); });
}

// ---- solver --------------------------------------------------------------------------------------

void FlowNetwork::request_solve(Time_ps at_ps) {
  if (solve_event_ == 0) {
    solve_event_ = queue_.schedule(at_ps, [this] { solve(); });
    solve_at_ps_ = at_ps;
  } else if (at_ps < solve_at_ps_) {
    queue_.reschedule(solve_event_, at_ps);
    solve_at_ps_ = at_ps;
  }
}

Time_ps FlowNetwork::solve_due_ps(std::int32_t slot, double rate) const {
  // The flows that lost their bottleneck keep their rates until the solve, and the links of the
  // ended flow carry `rate` less than they could meanwhile: waiting tolerance x bytes / rate leaves
  // at most tolerance x bytes of capacity idle on each of them. Other ends share the wait in
  // proportion to the flows a solve there re-solves; below 1 / tolerance of them, waiting would
  // only merge solves of unrelated parts of the network into larger ones.
  const Flow& f = flows_[static_cast<std::size_t>(slot)];
  const Time_ps now = queue_.now_ps();
  if (sharing_.mode == SharingMode::exact || !(rate > 0) ||
      static_cast<double>(f.solved_with) * sharing_.tolerance < sharing_.min_batch) {
    return now;
  }
  const double wait_ps = std::floor(sharing_.tolerance * f.bytes / rate);
  const double horizon_ps = static_cast<double>(kMaxTime_ps - now);
  return wait_ps < horizon_ps ? now + static_cast<Time_ps>(wait_ps) : kMaxTime_ps;
}

void FlowNetwork::solve() {
  solve_event_ = 0;
  ++solves_;
  // Roots that finished since they were recorded (at this same instant) are gone; a reused slot
  // is an arrival and a root in its own right.
  roots_.erase(std::remove_if(roots_.begin(), roots_.end(),
                              [this](std::int32_t slot) {
                                return flows_[static_cast<std::size_t>(slot)].state != FlowState::kTransfer;
                              }),
               roots_.end());
  if (!roots_.empty()) {
    // New flows have rate 0, so threshold 0 re-solves everything the region reaches.
    const double threshold = arrivals_ ? 0.0 : removed_min_rate_ * (1 - kSaturationTol);
    // The changed links constrain from the start: new flows load them, and flows that lost their
    // bottleneck will most likely fill them again.
    forced_ = seeds_;
    do {
      collect_region(threshold);
    } while (!fill_region() || !watched_links_fit() || !passing_flows_fit());
    flows_resolved_ += region_flows_.size();
    if (sharing_.mode == SharingMode::epochs) {
      for (std::int32_t slot : region_flows_) {
        flows_[static_cast<std::size_t>(slot)].solved_with = static_cast<std::uint32_t>(region_flows_.size());
      }
    }
    for (std::int32_t slot : region_flows_) {
      const FlowHot& h = hot_[static_cast<std::size_t>(slot)];
      if (std::fabs(h.new_rate - h.rate) <= kSameRateTol * std::max(h.new_rate, h.rate)) continue;
      ++rate_changes_;
      set_rate(slot, h.new_rate);
      schedule_completion(slot);
    }
    refresh_bottlenecks();
  }
  seeds_.clear();
  roots_.clear();
  arrivals_ = false;
  removed_min_rate_ = kInf;
}

void FlowNetwork::collect_region(double threshold) {
  if (++epoch_ == 0) {  // wrapped: old marks could collide with the new epoch
    for (Link& l : links_) l.mark = l.watch = l.scanned = 0;
    for (FlowHot& h : hot_) h.mark = 0;
    epoch_ = 1;
  }
  region_links_.clear();
  region_flows_.clear();
  for (LinkId id : forced_) {
    Link& l = links_[static_cast<std::size_t>(id)];
    if (l.mark == epoch_) continue;
    l.mark = epoch_;
    region_links_.push_back(id);
  }
  for (std::int32_t slot : roots_) add_to_region(slot);
  // Breadth-first: every flow at or above the threshold on a constraining link is re-solved, and
  // its saturated links constrain in turn. Slower flows keep their rates and only take their share
  // off the capacity.
  for (std::size_t i = 0; i < region_links_.size(); ++i) {
    Link& l = links_[static_cast<std::size_t>(region_links_[i])];
    l.residual = l.capacity;
    l.unfrozen = 0;
    for (const FlowRef& ref : l.flows) {
      const FlowHot& h = hot_[static_cast<std::size_t>(ref.flow)];
      if (h.rate >= threshold && ref.bottleneck) add_to_region(ref.flow);
      if (h.mark == epoch_) {
        ++l.unfrozen;
      } else {
        l.residual -= h.rate;
      }
    }
    l.scanned = epoch_;
  }
}

void FlowNetwork::add_to_region(std::int32_t slot) {
  FlowHot& h = hot_[static_cast<std::size_t>(slot)];
  if (h.mark == epoch_) return;
  h.mark = epoch_;
  h.frozen = false;
  region_flows_.push_back(slot);
  for (const Hop& hop : hops(slot)) {
    Link& m = links_[static_cast<std::size_t>(hop.link)];
    if (m.scanned == epoch_) {  // counted as kept when its list was scanned: it is re-solved now
      m.residual += h.rate;
      ++m.unfrozen;
    }
    // An unsaturated link constrains nobody as long as it stays below capacity, which
    // watched_links_fit() checks after the fact instead of pulling in all of its flows.
    if (m.mark == epoch_ || !m.saturated) continue;
    m.mark = epoch_;
    region_links_.push_back(hop.link);
  }
}

bool FlowNetwork::fill_region() {
  // Progressive filling: all unfrozen flows rise together; a link saturates at level
  // residual / unfrozen, a capped flow stops at its cap; the lowest of these freezes its flows.
  // Freezing only raises other links' levels, so agenda entries are lower bounds, refreshed when
  // they reach the top rather than on every change.
  const auto after = [](const Level& a, const Level& b) { return a.level != b.level ? a.level > b.level : a.id > b.id; };
  agenda_.clear();
  for (LinkId id : region_links_) {
    const Link& l = links_[static_cast<std::size_t>(id)];
    if (l.unfrozen > 0) agenda_.push_back(Level{std::max(l.residual, 0.0) / l.unfrozen, id});
  }
  for (std::int32_t slot : region_flows_) {
    const FlowHot& h = hot_[static_cast<std::size_t>(slot)];
    if (!std::isinf(h.cap)) agenda_.push_back(Level{h.cap, ~slot});
  }
  std::make_heap(agenda_.begin(), agenda_.end(), after);

  std::size_t left = region_flows_.size();
  double level = 0;
  while (left > 0 && !agenda_.empty()) {
    std::pop_heap(agenda_.begin(), agenda_.end(), after);
    const Level top = agenda_.back();
    agenda_.pop_back();
    if (top.id >= 0) {
      const Link& l = links_[static_cast<std::size_t>(top.id)];
      if (l.unfrozen == 0) continue;
      const double current = std::max(l.residual, 0.0) / l.unfrozen;
      if (current > top.level) {  // the bound went stale: requeue at the true level
        agenda_.push_back(Level{current, top.id});
        std::push_heap(agenda_.begin(), agenda_.end(), after);
        continue;
      }
      level = std::max(level, current);  // rounding must not let the level go down
      for (const FlowRef& ref : l.flows) {
        const FlowHot& h = hot_[static_cast<std::size_t>(ref.flow)];
        if (h.mark == epoch_ && !h.frozen) {
          freeze(ref.flow, level);
          --left;
        }
      }
    } else {
      const std::int32_t slot = ~top.id;
      const FlowHot& h = hot_[static_cast<std::size_t>(slot)];
      if (h.frozen) continue;
      level = std::max(level, top.level);
      freeze(slot, h.cap);
      --left;
    }
  }
  if (left == 0) return true;
  // Flows that no constraining link or cap stops: their links must constrain; solve again.
  for (std::int32_t slot : region_flows_) {
    if (hot_[static_cast<std::size_t>(slot)].frozen) continue;
    for (const Hop& hop : hops(slot)) forced_.push_back(hop.link);
  }
  return false;
}

bool FlowNetwork::passing_flows_fit() {
  // A flow that only passes through a constraining link (its bottleneck is elsewhere, on a link no
  // re-solved flow crosses) kept its rate. It must not end up above the level at which the link
  // filled: then it would be the one to yield there, and it joins the next attempt.
  bool fit = true;
  for (LinkId id : region_links_) {
    const Link& l = links_[static_cast<std::size_t>(id)];
    if (l.residual > l.capacity * kSaturationTol) continue;  // not full: it bounds nobody
    double level = 0;
    for (const FlowRef& ref : l.flows) {
      const FlowHot& h = hot_[static_cast<std::size_t>(ref.flow)];
      if (h.mark == epoch_) level = std::max(level, h.new_rate);
    }
    for (const FlowRef& ref : l.flows) {
      const FlowHot& h = hot_[static_cast<std::size_t>(ref.flow)];
      if (h.mark != epoch_ && h.rate > level * (1 + kSaturationTol)) {
        roots_.push_back(ref.flow);
        fit = false;
      }
    }
  }
  return fit;
}

bool FlowNetwork::watched_links_fit() {
  // The new rates must leave every non-constraining link strictly below capacity: then it still
  // justifies nobody's rate and its own flows are unaffected. A link that fills up constrains in
  // the next attempt.
  watch_links_.clear();
  for (std::int32_t slot : region_flows_) {
    const FlowHot& h = hot_[static_cast<std::size_t>(slot)];
    for (const Hop& hop : hops(slot)) {
      Link& m = links_[static_cast<std::size_t>(hop.link)];
      if (m.mark == epoch_) continue;
      if (m.watch != epoch_) {
        m.watch = epoch_;
        m.watch_load = m.load;
        watch_links_.push_back(hop.link);
      }
      m.watch_load += h.new_rate - h.rate;
    }
  }
  bool fit = true;
  for (LinkId id : watch_links_) {
    const Link& m = links_[static_cast<std::size_t>(id)];
    if (m.watch_load >= m.capacity * (1 - kSaturationTol)) {
      forced_.push_back(id);
      fit = false;
    }
  }
  return fit;
}

void FlowNetwork::freeze(std::int32_t slot, double rate) {
  FlowHot& h = hot_[static_cast<std::size_t>(slot)];
  h.frozen = true;
  h.new_rate = std::max(rate, kMinRate);
  for (const Hop& hop : hops(slot)) {
    Link& m = links_[static_cast<std::size_t>(hop.link)];
    m.residual -= h.new_rate;
    --m.unfrozen;
  }
}

void FlowNetwork::refresh_bottlenecks() {
  // Saturation and bottleneck flags of every link whose flows' rates may have moved. Links outside
  // the region kept their rates, and so their flags.
  for (LinkId id : region_links_) {
    Link& l = links_[static_cast<std::size_t>(id)];
    advance(l);
    double load = 0;
    double max_rate = 0;
    for (const FlowRef& ref : l.flows) {
      const double r = hot_[static_cast<std::size_t>(ref.flow)].rate;
      load += r;
      max_rate = std::max(max_rate, r);
    }
    l.load = load;  // exact sum, so that incremental updates do not drift
    l.saturated = !l.flows.empty() && load >= l.capacity * (1 - kSaturationTol);
    const double bottleneck_rate = max_rate * (1 - kSaturationTol);
    for (FlowRef& ref : l.flows) {
      FlowHot& h = hot_[static_cast<std::size_t>(ref.flow)];
      const bool bottleneck = l.saturated && h.rate >= bottleneck_rate;
      if (bottleneck != ref.bottleneck) {
        ref.bottleneck = bottleneck;
        h.bottlenecks += bottleneck ? 1 : -1;
      }
    }
  }
  for (std::int32_t slot : region_flows_) {
    FlowHot& h = hot_[static_cast<std::size_t>(slot)];
    const bool at_cap = h.rate >= h.cap * (1 - kSaturationTol);
    if (at_cap != h.at_cap) {
      h.at_cap = at_cap;
      h.bottlenecks += at_cap ? 1 : -1;
    }
  }
}

}  // namespace epsim

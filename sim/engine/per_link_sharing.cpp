// Per-link processor sharing (the model and why: per_link_sharing.hpp).
//
// A link's virtual clock counts the bytes each of its flows has received: it runs at capacity / n
// while n flows are on the link and stands still while none is. A flow that joins when the clock
// reads v and has b bytes ends on that link when the clock reads v + b, whatever joins or leaves
// meanwhile, so its end never has to be recomputed; only the link's next end moves, by one event.
#include "sim/engine/per_link_sharing.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace epsim {

namespace {

// A flow is done on a link once its end is within this many bytes of the clock, so that rounding
// of the clock never leaves one pending forever (the same bound as FlowNetwork's).
constexpr double kDoneBytes = 1e-6;


}  // namespace

PerLinkSharing::PerLinkSharing(EventQueue& queue) : queue_(queue), table_(queue, *this) {}

void PerLinkSharing::reserve_flows(std::size_t flows) {
  table_.reserve(flows);
  paths_.reserve(flows);
}

void PerLinkSharing::add_link(double capacity_GBps) {
  Link link;
  link.capacity = GBps_to_bytes_per_ps(capacity_GBps);
  link.clock_at_ps = queue_.now_ps();
  links_.push_back(std::move(link));
  busy_.emplace_back();
}

PerLinkSharing::FlowId PerLinkSharing::start_flow(const std::vector<int>& links, double bytes, Time_ps latency_ps,
                                                  double rate_cap_GBps, DoneCallback&& on_done,
                                                  EndHints end_hints) {
  table_.check_latency(latency_ps);
  if (links.size() > kMaxFlowLinks)
    throw std::length_error("PerLinkSharing: a route of " + std::to_string(links.size()) + " links");
  const std::int32_t slot = table_.open(std::move(on_done), end_hints);
  if (paths_.size() < table_.slots()) paths_.emplace_back();
  FlowPath& path = paths_[static_cast<std::size_t>(slot)];
  if (links.size() > path.hop_capacity) {  // the old segment is abandoned; slots rarely grow
    path.hop_begin = static_cast<std::uint32_t>(hop_pool_.size());
    path.hop_capacity = static_cast<std::uint16_t>(links.size());
    hop_pool_.resize(hop_pool_.size() + links.size());
  }
  std::copy(links.begin(), links.end(), hop_pool_.begin() + path.hop_begin);
  path.hop_count = static_cast<std::uint16_t>(links.size());
  path.bytes = bytes;
  path.cap = std::isinf(rate_cap_GBps) ? std::numeric_limits<double>::infinity() : GBps_to_bytes_per_ps(rate_cap_GBps);
  const FlowId id = table_.id_of(slot);
  table_.wait(slot, latency_ps);
  return id;
}

void PerLinkSharing::settle_entered() {
  for (const Joined& j : dirty_) {
    Link& l = links_[static_cast<std::size_t>(j.link)];
    l.dirty = false;
    l.ends.settle(j.batch_begin, settle_scratch_);
    schedule_link(j.link);
  }
  dirty_.clear();
}

void PerLinkSharing::advance(Link& link) {
  const Time_ps now = queue_.now_ps();
  if (!link.ends.empty() && now != link.clock_at_ps) {
    link.clock_bytes += link.capacity * static_cast<double>(now - link.clock_at_ps) /
                        static_cast<double>(link.ends.size());
  }
  link.clock_at_ps = now;
}

void PerLinkSharing::enter_transfer(std::int32_t slot) {
  FlowTable<PerLinkSharing>::Flow& f = table_[slot];
  const FlowPath& path = paths_[static_cast<std::size_t>(slot)];
  f.transferring = true;
  std::uint16_t& bounds_left = f.bounds_left;
  bounds_left = 0;
  if (path.bytes <= kDoneBytes || (path.hop_count == 0 && std::isinf(path.cap))) {
    bounds_left = 1;
    table_.bound_met(slot);
    return;
  }
  const Time_ps now = queue_.now_ps();
  for (std::uint32_t k = 0; k < path.hop_count; ++k) {
    const std::int32_t id = hop_pool_[path.hop_begin + k];
    Link& l = links_[static_cast<std::size_t>(id)];
    advance(l);
    LinkBusy& busy = busy_[static_cast<std::size_t>(id)];
    if (l.ends.empty()) busy.since_ps = now;
    busy.joined_bytes += path.bytes;
    const LinkEnd end{l.clock_bytes + path.bytes, l.joined++, slot};
    ++bounds_left;
    // The flows entering at this instant join their links as one batch per link, put in order once
    // after them (settle_entered).
    if (!l.dirty) {
      l.dirty = true;
      dirty_.push_back(Joined{id, l.ends.begin_batch()});
    }
    l.ends.add_to_batch(end);
  }
  if (!std::isinf(path.cap)) {
    ++bounds_left;
    queue_.schedule_in(checked_ceil_ps((path.bytes - kDoneBytes) / path.cap, "a flow's transfer time"),
                       [this, slot] { table_.bound_met(slot); });
  }
}

void PerLinkSharing::schedule_link(std::int32_t id) {
  Link& l = links_[static_cast<std::size_t>(id)];
  if (l.ends.empty()) {
    if (l.event != 0) queue_.cancel(l.event);
    l.event = 0;
    return;
  }
  // The flow that ends next here is touched when its end comes (its bound count, and its callback if
  // this is its last link): requested now, the line arrives while other events run. A wide layer's
  // working set is far larger than the core's caches and its ends come in nearly random order, so
  // without this each end waited for it (docs/performance.md: EP 512 layer 6 to 13% less CPU).
  table_.prefetch(l.ends.front().slot);
  const double left = l.ends.front().at_bytes - l.clock_bytes - kDoneBytes;
  Time_ps at = queue_.now_ps();
  if (left > 0) {
    at += checked_ceil_ps(left * static_cast<double>(l.ends.size()) / l.capacity, "a flow's transfer time");
  }
  if (l.event != 0 && queue_.reschedule(l.event, at)) return;
  l.event = queue_.schedule(at, [this, id] { link_event(id); });
}

void PerLinkSharing::link_event(std::int32_t id) {
  Link& l = links_[static_cast<std::size_t>(id)];
  l.event = 0;
  advance(l);
  ended_.clear();
  while (!l.ends.empty() && l.ends.front().at_bytes <= l.clock_bytes + kDoneBytes) {
    ended_.push_back(l.ends.pop().slot);
    table_.prefetch_end(ended_.back());  // overlaps the callback's first miss with the reschedule
  }
  if (l.ends.empty()) {
    LinkBusy& busy = busy_[static_cast<std::size_t>(id)];
    busy.busy_ps += queue_.now_ps() - busy.since_ps;
  }
  schedule_link(id);
  // The flows' callbacks may start flows on this link: its state is settled first. They never run a
  // link's event, so ended_ is not touched while it is walked.
  for (std::size_t k = 0; k < ended_.size(); ++k) table_.bound_met(ended_[k]);
}

double PerLinkSharing::flow_rate_GBps(FlowId id) const {
  const std::int32_t slot = table_.find(id);
  if (slot < 0 || !table_[slot].transferring) return 0;
  const FlowPath& path = paths_[static_cast<std::size_t>(slot)];
  double rate = path.cap;
  for (std::uint32_t h = 0; h < path.hop_count; ++h) {
    // A link still carries the flow while its end is in the link's heap (a scan: this is for
    // inspection, not for the simulation).
    const Link& l = links_[static_cast<std::size_t>(hop_pool_[path.hop_begin + h])];
    const auto on_link = [slot](const LinkEnd& e) { return e.slot == slot; };
    if (std::any_of(l.ends.begin(), l.ends.end(), on_link))
      rate = std::min(rate, l.capacity / static_cast<double>(l.ends.size()));
  }
  return std::isinf(rate) ? 0 : rate / GBps_to_bytes_per_ps(1.0);
}

double PerLinkSharing::link_bytes(int link) const {
  const Link& l = links_[static_cast<std::size_t>(link)];
  const double joined_bytes = busy_[static_cast<std::size_t>(link)].joined_bytes;
  if (l.ends.empty()) return joined_bytes;
  // What it carried is what joined less what its flows still miss, sum of (end - clock): a walk of
  // its heap, as this is for inspection, not for the simulation.
  const double n = static_cast<double>(l.ends.size());
  const double clock =
      l.clock_bytes + l.capacity * static_cast<double>(queue_.now_ps() - l.clock_at_ps) / n;
  double missing = 0;
  for (const LinkEnd& e : l.ends) missing += e.at_bytes - clock;
  return joined_bytes - missing;
}

Time_ps PerLinkSharing::link_busy_ps(int link) const {
  const LinkBusy& busy = busy_[static_cast<std::size_t>(link)];
  return busy.busy_ps + (links_[static_cast<std::size_t>(link)].ends.empty() ? 0 : queue_.now_ps() - busy.since_ps);
}

}  // namespace epsim

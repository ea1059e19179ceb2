#include "sim/engine/event_queue.hpp"

#include <algorithm>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

namespace epsim {

namespace {

constexpr std::uint64_t kSlotMask = 0xffff'ffffULL;
// Stale entries are dropped in one pass once they outnumber the live ones by this many: the pass
// costs O(entries) and runs at most once per this many cancels or moves, so each pays O(1).
constexpr std::size_t kStaleSlack = 256;
// A slot's stamp is 32 bits; dropping every stale entry before 2^31 stamps have gone by means a
// stale entry can never match its slot's stamp again after a wrap-around.
constexpr std::size_t kMaxStale = std::size_t{1} << 31;
// A bucket this small holds the next events to run (every later bucket is later in time): its
// entries' slots are requested when it is split, so that each arrives while the earlier events run.
// With many events pending, that cache miss per event, not the heap, is what costs.
constexpr std::size_t kPrefetchBucket = 16;

}  // namespace

std::int64_t EventQueue::pending_slot(Handle handle) const {
  const std::uint64_t low = handle & kSlotMask;
  if (low == 0 || low > states_.size()) return -1;
  const std::uint32_t slot = static_cast<std::uint32_t>(low - 1);
  const std::uint32_t generation = states_[slot].generation;
  if ((generation & 1) == 0 || generation != static_cast<std::uint32_t>(handle >> 32)) return -1;
  return slot;
}

void EventQueue::check_not_past(Time_ps at_ps) const {
  // A past timestamp would let time run backwards for whoever reads now() next: a caller's bug. The
  // radix heap relies on it too: every entry's time is >= the last time taken out.
  if (at_ps < now_ps_) {
    throw std::logic_error("EventQueue: event scheduled at " + std::to_string(at_ps) +
                           " ps, before now (" + std::to_string(now_ps_) + " ps)");
  }
  // Beyond the horizon the sums of times that callers make could overflow.
  if (at_ps > kMaxTime_ps)
    throw TimeOverflow("an event at " + short_number(static_cast<double>(at_ps) * 1e-12) +
                       " s is beyond the simulation horizon of 1e+06 s (1e18 ps)");
}

EventQueue::Handle EventQueue::schedule_in(Time_ps delay_ps, Action action) {
  // Checked before the addition, which could overflow for a delay near the int64 limit.
  if (delay_ps > kMaxTime_ps - now_ps_)
    throw TimeOverflow("an event " + short_number(static_cast<double>(delay_ps) * 1e-12) +
                       " s from now is beyond the simulation horizon of 1e+06 s (1e18 ps)");
  return schedule(now_ps_ + delay_ps, std::move(action));
}

EventQueue::Handle EventQueue::schedule(Time_ps at_ps, Action action) {
  check_not_past(at_ps);
  if (!action) throw std::invalid_argument("EventQueue: empty action");
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (states_.size() >= kSlotMask) throw std::length_error("EventQueue: too many pending events");
    slot = static_cast<std::uint32_t>(states_.size());
    states_.emplace_back();
    actions_.emplace_back();
  }
  actions_[slot] = std::move(action);
  const std::uint32_t generation = ++states_[slot].generation;  // odd: pending
  push(at_ps, slot);
  ++live_;
  return (static_cast<std::uint64_t>(generation) << 32) | (static_cast<std::uint64_t>(slot) + 1);
}

bool EventQueue::cancel(Handle handle) {
  const std::int64_t slot = pending_slot(handle);
  if (slot < 0) return false;
  --live_;
  free_slot(static_cast<std::uint32_t>(slot));
  retire_entry(static_cast<std::uint32_t>(slot));
  return true;
}

bool EventQueue::reschedule(Handle handle, Time_ps at_ps) {
  const std::int64_t slot = pending_slot(handle);
  if (slot < 0) return false;
  check_not_past(at_ps);
  // The old entry goes stale and a new one is appended: the moved event runs after those already
  // due at the same time, exactly as a fresh sequence number would order it.
  retire_entry(static_cast<std::uint32_t>(slot));
  push(at_ps, static_cast<std::uint32_t>(slot));
  return true;
}

bool EventQueue::pending(Handle handle) const { return pending_slot(handle) >= 0; }

bool EventQueue::run_next() {
  if (live_ == 0) {
    // Whatever is left is stale. last_ps_ == now_ps_ here, so the heap starts over cleanly.
    if (stale_ > 0) {
      for (auto& bucket : buckets_) bucket.clear();
      head_ = 0;
      nonempty_ = 0;
      stale_ = 0;
    }
    return false;
  }
  const Entry top = pop_live();
  // Take the action out and retire the slot before running it: the action may schedule (and so
  // reuse this slot) or try to cancel itself, which must then report "not pending".
  Action action = std::move(actions_[top.slot]);
  --live_;
  free_slot(top.slot);
  now_ps_ = top.at_ps;
  ++events_run_;
  action();
  return true;
}

void EventQueue::run() {
  while (run_next()) {
  }
}

int EventQueue::bucket_of(Time_ps at_ps) const {
  const std::uint64_t diff = static_cast<std::uint64_t>(at_ps) ^ static_cast<std::uint64_t>(last_ps_);
  return diff == 0 ? 0 : 64 - __builtin_clzll(diff);
}

void EventQueue::push(Time_ps at_ps, std::uint32_t slot) {
  const int b = bucket_of(at_ps);
  buckets_[static_cast<std::size_t>(b)].push_back(Entry{at_ps, slot, states_[slot].stamp});
  nonempty_ |= std::uint64_t{1} << b;
}

void EventQueue::split_lowest_bucket() {
  // Every entry of the lowest non-empty bucket is earlier than every entry above it, so its
  // earliest time becomes last_ps_; relative to it, each entry lands in a strictly lower bucket.
  // Entries are moved in their order, so equal times stay in scheduling order.
  const int b = __builtin_ctzll(nonempty_ & ~std::uint64_t{1});
  std::vector<Entry>& source = buckets_[static_cast<std::size_t>(b)];
  Time_ps earliest = std::numeric_limits<Time_ps>::max();
  for (const Entry& e : source) earliest = std::min(earliest, e.at_ps);
  last_ps_ = earliest;
  if (source.size() <= kPrefetchBucket) {
    for (const Entry& e : source) {
      __builtin_prefetch(&states_[e.slot]);
      __builtin_prefetch(&actions_[e.slot]);
    }
  }
  for (const Entry& e : source) {
    const int to = bucket_of(e.at_ps);
    buckets_[static_cast<std::size_t>(to)].push_back(e);
    nonempty_ |= std::uint64_t{1} << to;
  }
  source.clear();
  nonempty_ &= ~(std::uint64_t{1} << b);
}

EventQueue::Entry EventQueue::pop_live() {
  std::vector<Entry>& due = buckets_[0];
  while (true) {
    if (head_ == due.size()) split_lowest_bucket();
    const Entry e = due[head_++];
    if (head_ == due.size()) {
      due.clear();
      head_ = 0;
      nonempty_ &= ~std::uint64_t{1};
    }
    if (is_live(e)) return e;
    --stale_;
  }
}

void EventQueue::retire_entry(std::uint32_t slot) {
  ++states_[slot].stamp;
  ++stale_;
  if (stale_ > live_ + kStaleSlack || stale_ >= kMaxStale) drop_stale_entries();
}

void EventQueue::drop_stale_entries() {
  // Stable, so equal times keep their scheduling order.
  const auto stale = [this](const Entry& e) { return !is_live(e); };
  std::vector<Entry>& due = buckets_[0];
  due.erase(std::remove_if(due.begin() + static_cast<std::ptrdiff_t>(head_), due.end(), stale), due.end());
  due.erase(due.begin(), due.begin() + static_cast<std::ptrdiff_t>(head_));
  head_ = 0;
  nonempty_ = 0;
  for (std::size_t b = 0; b < buckets_.size(); ++b) {
    std::vector<Entry>& bucket = buckets_[b];
    if (b > 0) bucket.erase(std::remove_if(bucket.begin(), bucket.end(), stale), bucket.end());
    if (!bucket.empty()) nonempty_ |= std::uint64_t{1} << b;
  }
  stale_ = 0;
}

void EventQueue::free_slot(std::uint32_t slot) {
  actions_[slot] = nullptr;  // releases captured state now, not when the slot is reused
  ++states_[slot].generation;  // even: free
  free_slots_.push_back(slot);
}

}  // namespace epsim

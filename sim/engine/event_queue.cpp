#include "sim/engine/event_queue.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace epsim {

namespace {

constexpr std::uint64_t kSlotMask = 0xffff'ffffULL;

}  // namespace

std::int64_t EventQueue::pending_slot(Handle handle) const {
  const std::uint64_t low = handle & kSlotMask;
  if (low == 0 || low > slots_.size()) return -1;
  const std::uint32_t slot = static_cast<std::uint32_t>(low - 1);
  const Slot& s = slots_[slot];
  if (s.heap_pos < 0 || s.generation != static_cast<std::uint32_t>(handle >> 32)) return -1;
  return slot;
}

void EventQueue::check_not_past(Time_ps at_ps) const {
  // A past timestamp would let time run backwards for whoever reads now() next: a caller's bug.
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
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  }
  Slot& s = slots_[slot];
  s.action = std::move(action);
  heap_.push_back(Entry{at_ps, next_seq_++, slot});
  s.heap_pos = static_cast<std::int32_t>(heap_.size() - 1);
  sift_up(heap_.size() - 1);
  return (static_cast<std::uint64_t>(s.generation) << 32) | (static_cast<std::uint64_t>(slot) + 1);
}

bool EventQueue::cancel(Handle handle) {
  const std::int64_t slot = pending_slot(handle);
  if (slot < 0) return false;
  erase_at(static_cast<std::size_t>(slots_[slot].heap_pos));
  return true;
}

bool EventQueue::reschedule(Handle handle, Time_ps at_ps) {
  const std::int64_t slot = pending_slot(handle);
  if (slot < 0) return false;
  check_not_past(at_ps);
  const std::size_t pos = static_cast<std::size_t>(slots_[slot].heap_pos);
  Entry& e = heap_[pos];
  const bool earlier = at_ps < e.at_ps;
  e.at_ps = at_ps;
  e.seq = next_seq_++;  // a moved event runs after those already due at the same time
  if (earlier) {
    sift_up(pos);
  } else {
    sift_down(pos);  // later time or same time with a larger sequence: only downwards
  }
  return true;
}

bool EventQueue::pending(Handle handle) const { return pending_slot(handle) >= 0; }

bool EventQueue::run_next() {
  if (heap_.empty()) return false;
  const Entry top = heap_.front();
  // Take the action out and retire the slot before running it: the action may schedule (and so
  // reuse this slot) or try to cancel itself, which must then report "not pending".
  Action action = std::move(slots_[top.slot].action);
  erase_at(0);
  now_ps_ = top.at_ps;
  ++events_run_;
  action();
  return true;
}

void EventQueue::run() {
  while (run_next()) {
  }
}

void EventQueue::place(std::size_t pos, const Entry& entry) {
  heap_[pos] = entry;
  slots_[entry.slot].heap_pos = static_cast<std::int32_t>(pos);
}

void EventQueue::sift_up(std::size_t pos) {
  const Entry moving = heap_[pos];
  while (pos > 0) {
    const std::size_t parent = (pos - 1) / 2;
    if (!before(moving, heap_[parent])) break;
    place(pos, heap_[parent]);
    pos = parent;
  }
  place(pos, moving);
}

void EventQueue::sift_down(std::size_t pos) {
  const Entry moving = heap_[pos];
  const std::size_t n = heap_.size();
  while (true) {
    std::size_t child = 2 * pos + 1;
    if (child >= n) break;
    if (child + 1 < n && before(heap_[child + 1], heap_[child])) ++child;
    if (!before(heap_[child], moving)) break;
    place(pos, heap_[child]);
    pos = child;
  }
  place(pos, moving);
}

void EventQueue::erase_at(std::size_t pos) {
  const std::uint32_t slot = heap_[pos].slot;
  const std::size_t last = heap_.size() - 1;
  if (pos != last) {
    const Entry moved = heap_[last];
    heap_.pop_back();
    place(pos, moved);
    // The moved entry may belong above or below its new position.
    if (pos > 0 && before(moved, heap_[(pos - 1) / 2])) {
      sift_up(pos);
    } else {
      sift_down(pos);
    }
  } else {
    heap_.pop_back();
  }
  free_slot(slot);
}

void EventQueue::free_slot(std::uint32_t slot) {
  Slot& s = slots_[slot];
  s.action = nullptr;  // releases captured state now, not when the slot is reused
  s.heap_pos = -1;
  ++s.generation;
  free_slots_.push_back(slot);
}

}  // namespace epsim

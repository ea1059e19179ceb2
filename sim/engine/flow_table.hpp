// The flows of a coarse sharing model (PerLinkSharing, GroupSharing): their slots and ids, their
// callbacks and bound counts, and the lists in which they wait out their latency.
//
// Both models end a flow when the last of its bounds is met (a link, a group, a rate cap), and both
// let a flow enter its links only after its latency. What differs is what entering and a bound are:
// the model supplies enter_transfer(slot), run for each flow whose latency has passed, and
// settle_entered(), run once after all the flows due at one instant with one latency entered.
//
// Why lists: flows started with one latency enter their links in the order they were started, at
// times that never decrease (now never does), so one queue event per list serves them all. A layer
// has a handful of latencies (NVLink, IB, IB + NVLink, PCIe) and a wide one hundreds of thousands of
// flows: an event of its own per flow was a fifth of the engine's events.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/end_hints.hpp"
#include "sim/engine/event_queue.hpp"

namespace epsim {

/// The most links one flow may cross: its bounds, one a link and one for its cap, count down in
/// FlowTable::Flow::bounds_left's 16 bits. FlowNetwork and both coarse models refuse longer routes.
constexpr std::size_t kMaxFlowLinks = 0xffff - 1;

template <class Model>
class FlowTable {
 public:
  /// Called when a flow ends: (time the flow was started, time it ended).
  using DoneCallback = std::function<void(Time_ps started_ps, Time_ps ended_ps)>;
  using FlowId = std::int64_t;

  /// What a flow's ends touch, in one cache line: each bound met counts down, and the last one runs
  /// its callback. A wide layer's ends come in nearly random order, so each is a cache miss; a count
  /// kept in a table of its own would make that two.
  struct alignas(64) Flow {
    DoneCallback on_done;
    Time_ps started_ps = 0;
    /// What the callback will read first (open's end_hints): requested when the flow's last bound
    /// is found met, it arrives while the model settles before the callback runs.
    EndHints end_hints;
    std::uint32_t generation = 1;
    /// Bounds (links, groups, a cap) not met yet: at most one a link and one for its cap, and a
    /// flow crosses at most kMaxFlowLinks links.
    std::uint16_t bounds_left = 0;
    bool active = false;
    /// Its latency has passed: PerLinkSharing's flag. GroupSharing keeps its own in its FlowPath,
    /// the line its entry touches, and leaves this one false.
    bool transferring = false;
  };
  static_assert(sizeof(Flow) == 64, "a flow's end touches one cache line");

  FlowTable(EventQueue& queue, Model& model) : queue_(queue), model_(model) {}

  void reserve(std::size_t flows) {
    flows_.reserve(flows);
    free_slots_.reserve(flows);
  }
  /// Slots ever used: a model's tables parallel to this one grow to it.
  std::size_t slots() const { return flows_.size(); }
  std::size_t active() const { return active_; }
  Flow& operator[](std::int32_t slot) { return flows_[static_cast<std::size_t>(slot)]; }
  const Flow& operator[](std::int32_t slot) const { return flows_[static_cast<std::size_t>(slot)]; }
  void prefetch(std::int32_t slot) const { __builtin_prefetch(&flows_[static_cast<std::size_t>(slot)], 1); }
  /// The flow's entry is read now; if the bound being met is its last, what its callback reads
  /// first is requested too.
  void prefetch_end(std::int32_t slot) const {
    const Flow& f = flows_[static_cast<std::size_t>(slot)];
    if (f.bounds_left != 1) return;
    if (f.end_hints.first != nullptr) __builtin_prefetch(f.end_hints.first);
    if (f.end_hints.then != nullptr) __builtin_prefetch(f.end_hints.then);
  }
  /// The slot that the open() `later` calls after the next one takes, if that many slots are free,
  /// else -1: a model that starts flows in bursts requests them (and its own entries for them)
  /// ahead.
  std::int32_t next_free(std::size_t later = 0) const {
    return free_slots_.size() <= later ? -1 : free_slots_[free_slots_.size() - 1 - later];
  }

  /// Throws TimeOverflow unless a flow started now with `latency_ps` would enter within the horizon:
  /// the queue's own check, made here since the flow waits in a list rather than as an event.
  void check_latency(Time_ps latency_ps) const {
    if (latency_ps > kMaxTime_ps - queue_.now_ps())
      throw TimeOverflow("a flow's latency of " + short_number(static_cast<double>(latency_ps) * 1e-12) +
                         " s from now is beyond the simulation horizon of 1e+06 s (1e18 ps)");
  }
  /// A slot for a flow started now; the model fills what it keeps of the flow, then calls wait().
  /// `end_hints`: what the callback reads first (FlowNetwork::start_flow).
  std::int32_t open(DoneCallback&& on_done, EndHints end_hints = {}) {
    std::int32_t slot;
    if (!free_slots_.empty()) {
      slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      slot = static_cast<std::int32_t>(flows_.size());
      flows_.emplace_back();
    }
    Flow& f = flows_[static_cast<std::size_t>(slot)];
    f.on_done = std::move(on_done);
    f.end_hints = end_hints;
    f.started_ps = queue_.now_ps();
    f.active = true;
    f.transferring = false;
    ++active_;
    return slot;
  }
  /// The flow in `slot` enters after `latency_ps` (checked with check_latency); even a flow with
  /// nothing to move ends from an event, never inside the call that started it.
  void wait(std::int32_t slot, Time_ps latency_ps) {
    std::size_t list = 0;
    while (list < arrivals_.size() && arrivals_[list].latency_ps != latency_ps) ++list;
    if (list == arrivals_.size()) arrivals_.push_back(Arrivals{latency_ps, {}, 0, 0});
    Arrivals& a = arrivals_[list];
    const Time_ps at = queue_.now_ps() + latency_ps;
    a.waiting.emplace_back(at, slot);
    if (a.event == 0) a.event = queue_.schedule(at, [this, list] { arrive(list); });
  }

  FlowId id_of(std::int32_t slot) const {
    return (static_cast<FlowId>(flows_[static_cast<std::size_t>(slot)].generation) << 32) | slot;
  }
  /// The slot of an active flow, or -1 (ended, or an unknown id).
  std::int32_t find(FlowId id) const {
    if (id < 0) return -1;
    const std::uint64_t slot = static_cast<std::uint64_t>(id) & 0xffff'ffffULL;
    if (slot >= flows_.size()) return -1;
    const Flow& f = flows_[slot];
    if (!f.active || f.generation != static_cast<std::uint32_t>(id >> 32)) return -1;
    return static_cast<std::int32_t>(slot);
  }

  /// One of the flow's bounds is met; the last one ends the flow and runs its callback, after the
  /// slot is free (the callback may start flows that take it).
  void bound_met(std::int32_t slot) {
    Flow& f = flows_[static_cast<std::size_t>(slot)];
    if (--f.bounds_left > 0) return;
    DoneCallback on_done = std::move(f.on_done);
    const Time_ps started_ps = f.started_ps;
    f.on_done = nullptr;
    f.active = false;
    f.transferring = false;
    f.generation = f.generation >= kMaxGeneration ? 1 : f.generation + 1;
    free_slots_.push_back(slot);
    --active_;
    if (on_done) on_done(started_ps, queue_.now_ps());
  }

 private:
  static constexpr std::uint32_t kMaxGeneration = 0x7fff'ffff;  // keeps FlowIds positive

  /// The flows started with one latency, waiting for it to pass, in start order.
  struct Arrivals {
    Time_ps latency_ps = 0;
    std::vector<std::pair<Time_ps, std::int32_t>> waiting;  ///< (enters at, slot), from `head` on
    std::size_t head = 0;
    EventQueue::Handle event = 0;
  };

  /// Enters every flow of arrivals_[list] due now, then schedules the list's next.
  void arrive(std::size_t list) {
    arrivals_[list].event = 0;
    const Time_ps now = queue_.now_ps();
    // enter_transfer may end an empty flow, whose callback may start flows: `waiting` can grow (and
    // move) meanwhile, so it is read by index, and with no latency a new flow is due now too.
    while (arrivals_[list].head < arrivals_[list].waiting.size() &&
           arrivals_[list].waiting[arrivals_[list].head].first == now) {
      const std::int32_t slot = arrivals_[list].waiting[arrivals_[list].head++].second;
      model_.enter_transfer(slot);
    }
    model_.settle_entered();
    Arrivals& a = arrivals_[list];
    if (a.head == a.waiting.size()) {
      a.waiting.clear();
      a.head = 0;
      return;
    }
    if (a.head > a.waiting.size() / 2) {  // keep the list's memory bounded by what waits
      a.waiting.erase(a.waiting.begin(), a.waiting.begin() + static_cast<std::ptrdiff_t>(a.head));
      a.head = 0;
    }
    // A flow started meanwhile (by an empty flow's end) may have scheduled the list's event at its own
    // time, later than the head's: the event goes to the head.
    const Time_ps next = a.waiting[a.head].first;
    if (a.event != 0 && !queue_.reschedule(a.event, next)) a.event = 0;
    if (a.event == 0) a.event = queue_.schedule(next, [this, list] { arrive(list); });
  }

  EventQueue& queue_;
  Model& model_;
  std::vector<Flow> flows_;
  std::vector<std::int32_t> free_slots_;
  std::vector<Arrivals> arrivals_;  ///< one per latency seen
  std::size_t active_ = 0;
};

}  // namespace epsim

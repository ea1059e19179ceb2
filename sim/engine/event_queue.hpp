// The simulator's future-event set: an indexed binary heap ordered by (time, sequence number).
// Equal times resolve in scheduling order, so a run is deterministic. Events are addressed by handle
// and can be cancelled or moved, which the flow model needs: a flow's completion time changes every
// time another flow starts or ends on a link it shares.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <vector>

#include "sim/core/time.hpp"

namespace epsim {

class EventQueue {
 public:
  using Handle = std::uint64_t;  ///< 0 is never a valid handle
  using Action = std::function<void()>;

  /// Schedules `action` at absolute time `at_ps` (must be >= now(); throws TimeOverflow beyond
  /// kMaxTime_ps). Returns its handle.
  Handle schedule(Time_ps at_ps, Action action);
  /// Schedules `action` `delay_ps` after now() (throws TimeOverflow when that is beyond kMaxTime_ps).
  Handle schedule_in(Time_ps delay_ps, Action action);
  /// Removes a pending event. Returns false if it already ran or was cancelled.
  bool cancel(Handle handle);
  /// Moves a pending event to `at_ps` (>= now()); it takes a fresh sequence number, i.e. it runs after
  /// events already scheduled for the same time. Returns false if the event is no longer pending.
  bool reschedule(Handle handle, Time_ps at_ps);
  /// True while `handle` is scheduled and has not run.
  bool pending(Handle handle) const;

  /// Pops the earliest event, advances now() to its time and runs it. Returns false if empty.
  bool run_next();
  /// Runs events until none is left.
  void run();

  Time_ps now_ps() const { return now_ps_; }
  bool empty() const { return heap_.empty(); }
  std::size_t size() const { return heap_.size(); }
  /// Events run so far (for the engine benchmark).
  std::uint64_t events_run() const { return events_run_; }

 private:
  // A handle packs (generation << 32) | (slot + 1): the slot addresses the action and its heap
  // position in O(1) without a hash map, and the generation, bumped whenever a slot is freed, makes a
  // stale handle (already run or cancelled) fail every lookup even after the slot is reused.
  struct Slot {
    Action action;
    std::uint32_t generation = 1;
    std::int32_t heap_pos = -1;  ///< -1 when the slot is free
  };
  // Heap entries carry the ordering key inline so that sifting never touches the slots' actions.
  struct Entry {
    Time_ps at_ps;
    std::uint64_t seq;
    std::uint32_t slot;
  };

  static bool before(const Entry& a, const Entry& b) {
    return a.at_ps != b.at_ps ? a.at_ps < b.at_ps : a.seq < b.seq;
  }
  /// Slot of a pending handle, or -1.
  std::int64_t pending_slot(Handle handle) const;
  void check_not_past(Time_ps at_ps) const;
  void place(std::size_t pos, const Entry& entry);
  void sift_up(std::size_t pos);
  void sift_down(std::size_t pos);
  /// Removes the entry at heap position `pos` and frees its slot (the action is left to the caller).
  void erase_at(std::size_t pos);
  void free_slot(std::uint32_t slot);

  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;  ///< reused LIFO, deterministic
  std::uint64_t next_seq_ = 0;
  Time_ps now_ps_ = 0;
  std::uint64_t events_run_ = 0;
};

}  // namespace epsim

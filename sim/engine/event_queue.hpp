// The simulator's future-event set: a radix heap over integer picoseconds. Equal times resolve in
// scheduling order, so a run is deterministic. Events are addressed by handle and can be cancelled or
// moved, which the flow model needs: a flow's completion time changes every time another flow starts
// or ends on a link it shares.
//
// Why a radix heap: simulated time never goes backwards (an event is never scheduled before now), so
// the keys are monotone integers and an entry only ever moves to lower buckets, each move a sequential
// append. A comparison heap instead walks log(n) levels of a large array per event, which falls out of
// the cache beyond ~10k pending events. Cancelled and moved events leave their old entry in place,
// marked stale by a per-slot stamp, and are dropped when reached or when the stale entries outnumber
// the live ones.
#pragma once

#include <array>
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
  bool empty() const { return live_ == 0; }
  std::size_t size() const { return live_; }
  /// Events run so far (for the engine benchmark).
  std::uint64_t events_run() const { return events_run_; }

 private:
  // A handle packs (generation << 32) | (slot + 1): the slot addresses the action in O(1) without a
  // hash map. The generation is bumped when a slot is taken and again when it is freed, so it is odd
  // exactly while the slot's event is pending, and a stale handle (already run or cancelled) fails
  // every lookup even after the slot is reused.
  //
  // The state is kept apart from the actions: 8 bytes a slot, so that the stale-entry checks and the
  // handle lookups of 100k pending events stay in the core's cache, while each action is touched only
  // when its event runs (and is prefetched before).
  struct SlotState {
    std::uint32_t generation = 0;
    /// Stamp of the slot's one live entry; bumped when that entry goes stale (cancel, reschedule).
    std::uint32_t stamp = 0;
  };
  /// 16 bytes, so that four fit a cache line. Scheduling order among equal times is kept by position:
  /// entries are appended and buckets are only ever split in order, never sorted.
  struct Entry {
    Time_ps at_ps;
    std::uint32_t slot;
    std::uint32_t stamp;
  };
  // Bucket 0 holds entries due at last_ps_; bucket b >= 1 those whose time first differs from
  // last_ps_ in bit b - 1. Times are below 2^60, so 61 buckets suffice.
  static constexpr int kBuckets = 61;

  /// Slot of a pending handle, or -1.
  std::int64_t pending_slot(Handle handle) const;
  void check_not_past(Time_ps at_ps) const;
  int bucket_of(Time_ps at_ps) const;
  void push(Time_ps at_ps, std::uint32_t slot);
  bool is_live(const Entry& entry) const { return entry.stamp == states_[entry.slot].stamp; }
  /// Moves the entries of the lowest non-empty bucket above 0 into lower buckets, from its earliest
  /// time on. Requires bucket 0 to be empty and some other bucket not.
  void split_lowest_bucket();
  /// The earliest live entry, removed from the heap. Requires live_ > 0.
  Entry pop_live();
  /// Marks the live entry of `slot` stale, dropping stale entries if they outnumber live ones.
  void retire_entry(std::uint32_t slot);
  void drop_stale_entries();
  void free_slot(std::uint32_t slot);

  std::array<std::vector<Entry>, kBuckets> buckets_;
  std::size_t head_ = 0;           ///< bucket 0 is a FIFO: entries before head_ are gone
  std::uint64_t nonempty_ = 0;     ///< bit b set when bucket b holds entries
  Time_ps last_ps_ = 0;            ///< time of the latest entry taken out, <= every entry's time

  std::vector<SlotState> states_;
  std::vector<Action> actions_;            ///< parallel to states_
  std::vector<std::uint32_t> free_slots_;  ///< reused LIFO, deterministic
  std::size_t live_ = 0;                   ///< pending events
  std::size_t stale_ = 0;                  ///< entries of cancelled or moved events still held
  Time_ps now_ps_ = 0;
  std::uint64_t events_run_ = 0;
};

}  // namespace epsim

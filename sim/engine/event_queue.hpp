// The simulator's future-event set: a radix heap over integer picoseconds, one byte of the time per
// level. Equal times resolve in scheduling order, so a run is deterministic. Events are addressed by
// handle and can be cancelled or moved, which the flow model needs: a flow's completion time changes
// every time another flow starts or ends on a link it shares.
//
// Why a radix heap: simulated time never goes backwards (an event is never scheduled before now), so
// the keys are monotone integers and an entry only ever moves to lower buckets, each move a sequential
// append. A comparison heap instead walks log(n) levels of a large array per event, which falls out of
// the cache beyond ~10k pending events. With a byte per level an entry moves at most once per byte in
// which its time differs from now: at most twice for events up to 16 us ahead, three times up to
// 4 ms, where one bucket per bit moved it about once per bit; the lowest bucket, when it holds one
// entry, is taken out without moving it. Cancelled and moved events leave their old entry in place,
// marked stale by a per-slot stamp; stale entries are dropped when reached, before a far-off bucket
// is split, or in one pass once they pile up. Events scheduled at now (the flow model's solve after
// a completion) skip the heap: they queue behind those it holds for now.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "sim/core/time.hpp"

namespace epsim {

class EventQueue {
 public:
  using Handle = std::uint64_t;  ///< 0 is never a valid handle

  /// What an event runs: any callable without arguments (a lambda, a std::function), or nullptr for
  /// none, which schedule() refuses. One that is trivially copyable and at most 16 bytes, as the
  /// engine's lambdas are (`this` and an index), is held inline: 24 bytes with the function that
  /// runs it, where a std::function takes 32 and a call through its manager to move or destroy. Any
  /// other callable is moved to the heap.
  class Action {
   public:
    Action() = default;
    Action(std::nullptr_t) {}  // NOLINT: implicit, as for std::function
    template <class F, class D = std::decay_t<F>,
              class = std::enable_if_t<!std::is_same_v<D, Action> && std::is_invocable_r_v<void, D&>>>
    Action(F&& f) {  // NOLINT: implicit, so that schedule() takes lambdas as they are
      if constexpr (std::is_constructible_v<bool, const D&>) {
        if (!static_cast<bool>(f)) return;  // an empty std::function or a null function pointer
      }
      if constexpr (kInline<D>) {
        ::new (static_cast<void*>(storage_.bytes)) D(std::forward<F>(f));
        call_ = &call_inline<D>;
      } else {
        D* held = new D(std::forward<F>(f));
        std::memcpy(storage_.bytes, &held, sizeof held);
        call_ = &call_heap<D>;
      }
    }
    Action(Action&& other) noexcept : call_(std::exchange(other.call_, nullptr)), storage_(other.storage_) {}
    Action& operator=(Action&& other) noexcept {
      if (this != &other) {
        reset();
        call_ = std::exchange(other.call_, nullptr);
        storage_ = other.storage_;
      }
      return *this;
    }
    Action(const Action&) = delete;
    Action& operator=(const Action&) = delete;
    ~Action() { reset(); }
    explicit operator bool() const { return call_ != nullptr; }

   private:
    friend class EventQueue;
    struct Storage {
      alignas(8) unsigned char bytes[16];
    };
    /// Runs the callable once and releases it (`run`), or releases it without running (`destroy`).
    /// Either way the storage is spent: an action is held by the queue as these raw 24 bytes, which
    /// move by copying (inline callables are trivially copyable, the heap's are a pointer).
    enum class Op { run, destroy };
    using Call = void (*)(Storage&, Op);
    template <class D>
    static constexpr bool kInline = sizeof(D) <= sizeof(Storage) && alignof(D) <= alignof(Storage) &&
                                    std::is_trivially_copyable_v<D>;

    template <class D>
    static void call_inline(Storage& storage, Op op) {
      if (op == Op::run) (*std::launder(reinterpret_cast<D*>(storage.bytes)))();
    }
    template <class D>
    static void call_heap(Storage& storage, Op op) {
      D* held;
      std::memcpy(&held, storage.bytes, sizeof held);
      const std::unique_ptr<D> owner(held);  // released even when the callable throws
      if (op == Op::run) (*held)();
    }
    void reset() {
      if (call_ != nullptr) std::exchange(call_, nullptr)(storage_, Op::destroy);
    }

    Call call_ = nullptr;
    Storage storage_{};
  };

  EventQueue() = default;
  /// Releases the actions of events still pending.
  ~EventQueue();
  EventQueue(const EventQueue&) = delete;
  EventQueue& operator=(const EventQueue&) = delete;

  /// Schedules `action` at absolute time `at_ps` (must be >= now(); throws TimeOverflow beyond
  /// kMaxTime_ps). Returns its handle.
  Handle schedule(Time_ps at_ps, Action action) { return insert(at_ps, action); }
  /// Schedules `action` `delay_ps` after now() (throws TimeOverflow when that is beyond kMaxTime_ps).
  Handle schedule_in(Time_ps delay_ps, Action action) {
    // Checked before the addition, which could overflow for a delay near the int64 limit.
    if (__builtin_expect(delay_ps > kMaxTime_ps - now_ps_, 0)) throw_bad_delay(delay_ps);
    return insert(now_ps_ + delay_ps, action);
  }
  /// Removes a pending event. Returns false if it already ran or was cancelled.
  bool cancel(Handle handle);
  /// Moves a pending event to `at_ps` (>= now()); it takes a fresh sequence number, i.e. it runs after
  /// events already scheduled for the same time. Returns false if the event is no longer pending.
  /// Inline, as the flow model moves several events per event run.
  bool reschedule(Handle handle, Time_ps at_ps) {
    const std::int64_t slot = pending_slot(handle);
    if (slot < 0) return false;
    check_time(at_ps);
    // The old entry goes stale and a new one is appended: the moved event runs after those already
    // due at the same time, exactly as a fresh sequence number would order it.
    const std::uint32_t index = static_cast<std::uint32_t>(slot);
    retire_entry(index);
    file_entry(at_ps, index, states_[index].stamp);
    return true;
  }
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
  /// A pending event's action, owned by the queue (see Action::Op).
  struct HeldAction {
    Action::Call call;
    Action::Storage storage;
  };
  /// 16 bytes, so that four fit a cache line. Scheduling order among equal times is kept by position:
  /// entries are appended and buckets are only ever split in order, never sorted.
  struct Entry {
    Time_ps at_ps;
    std::uint32_t slot;
    std::uint32_t stamp;
  };

  // Bucket (level, digit) holds the entries whose time first differs from last_ps_ in byte `level`,
  // where it has the value `digit`; level 0 holds single times, among them last_ps_ itself. Index
  // level * 256 + digit, so that the bucket order is the time order. Times are below 2^60: 8 levels.
  static constexpr int kDigitBits = 8;
  static constexpr int kDigits = 1 << kDigitBits;
  static constexpr int kLevels = 8;
  static constexpr int kBuckets = kLevels * kDigits;
  static constexpr int kBucketWords = kBuckets / 64;

  // A bucket is a list of chunks from a free list: buckets come and go as time advances through
  // their digits, 2,048 of them, and a vector per bucket would keep its largest size for every digit,
  // where chunks keep the memory at what the pending entries need. Levels 0 and 1 (entries due
  // within 65,536 ps of last_ps_) hold few entries a bucket and are read soon after they are filled:
  // chunks of 256 bytes, 15 entries. Above, a bucket collects entries for a long time and is read
  // when its time comes, long after they left the core's cache: chunks of 4 KiB, 255 entries, which
  // the hardware prefetcher streams, where small scattered chunks would cost a miss each. A chunk
  // is its link followed by its entries, aligned to its size, so that a pointer one past its last
  // entry is aligned: a bucket is its first chunk and the end of its entries, nothing else.
  struct alignas(16) Chunk {
    Chunk* next;
  };
  static constexpr std::size_t kSmallChunk_bytes = 256;
  static constexpr std::size_t kLargeChunk_bytes = 4096;
  static constexpr int kFirstLargeChunkBucket = 2 * kDigits;
  static std::uintptr_t chunk_mask(int b) {
    return (b < kFirstLargeChunkBucket ? kSmallChunk_bytes : kLargeChunk_bytes) - 1;
  }
  static Entry* entries_of(Chunk* chunk) { return reinterpret_cast<Entry*>(chunk + 1); }
  static bool at_chunk_end(const Entry* end, int b) {
    return (reinterpret_cast<std::uintptr_t>(end) & chunk_mask(b)) == 0;
  }
  /// The chunk of bucket b holding the entry before `end`.
  static Chunk* chunk_before(const Entry* end, int b) {
    return reinterpret_cast<Chunk*>((reinterpret_cast<std::uintptr_t>(end) - 1) & ~chunk_mask(b));
  }
  /// One past the last entry of `chunk` in bucket b.
  const Entry* chunk_end(Chunk* chunk, int b) const {
    const Entry* end = ends_[static_cast<std::size_t>(b)];
    if (chunk == chunk_before(end, b)) return end;
    return reinterpret_cast<const Entry*>(reinterpret_cast<std::uintptr_t>(chunk) + chunk_mask(b) + 1);
  }
  /// Chunks of one size: a free list, refilled from blocks that double up to 2 MiB, so that a small
  /// queue stays small and a large one is not spread over thousands of blocks.
  class ChunkPool {
   public:
    explicit ChunkPool(std::size_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}
    Chunk* take() {
      if (free_ == nullptr) refill();
      return std::exchange(free_, free_->next);
    }
    void give(Chunk* chunk) {
      chunk->next = free_;
      free_ = chunk;
    }

   private:
    struct Release {
      void operator()(void* block) const;
    };
    void refill();
    std::size_t chunk_bytes_;
    Chunk* free_ = nullptr;
    std::size_t block_bytes_ = 0;
    std::vector<std::unique_ptr<void, Release>> blocks_;
  };
  ChunkPool& pool(int b) { return b < kFirstLargeChunkBucket ? small_chunks_ : large_chunks_; }

  static constexpr std::uint64_t kSlotMask = 0xffff'ffffULL;
  // Stale entries are dropped in one pass once they outnumber the live ones twice over, plus this
  // many: the pass costs O(entries) and runs at most once per as many cancels or moves as there
  // are live entries, so each pays O(1). Twice, because most stale entries are dropped anyway,
  // before the far-off bucket they wait in is split, and until then they pile up: in the flow
  // pattern benchmark (four completions moved per solve, each to within 1 us) to 1.76 times the
  // live ones on average, past the start never twice. A bound at once the live ones made the pass
  // run over every entry again and again: 47% of the misses in a 4 MiB cache under cachegrind.
  static constexpr std::size_t kStaleSlack = 256;
  // A slot's stamp is 32 bits; dropping every stale entry before 2^31 stamps have gone by means a
  // stale entry can never match its slot's stamp again after a wrap-around.
  static constexpr std::size_t kMaxStale = std::size_t{1} << 31;

  /// Slot of a pending handle, or -1.
  std::int64_t pending_slot(Handle handle) const {
    const std::uint64_t low = handle & kSlotMask;
    if (low == 0 || low > states_.size()) return -1;
    const std::uint32_t slot = static_cast<std::uint32_t>(low - 1);
    const std::uint32_t generation = states_[slot].generation;
    if ((generation & 1) == 0 || generation != static_cast<std::uint32_t>(handle >> 32)) return -1;
    return slot;
  }
  void check_time(Time_ps at_ps) const {
    if (__builtin_expect(at_ps < now_ps_ || at_ps > kMaxTime_ps, 0)) throw_bad_time(at_ps);
  }
  [[noreturn]] void throw_bad_time(Time_ps at_ps) const;
  [[noreturn]] static void throw_bad_delay(Time_ps delay_ps);
  [[noreturn]] static void throw_empty_action();
  /// Inline, so that the callable's bytes reach insert_held in registers: read back from memory
  /// they would be one wide load over the narrower stores that built them, which the core cannot
  /// forward and makes wait until they are written.
  Handle insert(Time_ps at_ps, Action& action) {
    check_time(at_ps);
    if (!action) throw_empty_action();
    std::uint64_t words[2];
    std::memcpy(words, action.storage_.bytes, sizeof words);
    return insert_held(at_ps, std::exchange(action.call_, nullptr), words[0], words[1]);
  }
  /// Takes a slot for the action made of `call` and the storage `word0`, `word1`, and appends its
  /// entry at `at_ps`.
  Handle insert_held(Time_ps at_ps, Action::Call call, std::uint64_t word0, std::uint64_t word1);
  int bucket_of(Time_ps at_ps) const {
    const std::uint64_t time = static_cast<std::uint64_t>(at_ps);
    const std::uint64_t diff = time ^ static_cast<std::uint64_t>(last_ps_);
    // The lowest bit of the byte in which the time first differs from last_ps_: level * 8.
    const unsigned shift = static_cast<unsigned>(63 - __builtin_clzll(diff | 1)) & ~(kDigitBits - 1u);
    return static_cast<int>((shift << (kDigitBits - 3)) | ((time >> shift) & (kDigits - 1)));
  }
  void append(int b, const Entry& entry) {
    Entry*& end = ends_[static_cast<std::size_t>(b)];
    if (__builtin_expect(at_chunk_end(end, b), 0)) end = add_chunk(b);  // full, or empty (null)
    *end++ = entry;
  }
  /// Files the entry of an event scheduled or moved: at now into at_now_, else into its bucket.
  /// Takes the fields, not an Entry: one built here is stored where it goes, field by field, where
  /// one passed in would be stored field by field to the stack and loaded whole, which the core
  /// cannot forward.
  void file_entry(Time_ps at_ps, std::uint32_t slot, std::uint32_t stamp) {
    if (at_ps == now_ps_) {
      Entry& entry = at_now_.emplace_back();
      entry.at_ps = at_ps;
      entry.slot = slot;
      entry.stamp = stamp;
    } else {
      append(bucket_of(at_ps), Entry{at_ps, slot, stamp});
    }
  }
  /// Links a fresh chunk to bucket `b` (marking it non-empty if it was empty); returns its entries.
  Entry* add_chunk(int b);
  /// Gives every chunk of bucket `b` back and marks it empty.
  void empty_bucket(int b);
  int lowest_bucket() const {
    const int word = __builtin_ctz(nonempty_words_);
    return word * 64 + __builtin_ctzll(nonempty_[static_cast<std::size_t>(word)]);
  }
  void mark_empty(int b);
  bool is_live(const Entry& entry) const { return entry.stamp == states_[entry.slot].stamp; }
  /// Moves the entries of bucket `b`, the lowest non-empty one and above level 0, into lower
  /// buckets, from its earliest time on.
  void split_bucket(int b);
  /// The earliest live entry, removed from the heap. Requires live_ > 0.
  Entry pop_live();
  /// Marks the live entry of `slot` stale, dropping stale entries if they pile up (kStaleSlack).
  void retire_entry(std::uint32_t slot) {
    ++states_[slot].stamp;
    ++stale_;
    if (__builtin_expect(stale_ > 2 * live_ + kStaleSlack || stale_ >= kMaxStale, 0)) drop_stale_entries();
  }
  void drop_stale_entries();
  /// Removes the stale entries of bucket `b` from `first` (an entry of its head chunk) on.
  /// Returns how many it removed.
  std::size_t drop_stale_in(int b, const Entry* first);
  void free_slot(std::uint32_t slot);

  std::array<Chunk*, kBuckets> heads_{};  ///< first chunk of each bucket, null when empty
  std::array<Entry*, kBuckets> ends_{};   ///< one past each bucket's last entry, null when empty
  std::array<std::uint64_t, kBucketWords> nonempty_{};  ///< bit b set when bucket b holds entries
  std::uint32_t nonempty_words_ = 0;                    ///< bit w set when nonempty_[w] != 0
  /// The lowest non-empty bucket is a FIFO when on level 0: its next entry, or null for the first
  /// entry of its head chunk.
  const Entry* next_ = nullptr;
  Time_ps last_ps_ = 0;  ///< time of the latest entry taken out, <= every entry's time
  /// Entries of events scheduled (or moved) at now, in scheduling order; the next to run is
  /// at_now_[at_now_next_]. An event at now is common (the flow model's solve after a completion)
  /// and would otherwise take a level-0 bucket, often empty, for one entry: a chunk taken and given
  /// back. Entries the heap holds for now were scheduled before and run first. Outside run_next
  /// last_ps_ == now_ps_, so every entry here is due at last_ps_.
  std::vector<Entry> at_now_;
  std::size_t at_now_next_ = 0;

  ChunkPool small_chunks_{kSmallChunk_bytes};
  ChunkPool large_chunks_{kLargeChunk_bytes};

  std::vector<SlotState> states_;
  std::vector<HeldAction> actions_;        ///< parallel to states_
  std::vector<std::uint32_t> free_slots_;  ///< reused LIFO, deterministic
  std::size_t live_ = 0;                   ///< pending events
  std::size_t stale_ = 0;                  ///< entries of cancelled or moved events still held
  Time_ps now_ps_ = 0;
  std::uint64_t events_run_ = 0;
};

}  // namespace epsim

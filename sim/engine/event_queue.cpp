#include "sim/engine/event_queue.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <stdexcept>
#include <string>

namespace epsim {

namespace {

// Where a pass checks many entries against their slots, the slot of the entry this many ahead is
// requested.
constexpr std::ptrdiff_t kSlotsAhead = 16;
// Chunk blocks double from 16 KiB to 2 MiB.
constexpr std::size_t kFirstBlock_bytes = std::size_t{16} << 10;
constexpr std::size_t kLastBlock_bytes = std::size_t{2} << 20;

}  // namespace

EventQueue::~EventQueue() {
  for (std::size_t slot = 0; slot < states_.size(); ++slot)
    if ((states_[slot].generation & 1) != 0) actions_[slot].call(actions_[slot].storage, Action::Op::destroy);
}

void EventQueue::throw_bad_time(Time_ps at_ps) const {
  // A past timestamp would let time run backwards for whoever reads now() next: a caller's bug. The
  // radix heap relies on it too: every entry's time is >= the last time taken out.
  if (at_ps < now_ps_) {
    throw std::logic_error("EventQueue: event scheduled at " + std::to_string(at_ps) +
                           " ps, before now (" + std::to_string(now_ps_) + " ps)");
  }
  // Beyond the horizon the sums of times that callers make could overflow.
  throw TimeOverflow("an event at " + short_number(static_cast<double>(at_ps) * 1e-12) +
                     " s is beyond the simulation horizon of 1e+06 s (1e18 ps)");
}

void EventQueue::throw_bad_delay(Time_ps delay_ps) {
  throw TimeOverflow("an event " + short_number(static_cast<double>(delay_ps) * 1e-12) +
                     " s from now is beyond the simulation horizon of 1e+06 s (1e18 ps)");
}

void EventQueue::throw_empty_action() { throw std::invalid_argument("EventQueue: empty action"); }

EventQueue::Handle EventQueue::insert_held(Time_ps at_ps, Action::Call call, std::uint64_t word0, std::uint64_t word1) {
  std::uint32_t slot;
  if (!free_slots_.empty()) {
    slot = free_slots_.back();
    free_slots_.pop_back();
  } else {
    if (states_.size() >= kSlotMask) {
      Action::Storage storage;
      std::memcpy(storage.bytes, &word0, sizeof word0);
      std::memcpy(storage.bytes + sizeof word0, &word1, sizeof word1);
      call(storage, Action::Op::destroy);
      throw std::length_error("EventQueue: too many pending events");
    }
    slot = static_cast<std::uint32_t>(states_.size());
    states_.emplace_back();
    actions_.emplace_back();
  }
  // Word by word: the words arrive in registers, and a copy through a local would be stored in two
  // halves and loaded whole, which the core cannot forward.
  HeldAction& held = actions_[slot];
  held.call = call;
  std::memcpy(held.storage.bytes, &word0, sizeof word0);
  std::memcpy(held.storage.bytes + sizeof word0, &word1, sizeof word1);
  SlotState& state = states_[slot];
  const std::uint32_t generation = ++state.generation;  // odd: pending
  file_entry(at_ps, slot, state.stamp);
  ++live_;
  return (static_cast<std::uint64_t>(generation) << 32) | (static_cast<std::uint64_t>(slot) + 1);
}

bool EventQueue::cancel(Handle handle) {
  const std::int64_t slot = pending_slot(handle);
  if (slot < 0) return false;
  // Released after the queue is consistent again, in case a captured object's destructor calls in.
  HeldAction action = actions_[static_cast<std::size_t>(slot)];
  --live_;
  free_slot(static_cast<std::uint32_t>(slot));
  retire_entry(static_cast<std::uint32_t>(slot));
  action.call(action.storage, Action::Op::destroy);
  return true;
}

bool EventQueue::pending(Handle handle) const { return pending_slot(handle) >= 0; }

bool EventQueue::run_next() {
  if (live_ == 0) {
    // Whatever is left is stale. last_ps_ == now_ps_ here, so the heap starts over cleanly.
    if (stale_ > 0) {
      while (nonempty_words_ != 0) empty_bucket(lowest_bucket());
      next_ = nullptr;
      at_now_.clear();
      at_now_next_ = 0;
      stale_ = 0;
    }
    return false;
  }
  const Entry top = pop_live();
  // Take the action out and retire the slot before running it: the action may schedule (and so
  // reuse this slot) or try to cancel itself, which must then report "not pending".
  HeldAction action = actions_[top.slot];
  --live_;
  free_slot(top.slot);
  now_ps_ = top.at_ps;
  ++events_run_;
  action.call(action.storage, Action::Op::run);
  return true;
}

void EventQueue::run() {
  while (run_next()) {
  }
}

void EventQueue::ChunkPool::Release::operator()(void* block) const { std::free(block); }

void EventQueue::ChunkPool::refill() {
  block_bytes_ = block_bytes_ == 0 ? kFirstBlock_bytes : std::min(2 * block_bytes_, kLastBlock_bytes);
  void* block = std::aligned_alloc(chunk_bytes_, block_bytes_);
  if (block == nullptr) throw std::bad_alloc();
  blocks_.emplace_back(block);
  char* bytes = static_cast<char*>(block);
  for (std::size_t offset = block_bytes_; offset > 0; offset -= chunk_bytes_)
    give(::new (bytes + offset - chunk_bytes_) Chunk{nullptr});
}

EventQueue::Entry* EventQueue::add_chunk(int b) {
  Chunk* chunk = pool(b).take();
  chunk->next = nullptr;
  Entry* const end = ends_[static_cast<std::size_t>(b)];
  if (end == nullptr) {
    heads_[static_cast<std::size_t>(b)] = chunk;
    nonempty_[static_cast<std::size_t>(b / 64)] |= std::uint64_t{1} << (b % 64);
    nonempty_words_ |= std::uint32_t{1} << (b / 64);
  } else {
    chunk_before(end, b)->next = chunk;
  }
  return entries_of(chunk);
}

void EventQueue::mark_empty(int b) {
  heads_[static_cast<std::size_t>(b)] = nullptr;
  ends_[static_cast<std::size_t>(b)] = nullptr;
  std::uint64_t& word = nonempty_[static_cast<std::size_t>(b / 64)];
  word &= ~(std::uint64_t{1} << (b % 64));
  // Without a branch: on level 0 the word empties about every other time.
  nonempty_words_ &= ~(static_cast<std::uint32_t>(word == 0) << (b / 64));
}

void EventQueue::empty_bucket(int b) {
  for (Chunk* chunk = heads_[static_cast<std::size_t>(b)]; chunk != nullptr;) {
    Chunk* next = chunk->next;
    pool(b).give(chunk);
    chunk = next;
  }
  mark_empty(b);
}

void EventQueue::split_bucket(int b) {
  // Every entry of the lowest non-empty bucket is earlier than every entry above it, so its
  // earliest time becomes last_ps_; relative to it, each entry lands in a strictly lower bucket.
  // Entries are moved in their order, so equal times stay in scheduling order.
  Chunk* const head = heads_[static_cast<std::size_t>(b)];
  const Entry* const end = ends_[static_cast<std::size_t>(b)];
  Chunk* const tail = chunk_before(end, b);
  Time_ps earliest = std::numeric_limits<Time_ps>::max();
  for (Chunk* chunk = head;; chunk = chunk->next) {
    const Entry* const stop = chunk_end(chunk, b);
    for (const Entry* e = entries_of(chunk); e != stop; ++e) earliest = std::min(earliest, e->at_ps);
    if (chunk == tail) break;
  }
  last_ps_ = earliest;
  ChunkPool& source_pool = pool(b);
  for (Chunk* chunk = head;;) {
    const Entry* const stop = chunk_end(chunk, b);
    for (const Entry* e = entries_of(chunk); e != stop; ++e) {
      const int to = bucket_of(e->at_ps);
      // Level 0 holds the next events to run (every other bucket is later in time): their slots
      // are requested now, so that each arrives while the earlier ones run. With many events
      // pending, that cache miss per event, not the heap, is what costs.
      if (to < kDigits) {
        __builtin_prefetch(&states_[e->slot]);
        __builtin_prefetch(&actions_[e->slot].call);
        __builtin_prefetch(&actions_[e->slot].storage.bytes[sizeof(Action::Storage) - 1]);
      }
      append(to, *e);
    }
    Chunk* next = chunk->next;
    source_pool.give(chunk);  // read to the end: the buckets filled next may take it
    if (chunk == tail) break;
    chunk = next;
  }
  mark_empty(b);
}

// Inline: run_next is its one caller, once per event.
inline EventQueue::Entry EventQueue::pop_live() {
  while (true) {
    // Events scheduled at now run after those the heap holds for now, which were scheduled
    // earlier: those are in the level-0 bucket of now, the lowest if any (no entry is earlier).
    if (at_now_next_ != at_now_.size() &&
        (nonempty_words_ == 0 || lowest_bucket() != static_cast<int>(last_ps_ & (kDigits - 1)))) {
      const Entry e = at_now_[at_now_next_];
      if (++at_now_next_ == at_now_.size()) {
        at_now_.clear();
        at_now_next_ = 0;
      }
      if (is_live(e)) return e;
      --stale_;
      continue;
    }
    const int b = lowest_bucket();
    if (b >= kDigits) {
      Chunk* const head = heads_[static_cast<std::size_t>(b)];
      if (ends_[static_cast<std::size_t>(b)] == entries_of(head) + 1) {
        // A bucket of one entry holds the earliest time: taken out here, it is what a split would
        // move to level 0 and the next pass take out, at a fraction of the cost. A wide layer's
        // events are spread thinly (a few thousand pending, one per busy GPU side), so this is how
        // nearly every one of them leaves the heap. The other buckets stay as they are, as after a
        // split: their times differ from this one's in the same byte as from the last.
        const Entry e = *entries_of(head);
        pool(b).give(head);
        mark_empty(b);
        last_ps_ = e.at_ps;
        if (is_live(e)) return e;
        --stale_;
        continue;
      }
      // Stale entries are dropped before a split of a far-off bucket (two levels up, a bucket
      // spans 65,536 ps or more): checking each costs a lookup, which the stale ones repay by
      // moving no further, and most entries there are stale (a flow's completion moves several
      // times before it is due). The live ones left are few and split while still in the cache.
      if (stale_ != 0 && b >= 2 * kDigits) {
        stale_ -= drop_stale_in(b, entries_of(head));
        if (ends_[static_cast<std::size_t>(b)] == nullptr) continue;  // all were stale
      }
      split_bucket(b);
      continue;
    }
    // Level 0: the bucket of one time, a FIFO.
    const Entry* p = next_ != nullptr ? next_ : entries_of(heads_[static_cast<std::size_t>(b)]);
    const Entry e = *p++;
    if (p == ends_[static_cast<std::size_t>(b)]) {
      small_chunks_.give(chunk_before(p, b));
      mark_empty(b);
      next_ = nullptr;
    } else if (at_chunk_end(p, b)) {
      Chunk* done = chunk_before(p, b);
      heads_[static_cast<std::size_t>(b)] = done->next;
      small_chunks_.give(done);
      next_ = nullptr;
    } else {
      next_ = p;
    }
    last_ps_ = e.at_ps;
    if (is_live(e)) return e;
    --stale_;
  }
}

void EventQueue::drop_stale_entries() {
  stale_ = 0;
  // The events at now from at_now_next_ on, moved to the front.
  const auto first = at_now_.begin() + static_cast<std::ptrdiff_t>(at_now_next_);
  at_now_.erase(std::remove_if(first, at_now_.end(), [this](const Entry& e) { return !is_live(e); }), at_now_.end());
  at_now_.erase(at_now_.begin(), first);
  at_now_next_ = 0;
  // Bucket by bucket, the lowest (a partly taken FIFO when on level 0) from next_ on.
  if (nonempty_words_ == 0) return;
  const int lowest = lowest_bucket();
  const std::array<std::uint64_t, kBucketWords> words = nonempty_;
  for (std::size_t w = 0; w < words.size(); ++w) {
    for (std::uint64_t bits = words[w]; bits != 0; bits &= bits - 1) {
      const int b = static_cast<int>(w * 64) + __builtin_ctzll(bits);
      drop_stale_in(b, b == lowest && next_ != nullptr ? next_ : entries_of(heads_[static_cast<std::size_t>(b)]));
    }
  }
  next_ = nullptr;
}

std::size_t EventQueue::drop_stale_in(int b, const Entry* first) {
  // Stable and in place: live entries are copied forward, so equal times keep their order.
  Chunk* const head = heads_[static_cast<std::size_t>(b)];
  Chunk* const tail = chunk_before(ends_[static_cast<std::size_t>(b)], b);
  // Every entry is copied and the write position advanced by one for a live entry, without a
  // branch on it: whether an entry is stale is about a coin toss, which a branch would mispredict
  // every other time. The write position moves on to the next chunk when it reaches a chunk's end
  // even if no entry follows; the end then stays in the chunk before, as a full chunk's end.
  Chunk* write_chunk = head;
  Chunk* before_write_chunk = nullptr;
  Entry* write = entries_of(head);
  std::size_t dropped = 0;
  for (Chunk* chunk = head;; chunk = chunk->next) {
    const Entry* const stop = chunk_end(chunk, b);
    for (const Entry* e = chunk == head ? first : entries_of(chunk); e != stop; ++e) {
      // The slot of the entry kSlotsAhead on is requested now, so that the checks' misses overlap.
      if (stop - e > kSlotsAhead) __builtin_prefetch(&states_[e[kSlotsAhead].slot]);
      if (at_chunk_end(write, b)) {
        before_write_chunk = write_chunk;
        write_chunk = write_chunk->next;
        write = entries_of(write_chunk);
      }
      *write = *e;  // never ahead of e: the entries go to the same or earlier positions
      const std::size_t live = is_live(*e) ? 1 : 0;
      write += live;
      dropped += 1 - live;
    }
    if (chunk == tail) break;
  }
  if (write == entries_of(write_chunk) && before_write_chunk != nullptr) {
    write_chunk = before_write_chunk;
    write = reinterpret_cast<Entry*>(reinterpret_cast<std::uintptr_t>(write_chunk) + chunk_mask(b) + 1);
  }
  if (write == entries_of(head)) {
    empty_bucket(b);
    return dropped;
  }
  for (Chunk* chunk = write_chunk->next; chunk != nullptr;) {
    Chunk* next = chunk->next;
    pool(b).give(chunk);
    chunk = next;
  }
  write_chunk->next = nullptr;
  ends_[static_cast<std::size_t>(b)] = write;
  return dropped;
}

void EventQueue::free_slot(std::uint32_t slot) {
  ++states_[slot].generation;  // even: free
  free_slots_.push_back(slot);
}

}  // namespace epsim

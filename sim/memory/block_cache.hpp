// Freed large blocks kept for the next allocation of the same rounded size (huge_page_new.cpp).
//
// Why: every record of a wide layer allocates the same few hundred MB (hops, flows, messages, the
// timeline) and frees them at its end. glibc serves blocks that large with mmap (the heap settings
// of huge_page_new.cpp fix its threshold at 128 KB) and unmaps them on free, so the next record
// faulted every page in again and the kernel cleared it first: 7% of a 3-record EP 1,024 `epsim run`
// (docs/performance.md, "Freed large blocks kept"). Kept here, a block is handed out again as it
// is, on huge pages.
//
// The cache only decides; it never allocates (it runs inside operator new) and does not lock (its
// owner does). It holds at most kSlots blocks and `max_bytes` in all: memory that was in use a
// moment ago, so the peak does not grow, and what a process keeps between records is bounded.
#pragma once

#include <cstddef>
#include <cstdint>

namespace epsim {

class BlockCache {
 public:
  static constexpr int kSlots = 32;

  struct Block {
    void* data = nullptr;
    std::size_t bytes = 0;
  };

  explicit constexpr BlockCache(std::size_t max_bytes) : max_bytes_(max_bytes) {}

  /// The most recently kept block of exactly `bytes`, removed from the cache; {nullptr, 0} if none.
  /// Exactly: the owner learns a block's size again only from the size its user frees it with, so a
  /// larger block handed out would come back counted smaller than it is, and the bound would drift.
  /// The owner rounds sizes (to 2 MiB), so records of one layer shape ask for the same sizes.
  Block take(std::size_t bytes) {
    for (int i = count_ - 1; i >= 0; --i) {
      if (slots_[i].bytes != bytes) continue;
      const Block found = slots_[i];
      remove(i);
      return found;
    }
    return {};
  }

  /// Keeps `block`. Returns the blocks the caller must release now, at most kSlots + 1: the oldest
  /// kept ones, until the new one fits under both bounds, or the new block itself when it alone is
  /// over `max_bytes`. `out` has room for kSlots + 1.
  int put(Block block, Block* out) {
    if (block.bytes > max_bytes_) {
      out[0] = block;
      return 1;
    }
    int released = 0;
    while (count_ == kSlots || held_bytes_ + block.bytes > max_bytes_) {
      out[released++] = slots_[0];
      remove(0);
    }
    slots_[count_++] = block;
    held_bytes_ += block.bytes;
    return released;
  }

  int count() const { return count_; }
  std::size_t held_bytes() const { return held_bytes_; }

 private:
  /// Removes slot i, keeping the others oldest first.
  void remove(int i) {
    held_bytes_ -= slots_[i].bytes;
    for (int k = i + 1; k < count_; ++k) slots_[k - 1] = slots_[k];
    --count_;
  }

  std::size_t max_bytes_;
  std::size_t held_bytes_ = 0;
  int count_ = 0;
  Block slots_[kSlots] = {};
};

}  // namespace epsim

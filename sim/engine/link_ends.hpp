// The ends of the flows one link carries under per-link sharing (per_link_sharing.hpp), earliest
// first: a sorted run while the link's flows joined it in batches, a 4-ary min-heap otherwise.
//
// Why a run: a rank's kernel starts its messages at once, so most flows join their links in batches
// (docs/performance.md: at EP 1,024, 68% of the ends joining a link come in batches of 127, a GPU's
// RDMA flows to every other node, and 9% more in batches of 5 to 126). A batch is sorted once and then
// popped from its front: a sequential read where a heap pop walks the heap's levels, each a cache
// miss in a wide layer whose links are visited in nearly random order. A batch that joins a run still
// being popped is merged into it; a batch much smaller than the run (a few flows joining one by one,
// as a destination's links see them) turns the run into a heap, which a sorted array already is.
//
// Why 4-ary: with 16-byte entries and the block placed so that entry 1 starts a cache line, the
// children 4i+1 .. 4i+4 of node i fill exactly one line: a pop reads half the lines of a binary
// heap's and compares the four children of a level inside that line.
//
// The order is total (ends tie-break on the join count, which is unique on a link), so the sequence
// of pops does not depend on the structure: run, heap or any mix ends flows identically.
#pragma once

#include <cstdint>
#include <vector>

namespace epsim {

/// A flow's end on one link's virtual clock (per_link_sharing.hpp). 16 bytes, four to a cache line.
struct LinkEnd {
  double at_bytes;      ///< the link's clock when the flow has received all its bytes
  std::uint32_t order;  ///< join count on the link, wrapping: compared as a difference (serial numbers)
  std::int32_t slot;    ///< the flow
};

class LinkEnds {
 public:
  LinkEnds() = default;
  LinkEnds(const LinkEnds&) = delete;
  LinkEnds& operator=(const LinkEnds&) = delete;
  LinkEnds(LinkEnds&& other) noexcept;
  LinkEnds& operator=(LinkEnds&& other) noexcept;
  ~LinkEnds();

  bool empty() const { return size_ == head_; }
  std::uint32_t size() const { return size_ - head_; }
  /// The earliest end; must not be empty, nor hold a batch not yet settled.
  const LinkEnd& front() const { return data_[head_]; }
  /// Every end, in no particular order (for inspection); a batch being added included.
  const LinkEnd* begin() const { return data_ + head_; }
  const LinkEnd* end() const { return data_ + size_; }

  /// Ends join in batches (PerLinkSharing enters the flows due at one instant together; a batch may
  /// hold one). Starts a batch: the ends added until settle() join together. Returns where it begins.
  std::uint32_t begin_batch();
  /// Adds an end to the batch begun last (unordered until settle()).
  void add_to_batch(const LinkEnd& e);
  /// Puts the batch begun at `batch_begin` in order with the ends already there; `scratch` is
  /// working space.
  void settle(std::uint32_t batch_begin, std::vector<LinkEnd>& scratch);
  /// Removes and returns the earliest end; must not be empty, nor hold a batch not yet settled.
  LinkEnd pop();

  /// Whether `a` ends before `b`: the smaller clock, then the earlier join. The flows on one link at
  /// once are far fewer than 2^31, so the sign of the wrapped difference of their join counts is
  /// their join order, even after the count wraps.
  static bool earlier(const LinkEnd& a, const LinkEnd& b) {
    return a.at_bytes < b.at_bytes ||
           (a.at_bytes == b.at_bytes && static_cast<std::int32_t>(a.order - b.order) < 0);
  }

 private:
  void reserve(std::uint32_t capacity);
  /// Moves a run's unpopped ends [head_, size_) to the front of the block.
  void drop_popped();
  /// Makes the live ends [head_, size_) a heap at [0, size()): a sorted run is one already.
  void to_heap();
  void heap_push(const LinkEnd& e);
  LinkEnd heap_pop();

  /// Entry 0; the block it lives in starts kPad entries earlier, 64-byte aligned, so that entry 1
  /// (and every fourth after it) starts a cache line.
  LinkEnd* data_ = nullptr;
  std::uint32_t size_ = 0;      ///< entries in use, from 0 (heap) or from head_ (run)
  std::uint32_t capacity_ = 0;
  std::uint32_t head_ = 0;      ///< a run's next end; always 0 for a heap
  bool run_ = true;             ///< a sorted run at [head_, size_), else a heap at [0, size_)
};

}  // namespace epsim

// The ends of the flows one link carries under per-link sharing (per_link_sharing.hpp), earliest on
// top: a 4-ary min-heap whose four children of a node share one cache line.
//
// Why 4-ary: a wide layer's links carry up to a few hundred flows each and are visited in event order,
// nearly at random, so every level of a heap walk is a cache miss. With 16-byte entries and the
// block placed so that entry 1 starts a cache line, the children 4i+1 .. 4i+4 of node i fill exactly
// one line: a pop reads half the lines of a binary heap's (log4 n levels instead of log2 n) and
// compares the four children of a level inside that line.
//
// The order is total (ends tie-break on the join count, which is unique on a link), so the sequence
// of pops does not depend on the heap's shape: a binary heap and this one end flows identically.
#pragma once

#include <cstdint>

namespace epsim {

/// A flow's end on one link's virtual clock (per_link_sharing.hpp). 16 bytes, four to a cache line.
struct LinkEnd {
  double at_bytes;      ///< the link's clock when the flow has received all its bytes
  std::uint32_t order;  ///< join count on the link, wrapping: compared as a difference (serial numbers)
  std::int32_t slot;    ///< the flow
};

class LinkEndHeap {
 public:
  LinkEndHeap() = default;
  LinkEndHeap(const LinkEndHeap&) = delete;
  LinkEndHeap& operator=(const LinkEndHeap&) = delete;
  LinkEndHeap(LinkEndHeap&& other) noexcept;
  LinkEndHeap& operator=(LinkEndHeap&& other) noexcept;
  ~LinkEndHeap();

  bool empty() const { return size_ == 0; }
  std::uint32_t size() const { return size_; }
  /// The earliest end; the heap must not be empty.
  const LinkEnd& front() const { return data_[0]; }
  /// Every end, in heap order (for inspection).
  const LinkEnd* begin() const { return data_; }
  const LinkEnd* end() const { return data_ + size_; }
  void push(const LinkEnd& e);
  /// Removes and returns the earliest end; the heap must not be empty.
  LinkEnd pop();

  /// Whether `a` ends before `b`: the smaller clock, then the earlier join. The flows on one link at
  /// once are far fewer than 2^31, so the sign of the wrapped difference of their join counts is
  /// their join order, even after the count wraps.
  static bool earlier(const LinkEnd& a, const LinkEnd& b) {
    return a.at_bytes < b.at_bytes ||
           (a.at_bytes == b.at_bytes && static_cast<std::int32_t>(a.order - b.order) < 0);
  }

 private:
  void grow();

  /// Entry 0 of the heap; the block it lives in starts kPad entries earlier, 64-byte aligned, so
  /// that entry 1 (and every fourth after it) starts a cache line. 16 bytes with the counts, so that a
  /// link (per_link_sharing.hpp) still fits one cache line.
  LinkEnd* data_ = nullptr;
  std::uint32_t size_ = 0;
  std::uint32_t capacity_ = 0;
};

}  // namespace epsim

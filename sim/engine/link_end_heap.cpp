#include "sim/engine/link_end_heap.hpp"

#include <algorithm>
#include <new>
#include <utility>

namespace epsim {

namespace {

constexpr std::size_t kLine_bytes = 64;
/// Entries before entry 0 in the block: entry 1 then sits at 4 x 16 = 64 bytes, a cache line's start.
constexpr std::size_t kPad = 3;

LinkEnd* allocate(std::uint32_t capacity) {
  void* block = ::operator new[]((capacity + kPad) * sizeof(LinkEnd), std::align_val_t{kLine_bytes});
  return static_cast<LinkEnd*>(block) + kPad;
}

void release(LinkEnd* data) {
  if (data != nullptr) ::operator delete[](data - kPad, std::align_val_t{kLine_bytes});
}

}  // namespace

LinkEndHeap::LinkEndHeap(LinkEndHeap&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

LinkEndHeap& LinkEndHeap::operator=(LinkEndHeap&& other) noexcept {
  if (this != &other) {
    release(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

LinkEndHeap::~LinkEndHeap() { release(data_); }

void LinkEndHeap::grow() {
  // 13 entries fill the first four lines (the pad, the root and three lines of children).
  const std::uint32_t grown = capacity_ == 0 ? 13 : 2 * capacity_ + 3;
  LinkEnd* data = allocate(grown);
  std::copy(data_, data_ + size_, data);
  release(data_);
  data_ = data;
  capacity_ = grown;
}

void LinkEndHeap::push(const LinkEnd& e) {
  if (size_ == capacity_) grow();
  // Sift up: parents that end later move down into the hole until e's place is found.
  std::uint32_t hole = size_++;
  while (hole > 0) {
    const std::uint32_t parent = (hole - 1) / 4;
    if (!earlier(e, data_[parent])) break;
    data_[hole] = data_[parent];
    hole = parent;
  }
  data_[hole] = e;
}

LinkEnd LinkEndHeap::pop() {
  const LinkEnd top = data_[0];
  const LinkEnd last = data_[--size_];
  if (size_ == 0) return top;
  // Sift the last entry down from the root: at each level the earliest of the (up to) four children,
  // which share a cache line, moves up while it ends before `last`.
  std::uint32_t hole = 0;
  for (;;) {
    const std::uint32_t first = 4 * hole + 1;
    if (first >= size_) break;
    std::uint32_t best = first;
    if (first + 4 <= size_) {
      // All four children: a tournament of pairs, whose selections compile to conditional moves
      // (the ends are unordered, so a branch per child would be mispredicted half the time). The
      // order is total, so it picks the same child as a scan would.
      const std::uint32_t left = earlier(data_[first + 1], data_[first]) ? first + 1 : first;
      const std::uint32_t right = earlier(data_[first + 3], data_[first + 2]) ? first + 3 : first + 2;
      best = earlier(data_[right], data_[left]) ? right : left;
    } else {
      for (std::uint32_t c = first + 1; c < size_; ++c)
        if (earlier(data_[c], data_[best])) best = c;
    }
    if (!earlier(data_[best], last)) break;
    data_[hole] = data_[best];
    hole = best;
  }
  data_[hole] = last;
  return top;
}

}  // namespace epsim

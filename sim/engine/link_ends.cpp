#include "sim/engine/link_ends.hpp"

#include <algorithm>
#include <cstring>
#include <new>
#include <utility>

namespace epsim {

namespace {

constexpr std::size_t kLine_bytes = 64;
/// Entries before entry 0 in the block: entry 1 then sits at 4 x 16 = 64 bytes, a cache line's start.
constexpr std::size_t kPad = 3;
/// A batch fewer than 1 / kRunRatio of the run it joins turns the run into a heap: merging would move
/// the whole run for a few ends, again for every few that follow.
constexpr std::uint32_t kRunRatio = 8;

LinkEnd* allocate(std::uint32_t capacity) {
  void* block = ::operator new[]((capacity + kPad) * sizeof(LinkEnd), std::align_val_t{kLine_bytes});
  return static_cast<LinkEnd*>(block) + kPad;
}

void release(LinkEnd* data) {
  if (data != nullptr) ::operator delete[](data - kPad, std::align_val_t{kLine_bytes});
}

}  // namespace

LinkEnds::LinkEnds(LinkEnds&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)),
      head_(std::exchange(other.head_, 0)),
      run_(std::exchange(other.run_, true)) {}

LinkEnds& LinkEnds::operator=(LinkEnds&& other) noexcept {
  if (this != &other) {
    release(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    head_ = std::exchange(other.head_, 0);
    run_ = std::exchange(other.run_, true);
  }
  return *this;
}

LinkEnds::~LinkEnds() { release(data_); }

void LinkEnds::reserve(std::uint32_t capacity) {
  if (capacity <= capacity_) return;
  // 13 entries fill the first four lines (the pad, the root and three lines of children); then each
  // block is twice the last with its pad (16, 32, 64 ... entries).
  std::uint32_t grown = capacity_ == 0 ? 13 : 2 * capacity_ + 3;
  while (grown < capacity) grown = 2 * grown + 3;
  LinkEnd* data = allocate(grown);
  std::copy(data_, data_ + size_, data);
  release(data_);
  data_ = data;
  capacity_ = grown;
}

void LinkEnds::drop_popped() {
  if (head_ == 0) return;
  std::memmove(data_, data_ + head_, (size_ - head_) * sizeof(LinkEnd));
  size_ -= head_;
  head_ = 0;
}

void LinkEnds::to_heap() {
  drop_popped();
  run_ = false;
}

std::uint32_t LinkEnds::begin_batch() {
  // A run's popped prefix goes now, so that the batch's place does not move while it grows.
  drop_popped();
  return size_;
}

void LinkEnds::add_to_batch(const LinkEnd& e) {
  if (!run_) {  // a heap takes a batch one end at a time
    heap_push(e);
    return;
  }
  reserve(size_ + 1);
  data_[size_++] = e;
}

void LinkEnds::settle(std::uint32_t batch_begin, std::vector<LinkEnd>& scratch) {
  if (!run_ || batch_begin == size_) return;
  // A lambda, not the function's address, so that the sort and the merge inline the comparison.
  const auto before = [](const LinkEnd& a, const LinkEnd& b) { return earlier(a, b); };
  std::sort(data_ + batch_begin, data_ + size_, before);
  const std::uint32_t run = batch_begin;  // begin_batch moved the run's unpopped ends to the front
  const std::uint32_t batch = size_ - batch_begin;
  if (run == 0) return;
  if (batch * kRunRatio < run) {
    // A few ends joining a long run: the run becomes a heap (it is one already) and takes them.
    scratch.assign(data_ + batch_begin, data_ + size_);
    size_ = batch_begin;
    to_heap();
    for (const LinkEnd& e : scratch) heap_push(e);
    return;
  }
  scratch.resize(run + batch);
  std::merge(data_, data_ + batch_begin, data_ + batch_begin, data_ + size_, scratch.begin(), before);
  std::copy(scratch.begin(), scratch.end(), data_);
}

LinkEnd LinkEnds::pop() {
  if (run_) {
    const LinkEnd top = data_[head_++];
    if (head_ == size_) head_ = size_ = 0;
    return top;
  }
  const LinkEnd top = heap_pop();
  if (size_ == 0) run_ = true;  // an empty heap is an empty run: the next batch is sorted again
  return top;
}

void LinkEnds::heap_push(const LinkEnd& e) {
  reserve(size_ + 1);
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

LinkEnd LinkEnds::heap_pop() {
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

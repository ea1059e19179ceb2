// LinkEnds: a link's flow ends come out in (clock, join order), ties and a wrapped join count
// included, whatever the order they joined in, alone or in batches (kept as a sorted run, merged, or
// turned into the 4-ary heap), and the heap's block is placed so that every node's four children
// share a cache line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/engine/link_ends.hpp"

using epsim::LinkEnd;
using epsim::LinkEnds;

namespace {

bool before(const LinkEnd& a, const LinkEnd& b) { return LinkEnds::earlier(a, b); }

/// One end joining alone: a batch of one, as PerLinkSharing enters a flow due by itself.
void join(LinkEnds& ends, const LinkEnd& e) {
  std::vector<LinkEnd> scratch;
  const std::uint32_t begin = ends.begin_batch();
  ends.add_to_batch(e);
  ends.settle(begin, scratch);
}

/// Takes the earliest end out of `reference` and requires `ends` to pop the same one.
void pop_as_reference(LinkEnds& ends, std::vector<LinkEnd>& reference) {
  const auto first = std::min_element(reference.begin(), reference.end(), before);
  const LinkEnd expected = *first;
  reference.erase(first);
  REQUIRE(ends.front().slot == expected.slot);
  REQUIRE(ends.pop().slot == expected.slot);
}

/// Every end of `reference` is in `ends`, once, and no other.
void check_same_ends(const LinkEnds& ends, const std::vector<LinkEnd>& reference) {
  std::vector<int> in_ends, in_reference;
  for (const LinkEnd& e : ends) in_ends.push_back(e.slot);
  for (const LinkEnd& e : reference) in_reference.push_back(e.slot);
  std::sort(in_ends.begin(), in_ends.end());
  std::sort(in_reference.begin(), in_reference.end());
  CHECK(in_ends == in_reference);
}

}  // namespace

TEST_CASE("LinkEnds pops the earliest end first, ties in join order") {
  LinkEnds heap;
  CHECK(heap.empty());
  // Joined out of order; two ends at 5 bytes joined as 7th and 3rd, one at 2 bytes.
  join(heap, {5.0, 7, 0});
  join(heap, {9.0, 1, 1});
  join(heap, {5.0, 3, 2});
  join(heap, {2.0, 8, 3});
  CHECK(heap.size() == 4);
  CHECK(heap.front().slot == 3);
  std::vector<int> slots;
  while (!heap.empty()) slots.push_back(heap.pop().slot);
  CHECK(slots == std::vector<int>{3, 2, 0, 1});
}

TEST_CASE("LinkEnds: a join count that wrapped still orders ties by join") {
  // 0xffff'fffe joined two flows before 1 did (the count wrapped in between).
  LinkEnds heap;
  join(heap, {4.0, 1, 0});
  join(heap, {4.0, 0xffff'fffeu, 1});
  join(heap, {4.0, 0xffff'ffffu, 2});
  CHECK(heap.pop().slot == 1);
  CHECK(heap.pop().slot == 2);
  CHECK(heap.pop().slot == 0);
}

TEST_CASE("LinkEnds agrees with a sorted list over random single joins and pops") {
  // Mixed joins and pops, as a link sees them, through several growths of the block; the clocks are
  // few distinct values so that ties are common.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> clock(0, 40);
  std::uniform_int_distribution<int> action(0, 9);
  LinkEnds heap;
  std::vector<LinkEnd> reference;
  std::uint32_t joined = 0xffff'ff00u;  // wraps during the run
  for (int step = 0; step < 20'000; ++step) {
    if (reference.empty() || action(rng) < 6) {
      const LinkEnd e{static_cast<double>(clock(rng)), joined++, step};
      join(heap, e);
      reference.push_back(e);
    } else {
      pop_as_reference(heap, reference);
    }
    REQUIRE(heap.size() == reference.size());
  }
  check_same_ends(heap, reference);
}

TEST_CASE("LinkEnds: a heap's children of a node share one cache line, and moved ends are kept") {
  LinkEnds heap;
  for (int i = 0; i < 100; ++i) join(heap, {static_cast<double>(100 - i), static_cast<std::uint32_t>(i), i});
  const auto address = reinterpret_cast<std::uintptr_t>(heap.begin());
  // Entry 1 (the root's first child) starts a 64-byte line; so does every 4k + 1 after it.
  CHECK((address + sizeof(LinkEnd)) % 64 == 0);
  LinkEnds moved(std::move(heap));
  CHECK(heap.empty());  // NOLINT(bugprone-use-after-move): a moved-from heap is empty by contract
  CHECK(moved.size() == 100);
  CHECK(moved.pop().slot == 99);
  LinkEnds assigned;
  join(assigned, {1.0, 0, 7});
  assigned = std::move(moved);
  CHECK(assigned.size() == 99);
  CHECK(assigned.pop().slot == 98);
}

TEST_CASE("LinkEnds: a batch is sorted once and merged with the run it joins") {
  LinkEnds ends;
  std::vector<LinkEnd> scratch;
  // A batch of four into an empty link: a run, in order.
  std::uint32_t begin = ends.begin_batch();
  for (const LinkEnd& e : {LinkEnd{7.0, 0, 0}, LinkEnd{3.0, 1, 1}, LinkEnd{9.0, 2, 2}, LinkEnd{3.0, 3, 3}})
    ends.add_to_batch(e);
  CHECK(ends.size() == 4);
  ends.settle(begin, scratch);
  CHECK(ends.front().slot == 1);
  CHECK(ends.pop().slot == 1);  // 3.0, joined first
  // Three more join the remaining three (3.0/3, 7.0/0, 9.0/2): as many as there are, so merged.
  begin = ends.begin_batch();
  for (const LinkEnd& e : {LinkEnd{8.0, 4, 4}, LinkEnd{2.0, 5, 5}, LinkEnd{7.0, 6, 6}}) ends.add_to_batch(e);
  ends.settle(begin, scratch);
  std::vector<int> slots;
  while (!ends.empty()) slots.push_back(ends.pop().slot);
  CHECK(slots == std::vector<int>{5, 3, 0, 6, 4, 2});
}

TEST_CASE("LinkEnds agrees with a sorted list over random batches, single joins and pops") {
  // Batches of 1 to 200 ends (small ones into long runs turn them into heaps, large ones merge or
  // start runs), single joins and pops at random, the clocks few distinct values so that ties are
  // common, the join count wrapping.
  std::mt19937 rng(2026);
  std::uniform_int_distribution<int> clock(0, 60);
  std::uniform_int_distribution<int> action(0, 9);
  std::uniform_int_distribution<int> batch_size(1, 200);
  LinkEnds ends;
  std::vector<LinkEnd> scratch;
  std::vector<LinkEnd> reference;
  std::uint32_t joined = 0xffff'f000u;
  int slot = 0;
  for (int step = 0; step < 20'000; ++step) {
    const int a = action(rng);
    if (a < 2) {
      const std::uint32_t begin = ends.begin_batch();
      const int k = batch_size(rng) / (a == 0 ? 1 : 40);  // a == 1: batches of 0 to 5
      for (int i = 0; i < k; ++i) {
        const LinkEnd e{static_cast<double>(clock(rng)), joined++, slot++};
        ends.add_to_batch(e);
        reference.push_back(e);
      }
      REQUIRE(ends.size() == reference.size());
      ends.settle(begin, scratch);
    } else if (a < 4 || reference.empty()) {
      const LinkEnd e{static_cast<double>(clock(rng)), joined++, slot++};
      join(ends, e);
      reference.push_back(e);
    } else {
      pop_as_reference(ends, reference);
    }
    REQUIRE(ends.size() == reference.size());
  }
  check_same_ends(ends, reference);
  // Emptied, it takes a batch as a fresh run.
  while (!ends.empty()) ends.pop();
  const std::uint32_t begin = ends.begin_batch();
  ends.add_to_batch({2.0, 1, 1});
  ends.add_to_batch({1.0, 2, 2});
  ends.settle(begin, scratch);
  CHECK(ends.pop().slot == 2);
  CHECK(ends.pop().slot == 1);
  CHECK(ends.empty());
}

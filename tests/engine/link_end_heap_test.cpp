// LinkEndHeap: the 4-ary heap of a link's flow ends pops them in (clock, join order), ties and a
// wrapped join count included, whatever the order they were pushed in, and its block is placed so
// that every node's four children share a cache line.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "sim/engine/link_end_heap.hpp"

using epsim::LinkEnd;
using epsim::LinkEndHeap;

namespace {

bool before(const LinkEnd& a, const LinkEnd& b) { return LinkEndHeap::earlier(a, b); }

}  // namespace

TEST_CASE("LinkEndHeap pops the earliest end first, ties in join order") {
  LinkEndHeap heap;
  CHECK(heap.empty());
  // Pushed out of order; two ends at 5 bytes joined as 7th and 3rd, one at 2 bytes.
  heap.push({5.0, 7, 0});
  heap.push({9.0, 1, 1});
  heap.push({5.0, 3, 2});
  heap.push({2.0, 8, 3});
  CHECK(heap.size() == 4);
  CHECK(heap.front().slot == 3);
  std::vector<int> slots;
  while (!heap.empty()) slots.push_back(heap.pop().slot);
  CHECK(slots == std::vector<int>{3, 2, 0, 1});
}

TEST_CASE("LinkEndHeap: a join count that wrapped still orders ties by join") {
  // 0xffff'fffe joined two flows before 1 did (the count wrapped in between).
  LinkEndHeap heap;
  heap.push({4.0, 1, 0});
  heap.push({4.0, 0xffff'fffeu, 1});
  heap.push({4.0, 0xffff'ffffu, 2});
  CHECK(heap.pop().slot == 1);
  CHECK(heap.pop().slot == 2);
  CHECK(heap.pop().slot == 0);
}

TEST_CASE("LinkEndHeap agrees with a sorted list over random pushes and pops") {
  // Mixed pushes and pops, as a link sees joins and ends, through several growths of the block; the
  // clocks are few distinct values so that ties are common.
  std::mt19937 rng(12345);
  std::uniform_int_distribution<int> clock(0, 40);
  std::uniform_int_distribution<int> action(0, 9);
  LinkEndHeap heap;
  std::vector<LinkEnd> reference;
  std::uint32_t joined = 0xffff'ff00u;  // wraps during the run
  for (int step = 0; step < 20'000; ++step) {
    if (reference.empty() || action(rng) < 6) {
      const LinkEnd e{static_cast<double>(clock(rng)), joined++, step};
      heap.push(e);
      reference.push_back(e);
    } else {
      const auto first = std::min_element(reference.begin(), reference.end(), before);
      const LinkEnd expected = *first;
      reference.erase(first);
      const LinkEnd got = heap.pop();
      REQUIRE(got.slot == expected.slot);
    }
    REQUIRE(heap.size() == reference.size());
  }
  // Every entry is there, once.
  std::vector<int> in_heap, in_reference;
  for (const LinkEnd& e : heap) in_heap.push_back(e.slot);
  for (const LinkEnd& e : reference) in_reference.push_back(e.slot);
  std::sort(in_heap.begin(), in_heap.end());
  std::sort(in_reference.begin(), in_reference.end());
  CHECK(in_heap == in_reference);
}

TEST_CASE("LinkEndHeap: the children of a node share one cache line, and a moved heap keeps its ends") {
  LinkEndHeap heap;
  for (int i = 0; i < 100; ++i) heap.push({static_cast<double>(100 - i), static_cast<std::uint32_t>(i), i});
  const auto address = reinterpret_cast<std::uintptr_t>(heap.begin());
  // Entry 1 (the root's first child) starts a 64-byte line; so does every 4k + 1 after it.
  CHECK((address + sizeof(LinkEnd)) % 64 == 0);
  LinkEndHeap moved(std::move(heap));
  CHECK(heap.empty());  // NOLINT(bugprone-use-after-move): a moved-from heap is empty by contract
  CHECK(moved.size() == 100);
  CHECK(moved.pop().slot == 99);
  LinkEndHeap assigned;
  assigned.push({1.0, 0, 7});
  assigned = std::move(moved);
  CHECK(assigned.size() == 99);
  CHECK(assigned.pop().slot == 98);
}

// BlockCache: which freed block the next allocation gets back, and what is released to stay within
// the bounds (sim/memory/block_cache.hpp). Blocks here are tags, never dereferenced.
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>

#include "sim/memory/block_cache.hpp"

namespace {

using epsim::BlockCache;

constexpr std::size_t kMiB = std::size_t{1} << 20;

void* tag(std::uintptr_t n) { return reinterpret_cast<void*>(n * 4096); }

}  // namespace

TEST_CASE("block cache: a freed block comes back for the same size, the latest kept first") {
  BlockCache cache(64 * kMiB);
  BlockCache::Block out[BlockCache::kSlots + 1];
  CHECK(cache.take(2 * kMiB).data == nullptr);
  CHECK(cache.put({tag(1), 2 * kMiB}, out) == 0);
  CHECK(cache.put({tag(2), 4 * kMiB}, out) == 0);
  CHECK(cache.put({tag(3), 2 * kMiB}, out) == 0);
  CHECK(cache.held_bytes() == 8 * kMiB);
  // Exactly the size asked: a 4 MiB block is not handed out for 2 MiB, nor 2 MiB for 4 MiB.
  const BlockCache::Block got = cache.take(2 * kMiB);
  CHECK(got.data == tag(3));
  CHECK(got.bytes == 2 * kMiB);
  CHECK(cache.take(2 * kMiB).data == tag(1));
  CHECK(cache.take(2 * kMiB).data == nullptr);
  CHECK(cache.take(6 * kMiB).data == nullptr);
  CHECK(cache.take(4 * kMiB).data == tag(2));
  CHECK(cache.count() == 0);
  CHECK(cache.held_bytes() == 0);
}

TEST_CASE("block cache: past its bytes the oldest blocks are released, a block over the bound at once") {
  BlockCache cache(10 * kMiB);
  BlockCache::Block out[BlockCache::kSlots + 1];
  CHECK(cache.put({tag(1), 4 * kMiB}, out) == 0);
  CHECK(cache.put({tag(2), 2 * kMiB}, out) == 0);
  CHECK(cache.put({tag(3), 4 * kMiB}, out) == 0);  // 10 MiB: at the bound, not over it
  // 6 more MiB: 16 > 10, so the oldest go until 6 + what stays fits: 4 (tag 1) and 2 (tag 2).
  REQUIRE(cache.put({tag(4), 6 * kMiB}, out) == 2);
  CHECK(out[0].data == tag(1));
  CHECK(out[1].data == tag(2));
  CHECK(cache.held_bytes() == 10 * kMiB);
  CHECK(cache.count() == 2);
  // A block larger than the whole bound is not kept, and nothing kept is released for it.
  REQUIRE(cache.put({tag(5), 12 * kMiB}, out) == 1);
  CHECK(out[0].data == tag(5));
  CHECK(cache.held_bytes() == 10 * kMiB);
  CHECK(cache.take(4 * kMiB).data == tag(3));
  CHECK(cache.take(6 * kMiB).data == tag(4));
}

TEST_CASE("block cache: at most kSlots blocks, the oldest released for the next") {
  BlockCache cache(1024 * kMiB);
  BlockCache::Block out[BlockCache::kSlots + 1];
  for (int i = 0; i < BlockCache::kSlots; ++i) CHECK(cache.put({tag(static_cast<std::uintptr_t>(i) + 1), 2 * kMiB}, out) == 0);
  REQUIRE(cache.put({tag(100), 2 * kMiB}, out) == 1);
  CHECK(out[0].data == tag(1));
  CHECK(cache.count() == BlockCache::kSlots);
  CHECK(cache.held_bytes() == static_cast<std::size_t>(BlockCache::kSlots) * 2 * kMiB);
  CHECK(cache.take(2 * kMiB).data == tag(100));
}

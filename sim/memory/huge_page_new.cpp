// Global operator new for the epsim executables: large blocks on transparent huge pages.
//
// Why: a wide layer (EP 1,024) holds a few hundred MB of hops, flows, messages and timeline events,
// allocated fresh for every layer and walked in event order, that is nearly at random. On 4 KiB pages
// that costs a page fault for every 4 KiB first touched and a TLB miss on most accesses: about a
// sixth of the engine's time in the EP 1,024 profile (docs/performance.md, "Huge pages"). Blocks of
// kHugeBlock_bytes or more are therefore aligned to 2 MiB and marked MADV_HUGEPAGE, which the kernel
// honours where transparent huge pages are set to "madvise" or "always" (Debian's default is
// madvise) and ignores where they are off. Smaller blocks go to malloc as before. Over-aligned types
// (the cache-line flow tables) take the same path.
//
// A large block freed with its size (every container frees so) is kept for the next allocation of
// the same rounded size (block_cache.hpp says why and within which bounds): the next record reuses
// it without faulting its pages in again.
//
// glibc keeps the freed top of its heap (below). Everything still comes from malloc's family
// (aligned_alloc, malloc), so one free() releases any block, whichever way it was made. Linked into
// the epsim executable and the benchmarks only, never into the library or the sanitizer builds (whose
// runtime replaces operator new to check its use).
#include <malloc.h>
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <mutex>
#include <new>

#include "sim/memory/block_cache.hpp"

namespace {

constexpr std::size_t kHugePage_bytes = std::size_t{2} << 20;
/// Below this a block would waste too much of its last huge page, and is rarely walked at random.
constexpr std::size_t kHugeBlock_bytes = std::size_t{2} << 20;
/// What freed large blocks may hold between records: an EP 1,024 layer's largest blocks come to
/// about 250 MB; beyond the bound the oldest are released.
constexpr std::size_t kCache_bytes = std::size_t{512} << 20;

std::size_t rounded(std::size_t size) { return (size + kHugePage_bytes - 1) / kHugePage_bytes * kHugePage_bytes; }

// Function-local statics: operator new may run before any other static of this file is built.
std::mutex& cache_lock() {
  static std::mutex lock;
  return lock;
}
epsim::BlockCache& cache() {
  static epsim::BlockCache kept(kCache_bytes);
  return kept;
}

void* allocate(std::size_t size) {
  if (size < kHugeBlock_bytes) return std::malloc(size == 0 ? 1 : size);
  const std::size_t bytes = rounded(size);
  {
    const std::lock_guard<std::mutex> hold(cache_lock());
    if (void* kept = cache().take(bytes).data) return kept;
  }
  void* block = std::aligned_alloc(kHugePage_bytes, bytes);
  // Advice only: where the kernel refuses it, the block simply stays on small pages.
  if (block != nullptr) madvise(block, bytes, MADV_HUGEPAGE);
  return block;
}

/// A block freed with its size: a large one is kept for the next allocation of that size. A large
/// block freed without its size (unsized delete, rare for containers) goes straight back to malloc.
void release(void* block, std::size_t size) noexcept {
  if (block == nullptr) return;
  if (size < kHugeBlock_bytes) {
    std::free(block);
    return;
  }
  epsim::BlockCache::Block out[epsim::BlockCache::kSlots + 1];
  int released = 0;
  {
    const std::lock_guard<std::mutex> hold(cache_lock());
    released = cache().put({block, rounded(size)}, out);
  }
  for (int i = 0; i < released; ++i) std::free(out[i].data);
}

/// A block of `size` bytes aligned to `align` (at most the alignment malloc gives: none asked).
void* allocate_aligned(std::size_t size, std::size_t align) {
  // A large block is aligned to 2 MiB, which serves any smaller alignment.
  if (align <= alignof(std::max_align_t) || (size >= kHugeBlock_bytes && align <= kHugePage_bytes))
    return allocate(size);
  const std::size_t padded = (size + align - 1) / align * align;  // aligned_alloc wants a multiple of it
  return std::aligned_alloc(align, padded == 0 ? align : padded);
}

/// operator new's contract: the new handler until a block comes, std::bad_alloc when there is none.
void* allocate_or_throw(std::size_t size, std::size_t align = 0) {
  for (;;) {
    if (void* block = allocate_aligned(size, align)) return block;
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

#if defined(__GLIBC__)
// Every record allocates and frees the same buffers (flows, routes, the timeline); by default glibc
// hands the freed top of the heap back to the system after each record and faults it in again for
// the next, a fifth of a 16-record EP 64 replay's time. Keeping up to 256 MB of it (and growing the
// heap 64 MB at a time) costs no resident memory until it is used (docs/performance.md). Set here,
// before main, so that the benchmarks run with the allocator epsim runs with.
[[maybe_unused]] const bool heap_top_kept = [] {
  mallopt(M_TRIM_THRESHOLD, 256 << 20);
  mallopt(M_TOP_PAD, 64 << 20);
  return true;
}();
#endif

}  // namespace

void* operator new(std::size_t size) { return allocate_or_throw(size); }
void* operator new[](std::size_t size) { return allocate_or_throw(size); }
void operator delete(void* block) noexcept { std::free(block); }
void operator delete[](void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t size) noexcept { release(block, size); }
void operator delete[](void* block, std::size_t size) noexcept { release(block, size); }

// Over-aligned types (a cache-line-aligned flow table) take the same path (allocate_aligned).
void* operator new(std::size_t size, std::align_val_t align) {
  return allocate_or_throw(size, static_cast<std::size_t>(align));
}
void* operator new[](std::size_t size, std::align_val_t align) {
  return allocate_or_throw(size, static_cast<std::size_t>(align));
}
void operator delete(void* block, std::align_val_t) noexcept { std::free(block); }
void operator delete[](void* block, std::align_val_t) noexcept { std::free(block); }
void operator delete(void* block, std::size_t size, std::align_val_t align) noexcept {
  if (static_cast<std::size_t>(align) <= kHugePage_bytes) {
    release(block, size);
  } else {
    std::free(block);
  }
}
void operator delete[](void* block, std::size_t size, std::align_val_t align) noexcept {
  ::operator delete(block, size, align);
}

// Global operator new for the epsim executables: large blocks on transparent huge pages.
//
// Why: a wide layer (EP 1,024) holds a few hundred MB of hops, flows, messages and timeline events,
// allocated fresh for every layer and walked in event order, that is nearly at random. On 4 KiB pages
// that costs a page fault for every 4 KiB first touched and a TLB miss on most accesses: about a
// sixth of the engine's time in the EP 1,024 profile (docs/performance.md, "Huge pages"). Blocks of
// kHugeBlock_bytes or more are therefore aligned to 2 MiB and marked MADV_HUGEPAGE, which the kernel
// honours where transparent huge pages are set to "madvise" or "always" (Debian's default is
// madvise) and ignores where they are off. Smaller blocks go to malloc as before.
//
// Everything still comes from malloc's family (aligned_alloc here, aligned_alloc in the library's
// aligned new), so one free() releases any block, whichever way it was made. Linked into the epsim
// executable and the benchmarks only, never into the library or the sanitizer builds (whose runtime
// replaces operator new to check its use).
#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <new>

namespace {

constexpr std::size_t kHugePage_bytes = std::size_t{2} << 20;
/// Below this a block would waste too much of its last huge page, and is rarely walked at random.
constexpr std::size_t kHugeBlock_bytes = std::size_t{2} << 20;

void* allocate(std::size_t size) {
  if (size < kHugeBlock_bytes) return std::malloc(size == 0 ? 1 : size);
  const std::size_t rounded = (size + kHugePage_bytes - 1) / kHugePage_bytes * kHugePage_bytes;
  void* block = std::aligned_alloc(kHugePage_bytes, rounded);
  // Advice only: where the kernel refuses it, the block simply stays on small pages.
  if (block != nullptr) madvise(block, rounded, MADV_HUGEPAGE);
  return block;
}

}  // namespace

void* operator new(std::size_t size) {
  for (;;) {
    if (void* block = allocate(size)) return block;
    const std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) throw std::bad_alloc();
    handler();
  }
}

void* operator new[](std::size_t size) { return ::operator new(size); }
void operator delete(void* block) noexcept { std::free(block); }
void operator delete[](void* block) noexcept { std::free(block); }
void operator delete(void* block, std::size_t) noexcept { std::free(block); }
void operator delete[](void* block, std::size_t) noexcept { std::free(block); }

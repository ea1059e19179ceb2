// Checksums of the data the hw runner moves: a source buffer is filled with a known pattern of 32-bit
// words, the destination is checksummed after the copy and compared with the value computed here on the
// CPU. The arithmetic is shared with the CUDA kernels (EPSIM_HD marks it host+device under nvcc), so it
// is unit-tested without a GPU. The checksum is an order-independent sum mod 2^64 of a mix of each word
// with its index, so a GPU kernel can accumulate it with atomics and a shifted, truncated or stale copy
// gives a different value.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define EPSIM_HD __host__ __device__
#else
#define EPSIM_HD
#endif

namespace epsim::hw {

/// The pattern word at index `i` of a buffer filled with `seed`.
EPSIM_HD inline std::uint32_t pattern_word(std::uint64_t seed, std::uint64_t i) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ull + i + 1;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return static_cast<std::uint32_t>(z ^ (z >> 31));
}

/// One word's contribution to the checksum.
EPSIM_HD inline std::uint64_t checksum_term(std::uint32_t word, std::uint64_t i) {
  std::uint64_t z = (static_cast<std::uint64_t>(word) << 32 | (i & 0xFFFFFFFFull)) ^ (i >> 32) * 0x2545F4914F6CDD1Dull;
  z = (z ^ (z >> 33)) * 0xFF51AFD7ED558CCDull;
  z = (z ^ (z >> 33)) * 0xC4CEB9FE1A85EC53ull;
  return z ^ (z >> 33);
}

/// Checksum of `words` 32-bit words at `data`.
std::uint64_t checksum_words(const std::uint32_t* data, std::uint64_t words);
/// Checksum a buffer of `words` words filled with pattern `seed` would have (what a correct copy gives).
std::uint64_t expected_pattern_checksum(std::uint64_t seed, std::uint64_t words);
/// Words of a copy of `bytes` bytes that the checksum covers (whole 32-bit words; a tail is not covered).
inline std::uint64_t checksum_word_count(std::uint64_t bytes) { return bytes / 4; }

}  // namespace epsim::hw

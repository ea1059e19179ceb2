// Checksums of the data the hw runner moves: a source buffer is filled with a known pattern of 32-bit
// words, the destination is checksummed after the copy and compared with the value computed here on the
// CPU. The arithmetic is shared with the CUDA kernels (EPSIM_HD marks it host+device under nvcc), so it
// is unit-tested without a GPU. The checksum is an order-independent sum mod 2^64 of a mix of each word
// with its index, so a GPU kernel can accumulate it with atomics and a shifted, truncated or stale copy
// gives a different value.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>

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

/// Which words of a transfer the check reads. A transfer of up to `max_words` words is covered whole;
/// a longer one by `chunks` contiguous runs of `chunk_words` words spread evenly over it, the first at
/// word 0 and the last ending at the last word (so truncation, a shift, a stale or a zero destination
/// still show), which bounds the host's work for the expected value and the kernel's reads. Indices stay
/// those of the whole transfer, so a sampled checksum is the sum of the same terms as a full one, over
/// the covered words only.
struct ChecksumSample {
  std::uint64_t words = 0;        ///< words in the transfer
  std::uint64_t chunk_words = 0;  ///< words per run (= words when covered whole)
  std::uint64_t chunks = 0;       ///< runs (1 when covered whole; 0 for an empty transfer)
  std::uint64_t stride = 0;       ///< words between the starts of runs 0..chunks-2

  EPSIM_HD std::uint64_t covered_words() const { return chunks * chunk_words; }
  /// First word of run k (k < chunks).
  EPSIM_HD std::uint64_t chunk_start(std::uint64_t k) const {
    return k + 1 == chunks ? words - chunk_words : k * stride;
  }
  /// The transfer's index of the c-th covered word (c < covered_words()).
  EPSIM_HD std::uint64_t word_index(std::uint64_t c) const { return chunk_start(c / chunk_words) + c % chunk_words; }
  bool whole() const { return covered_words() == words; }
};

/// Default bound: transfers up to 4 MiB are checked whole, longer ones by 256 runs of 16 KiB (4 MiB).
constexpr std::uint64_t kChecksumMaxWords = 1u << 20;
constexpr std::uint64_t kChecksumChunkWords = 1u << 12;

/// The sample for a transfer of `words` words. Throws std::invalid_argument unless
/// 0 < chunk_words <= max_words.
ChecksumSample checksum_sample(std::uint64_t words, std::uint64_t max_words = kChecksumMaxWords,
                               std::uint64_t chunk_words = kChecksumChunkWords);
/// Checksum of the covered words of `data` (a buffer of sample.words words).
std::uint64_t checksum_words(const std::uint32_t* data, const ChecksumSample& sample);
/// Checksum the covered words of a correct copy of a buffer filled with pattern `seed` give.
std::uint64_t expected_pattern_checksum(std::uint64_t seed, const ChecksumSample& sample);

/// Expected checksums of pattern-filled transfers (default sample), computed once per (seed, words):
/// a plan run checks many copies of the same few sizes.
class ExpectedChecksums {
 public:
  std::uint64_t get(std::uint64_t seed, std::uint64_t words);
  std::size_t computed() const { return cache_.size(); }

 private:
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::uint64_t> cache_;
};

/// "checksum mismatch in <transfer> (<bytes> bytes, <n> of <words> words checked): expected <hex>, found
/// <hex>": what epsim-hw prints (and exits 1 on) when moved data is not what was sent.
std::string checksum_mismatch_message(const std::string& transfer, std::uint64_t bytes, const ChecksumSample& sample,
                                      std::uint64_t expected, std::uint64_t found);

/// Checksum of `words` 32-bit words at `data`.
std::uint64_t checksum_words(const std::uint32_t* data, std::uint64_t words);
/// Checksum a buffer of `words` words filled with pattern `seed` would have (what a correct copy gives).
std::uint64_t expected_pattern_checksum(std::uint64_t seed, std::uint64_t words);
/// Words of a copy of `bytes` bytes that the checksum covers (whole 32-bit words; a tail is not covered).
inline std::uint64_t checksum_word_count(std::uint64_t bytes) { return bytes / 4; }

}  // namespace epsim::hw

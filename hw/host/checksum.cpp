#include "hw/host/checksum.hpp"

#include <cstdio>
#include <stdexcept>

namespace epsim::hw {

ChecksumSample checksum_sample(std::uint64_t words, std::uint64_t max_words, std::uint64_t chunk_words) {
  if (chunk_words == 0 || chunk_words > max_words)
    throw std::invalid_argument("checksum_sample: need 0 < chunk words <= max words");
  ChecksumSample s;
  s.words = words;
  if (words == 0) return s;
  if (words <= max_words) {
    s.chunk_words = words;
    s.chunks = 1;
    return s;
  }
  s.chunk_words = chunk_words;
  s.chunks = max_words / chunk_words;
  // Runs 0..chunks-2 start `stride` apart; the last one ends at the last word. words > max_words >=
  // chunks * chunk_words, so the runs never overlap.
  s.stride = s.chunks > 1 ? (words - chunk_words) / (s.chunks - 1) : 0;
  return s;
}

std::uint64_t checksum_words(const std::uint32_t* data, const ChecksumSample& sample) {
  std::uint64_t sum = 0;
  for (std::uint64_t c = 0; c < sample.covered_words(); ++c) {
    const std::uint64_t i = sample.word_index(c);
    sum += checksum_term(data[i], i);
  }
  return sum;
}

std::uint64_t expected_pattern_checksum(std::uint64_t seed, const ChecksumSample& sample) {
  std::uint64_t sum = 0;
  for (std::uint64_t c = 0; c < sample.covered_words(); ++c) {
    const std::uint64_t i = sample.word_index(c);
    sum += checksum_term(pattern_word(seed, i), i);
  }
  return sum;
}

std::uint64_t ExpectedChecksums::get(std::uint64_t seed, std::uint64_t words) {
  const auto key = std::make_pair(seed, words);
  auto it = cache_.find(key);
  if (it == cache_.end()) it = cache_.emplace(key, expected_pattern_checksum(seed, checksum_sample(words))).first;
  return it->second;
}

std::string checksum_mismatch_message(const std::string& transfer, std::uint64_t bytes, const ChecksumSample& sample,
                                      std::uint64_t expected, std::uint64_t found) {
  char tail[96];
  std::snprintf(tail, sizeof tail, "expected %016llx, found %016llx", static_cast<unsigned long long>(expected),
                static_cast<unsigned long long>(found));
  return "checksum mismatch in " + transfer + " (" + std::to_string(bytes) + " bytes, " +
         std::to_string(sample.covered_words()) + " of " + std::to_string(sample.words) + " words checked): " + tail;
}

std::uint64_t checksum_words(const std::uint32_t* data, std::uint64_t words) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < words; ++i) sum += checksum_term(data[i], i);
  return sum;
}

std::uint64_t expected_pattern_checksum(std::uint64_t seed, std::uint64_t words) {
  std::uint64_t sum = 0;
  for (std::uint64_t i = 0; i < words; ++i) sum += checksum_term(pattern_word(seed, i), i);
  return sum;
}

}  // namespace epsim::hw

#include "hw/host/checksum.hpp"

namespace epsim::hw {

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

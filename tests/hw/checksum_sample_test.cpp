// Sampled checksums of moved data: which words a long transfer's check covers, that host and pattern
// agree, what a wrong copy gives, and the message a mismatch prints.
#include <doctest/doctest.h>

#include <stdexcept>
#include <vector>

#include "hw/host/checksum.hpp"

using namespace epsim::hw;

namespace {

std::vector<std::uint64_t> covered(const ChecksumSample& s) {
  std::vector<std::uint64_t> out;
  for (std::uint64_t c = 0; c < s.covered_words(); ++c) out.push_back(s.word_index(c));
  return out;
}

std::vector<std::uint32_t> pattern(std::uint64_t seed, std::uint64_t words) {
  std::vector<std::uint32_t> buf(words);
  for (std::uint64_t i = 0; i < words; ++i) buf[i] = pattern_word(seed, i);
  return buf;
}

}  // namespace

TEST_CASE("checksum_sample: whole up to the bound, evenly spread runs beyond it, the last ending at the last word") {
  const ChecksumSample whole = checksum_sample(4, 4, 2);
  CHECK(whole.whole());
  CHECK(covered(whole) == std::vector<std::uint64_t>{0, 1, 2, 3});

  const ChecksumSample two = checksum_sample(10, 4, 2);  // 2 runs of 2: [0,1] and [8,9]
  CHECK_FALSE(two.whole());
  CHECK(two.chunks == 2);
  CHECK(two.stride == 8);
  CHECK(covered(two) == std::vector<std::uint64_t>{0, 1, 8, 9});

  const ChecksumSample three = checksum_sample(11, 6, 2);  // stride (11-2)/2 = 4: [0,1] [4,5] [9,10]
  CHECK(covered(three) == std::vector<std::uint64_t>{0, 1, 4, 5, 9, 10});

  const ChecksumSample empty = checksum_sample(0);
  CHECK(empty.covered_words() == 0);
  CHECK(expected_pattern_checksum(5, empty) == 0);

  CHECK(checksum_sample(kChecksumMaxWords).whole());
  const ChecksumSample big = checksum_sample(kChecksumMaxWords + 1);  // 4 MiB + 4 B: 256 runs of 16 KiB
  CHECK(big.chunks == 256);
  CHECK(big.chunk_words == 4096);
  CHECK(big.covered_words() == kChecksumMaxWords);
  CHECK(big.word_index(big.covered_words() - 1) == kChecksumMaxWords);  // the last word

  CHECK_THROWS_AS(checksum_sample(10, 4, 0), std::invalid_argument);
  CHECK_THROWS_AS(checksum_sample(10, 4, 5), std::invalid_argument);
}

TEST_CASE("a sampled checksum is the sum of the covered words' terms, and matches the pattern's expected value") {
  const std::vector<std::uint32_t> buf = pattern(9, 11);
  const ChecksumSample s = checksum_sample(11, 6, 2);
  const std::uint64_t by_hand = checksum_term(buf[0], 0) + checksum_term(buf[1], 1) + checksum_term(buf[4], 4) +
                                checksum_term(buf[5], 5) + checksum_term(buf[9], 9) + checksum_term(buf[10], 10);
  CHECK(checksum_words(buf.data(), s) == by_hand);
  CHECK(expected_pattern_checksum(9, s) == by_hand);
  // Covered whole, the sampled and the plain checksum agree.
  CHECK(checksum_words(buf.data(), checksum_sample(11)) == checksum_words(buf.data(), 11));
  CHECK(expected_pattern_checksum(9, checksum_sample(11)) == expected_pattern_checksum(9, 11));
}

TEST_CASE("a sampled check catches a wrong last word, a shifted or zero copy and another sender's data") {
  const ChecksumSample s = checksum_sample(11, 6, 2);
  const std::uint64_t good = expected_pattern_checksum(9, s);
  std::vector<std::uint32_t> buf = pattern(9, 11);
  buf[10] ^= 1u;  // the last word: a truncated copy
  CHECK(checksum_words(buf.data(), s) != good);
  buf = pattern(9, 12);
  CHECK(checksum_words(buf.data() + 1, s) != good);  // shifted by one word
  const std::vector<std::uint32_t> zeros(11, 0);
  CHECK(checksum_words(zeros.data(), s) != good);   // nothing arrived
  CHECK(checksum_words(pattern(10, 11).data(), s) != good);  // another pair's data
  buf = pattern(9, 11);
  buf[2] = 0;  // a word between runs is not covered: the documented price of sampling
  CHECK(checksum_words(buf.data(), s) == good);
}

TEST_CASE("a checksum mismatch names the transfer, its size and how much was checked") {
  CHECK(checksum_mismatch_message("NCCL all-to-all rank 1 -> rank 0", 40, checksum_sample(10, 4, 2), 0x1, 0xabc) ==
        "checksum mismatch in NCCL all-to-all rank 1 -> rank 0 (40 bytes, 4 of 10 words checked): expected "
        "0000000000000001, found 0000000000000abc");
}

TEST_CASE("ExpectedChecksums computes each (seed, words) once, with the default sample") {
  ExpectedChecksums e;
  CHECK(e.get(3, 100) == expected_pattern_checksum(3, 100));
  CHECK(e.get(3, kChecksumMaxWords + 8) == expected_pattern_checksum(3, checksum_sample(kChecksumMaxWords + 8)));
  CHECK(e.get(3, 100) == expected_pattern_checksum(3, 100));
  CHECK(e.get(4, 100) == expected_pattern_checksum(4, 100));
  CHECK(e.computed() == 3);
}

// The project's own deterministic random numbers, so that a seed gives byte-identical traces with
// every compiler and standard library (std:: distributions differ between implementations).
//  - SplitMix64 (Steele, Lea, Flood 2014) expands seeds; mix_seed() derives independent streams.
//  - Xoshiro256** (Blackman, Vigna 2018) is the generator; uniform() takes its top 53 bits;
//    normal() is Box-Muller on two uniforms (one value per call, the sine partner is dropped).
#pragma once

#include <cstdint>
#include <initializer_list>

namespace epsim {

class SplitMix64 {
 public:
  explicit SplitMix64(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next();

 private:
  std::uint64_t state_;
};

/// A seed for the stream named by `keys` under `seed`: SplitMix64 folded over the keys.
std::uint64_t mix_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> keys);

class Xoshiro256ss {
 public:
  /// The four state words are the first four outputs of SplitMix64(seed).
  explicit Xoshiro256ss(std::uint64_t seed);
  std::uint64_t next();
  /// Uniform on [0, 1): (next() >> 11) * 2^-53.
  double uniform();
  /// Uniform integer in [0, n), n >= 1, without modulo bias (rejection of the short last block).
  std::uint64_t below(std::uint64_t n);
  /// Standard normal: sqrt(-2 ln(1 - u1)) * cos(2 pi u2).
  double normal();

 private:
  std::uint64_t s_[4];
};

}  // namespace epsim

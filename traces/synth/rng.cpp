#include "traces/synth/rng.hpp"

#include <cmath>

namespace epsim {

namespace {
inline std::uint64_t rotl(std::uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
constexpr double kTwoPi = 6.283185307179586476925286766559;
}  // namespace

std::uint64_t SplitMix64::next() {
  std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

std::uint64_t mix_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> keys) {
  std::uint64_t h = SplitMix64(seed).next();
  for (std::uint64_t k : keys) h = SplitMix64(h ^ SplitMix64(k + 0x632be59bd9b4e019ull).next()).next();
  return h;
}

Xoshiro256ss::Xoshiro256ss(std::uint64_t seed) {
  SplitMix64 sm(seed);
  for (std::uint64_t& w : s_) w = sm.next();
}

std::uint64_t Xoshiro256ss::next() {
  const std::uint64_t result = rotl(s_[1] * 5, 7) * 9;
  const std::uint64_t t = s_[1] << 17;
  s_[2] ^= s_[0];
  s_[3] ^= s_[1];
  s_[1] ^= s_[2];
  s_[0] ^= s_[3];
  s_[2] ^= t;
  s_[3] = rotl(s_[3], 45);
  return result;
}

double Xoshiro256ss::uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

std::uint64_t Xoshiro256ss::below(std::uint64_t n) {
  const std::uint64_t threshold = (0 - n) % n;  // 2^64 mod n: values below it would bias the result
  for (;;) {
    const std::uint64_t r = next();
    if (r >= threshold) return r % n;
  }
}

double Xoshiro256ss::normal() {
  const double u1 = 1.0 - uniform();  // (0, 1]
  const double u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(kTwoPi * u2);
}

}  // namespace epsim

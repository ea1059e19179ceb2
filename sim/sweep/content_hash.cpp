#include "sim/sweep/content_hash.hpp"

#include <cstdio>
#include <fstream>
#include <vector>

#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

constexpr std::uint64_t kPrime = 1099511628211ull;

std::uint64_t mix(std::uint64_t h, const char* data, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    h ^= static_cast<unsigned char>(data[i]);
    h *= kPrime;
  }
  return h;
}

std::string hex16(std::uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

ContentHash& ContentHash::add(const std::string& text) {
  h_ = mix(h_, text.data(), text.size());
  const char separator = '\0';
  h_ = mix(h_, &separator, 1);
  return *this;
}

std::string ContentHash::hex() const { return hex16(h_); }

std::string file_hash(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(path, "", "cannot open to hash its content");
  std::uint64_t h = 14695981039346656037ull;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h = mix(h, buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  if (in.bad()) throw InputError(path, "", "read error while hashing its content");
  return hex16(h);
}

}  // namespace epsim

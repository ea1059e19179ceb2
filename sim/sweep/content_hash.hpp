// Content hashes of a sweep: FNV-1a 64 (the trace format's checksum) over text or a file, written as
// 16 hex digits. They identify a point's inputs and a whole sweep, not secrets.
#pragma once

#include <cstdint>
#include <string>

namespace epsim {

/// Accumulates text; hex() gives the hash so far.
class ContentHash {
 public:
  /// Adds `text` and a separator, so that ("ab", "c") and ("a", "bc") differ.
  ContentHash& add(const std::string& text);
  std::uint64_t value() const { return h_; }
  std::string hex() const;

 private:
  std::uint64_t h_ = 14695981039346656037ull;
};

/// The hash of a whole file's bytes; throws InputError naming `path` if it cannot be read.
std::string file_hash(const std::string& path);

}  // namespace epsim

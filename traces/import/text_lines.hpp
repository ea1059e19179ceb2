// Reads a text file line by line, keeping each line's 1-based number and byte offset, so that an
// importer can name the exact line of a defect and come back to a line later with seek().
// A trailing "\r" (CRLF files) is dropped from every line.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

namespace epsim {

class TextLines {
 public:
  /// Throws InputError(path, "", "cannot open: ...").
  explicit TextLines(const std::string& path);
  /// The next line into `line`; false at the end of the file. Throws InputError on a read error.
  bool next(std::string& line);
  /// Reads the line that starts at byte `offset` (a value offset() gave) into `line`.
  bool read_at(std::uint64_t offset, std::string& line);
  const std::string& path() const { return path_; }
  /// Number of the line last read (1-based; 0 before the first).
  std::uint64_t line_number() const { return line_no_; }
  /// Byte offset where the line last read starts.
  std::uint64_t offset() const { return line_offset_; }
  /// "line N" of the line last read.
  std::string place() const { return "line " + std::to_string(line_no_); }
  [[noreturn]] void fail(const std::string& message) const;

 private:
  std::string path_;
  std::ifstream in_;
  std::uint64_t line_no_ = 0;
  std::uint64_t line_offset_ = 0;
  std::uint64_t next_offset_ = 0;
};

}  // namespace epsim

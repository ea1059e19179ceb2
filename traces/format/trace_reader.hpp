// Streaming reader of the binary trace format (docs/trace-format.md): the header is read on open,
// records one at a time, so memory does not grow with the trace length. Corruption and truncation are
// reported as InputError naming the file, the record number and the byte offset.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "traces/format/trace_types.hpp"

namespace epsim {

class TraceReader {
 public:
  /// Opens and validates the header. Throws InputError.
  explicit TraceReader(const std::string& path);
  const TraceHeader& header() const;
  /// Reads the next record into `record` (reusing its buffers). Returns false after the last record,
  /// once the end marker has been checked. Throws InputError on a truncated or corrupt record.
  bool next(TraceRecord& record);
  std::uint64_t records_read() const;
  const std::string& path() const;

 private:
  std::string path_;
  std::ifstream in_;
  TraceHeader header_;
  std::uint64_t file_size_ = 0;
  std::uint64_t offset_ = 0;  ///< byte offset of the next unread byte
  std::uint64_t records_read_ = 0;
  bool finished_ = false;               ///< end marker read and checked
  std::vector<std::uint8_t> bytes_;     ///< one record's bytes, reused
  std::vector<std::uint32_t> scratch_;  ///< for the token histogram check
  TraceRecord last_key_;                ///< step, micro_batch, layer of the previous record

  void read_header();
  /// Reads exactly n bytes at offset_ into bytes_ (from bytes_[at]); the caller has checked that
  /// the file holds them.
  void read_into(std::size_t at, std::size_t n);
  [[noreturn]] void fail(const std::string& place, const std::string& message) const;
  [[noreturn]] void truncated(std::uint64_t start, const std::string& what, std::uint64_t needed, bool at_least) const;
  void read_end_block(std::uint64_t start);
};

}  // namespace epsim

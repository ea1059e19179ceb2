// Writer of the binary trace format. It writes to "PATH.partial" and renames to PATH only in
// close(), so an interrupted or failed write never leaves a half trace under the final name, and it
// refuses to replace an existing file unless asked to.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "traces/format/trace_types.hpp"

namespace epsim {

class TraceWriter {
 public:
  /// Throws InputError if `path` exists and !overwrite, or if the header is inconsistent.
  TraceWriter(const std::string& path, const TraceHeader& header, bool overwrite = false);
  /// Removes the partial file if close() was not reached.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// Checks the record against the header (matrix size, layer index, token arrays) and appends it.
  void write(const TraceRecord& record);
  /// Writes the end marker, flushes and renames into place.
  void close();

 private:
  std::string path_;
  std::string partial_path_;  ///< path_ + ".partial"
  TraceHeader header_;
  std::ofstream out_;
  std::vector<std::uint8_t> bytes_;     ///< one encoded record, reused
  std::vector<std::uint32_t> scratch_;  ///< for the token histogram check
  std::uint64_t records_written_ = 0;
  TraceRecord last_key_;  ///< step, micro_batch, layer of the last record (no arrays)
  bool closed_ = false;

  void write_bytes(const std::uint8_t* data, std::size_t n);
};

}  // namespace epsim

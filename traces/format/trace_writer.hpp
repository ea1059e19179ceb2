// Writer of the binary trace format. It writes through an AtomicFile (a hidden temporary file beside
// PATH, renamed into place only by close()), so an interrupted or failed write never leaves a half
// trace under the final name, and it refuses to replace an existing file unless asked to.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/core/atomic_file.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

class TraceWriter {
 public:
  /// Throws InputError if `path` exists and !overwrite, or if the header is inconsistent.
  TraceWriter(const std::string& path, const TraceHeader& header, bool overwrite = false);
  /// Removes the temporary file if close() was not reached.
  ~TraceWriter();
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// Checks the record against the header (matrix size, layer index, token arrays) and appends it.
  void write(const TraceRecord& record);
  /// Writes the end marker, flushes and renames into place.
  void close();

 private:
  std::string path_;
  TraceHeader header_;
  std::unique_ptr<AtomicFile> out_;
  std::vector<std::uint8_t> bytes_;     ///< one encoded record, reused
  std::vector<std::uint32_t> scratch_;  ///< for the token histogram check
  std::uint64_t records_written_ = 0;
  TraceRecord last_key_;  ///< step, micro_batch, layer of the last record (no arrays)
  bool closed_ = false;

  void write_bytes(const std::uint8_t* data, std::size_t n);
};

}  // namespace epsim

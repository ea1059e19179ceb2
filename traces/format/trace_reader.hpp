// Streaming reader of the binary trace format (docs/trace-format.md): the header is read on open,
// records one at a time, so memory does not grow with the trace length. Corruption and truncation are
// reported as InputError naming the file, the record number and the byte offset.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>

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
  // Implementation's choice.
};

}  // namespace epsim

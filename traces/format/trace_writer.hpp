// Writer of the binary trace format. It writes to "PATH.partial" and renames to PATH only in
// close(), so an interrupted or failed write never leaves a half trace under the final name, and it
// refuses to replace an existing file unless asked to.
#pragma once

#include <string>

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
  // Implementation's choice.
};

}  // namespace epsim

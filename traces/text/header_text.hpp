// The header block printed first by `epsim trace show` and `epsim trace stats`.
#pragma once

#include <ostream>
#include <string>

#include "traces/format/trace_types.hpp"

namespace epsim {

/// Fixed-format lines: file, source format and version, sizes, layer ids, token ids, provenance and
/// rank assignment.
void write_header_text(const std::string& path, const TraceHeader& header, std::ostream& out);

}  // namespace epsim

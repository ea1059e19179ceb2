// A trace that an importer wrote must read back: an importer that accepts its input promises a valid
// trace file, so an InputError from the reader here is a bug in the importer, not bad input.
#pragma once

#include <string>

namespace epsim::fuzz {

/// Reads every record of `path` (if it exists); stops the fuzzer on any error.
void check_trace_reads_back(const std::string& path);

}  // namespace epsim::fuzz

// `epsim trace info FILE`: what a trace holds, read in one streaming pass: the header, the file's
// size, the number of records, steps, micro-batches and layers, and the tokens. Every record is read
// and checked, so a trace `info` accepts is a whole, uncorrupted trace.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

#include "traces/format/trace_types.hpp"

namespace epsim {

struct TraceInfo {
  TraceHeader header;
  std::uint64_t file_bytes = 0;
  std::uint64_t records = 0;
  std::uint64_t steps = 0;  ///< distinct step numbers
  std::uint32_t first_step = 0, last_step = 0;
  std::uint64_t min_micro_batches = 0, max_micro_batches = 0;  ///< distinct micro-batches of a step
  std::uint64_t min_layers = 0, max_layers = 0;                ///< records of one (step, micro-batch)
  std::uint64_t tokens = 0, assignments = 0;
};

/// Throws InputError on a bad trace.
TraceInfo read_trace_info(const std::string& path);
void write_trace_info(const std::string& path, std::ostream& out);

}  // namespace epsim

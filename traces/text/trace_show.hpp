// `epsim trace show FILE [--records N] [--tokens]`: the header, then for each of the first N records
// its key, token count and count matrix (one line per source rank), and with --tokens its first
// tokens (source rank and top-k ids). The whole file is still read, so a corrupt tail is reported.
#pragma once

#include <cstdint>
#include <limits>
#include <ostream>
#include <string>

namespace epsim {

struct ShowOptions {
  std::uint64_t records = std::numeric_limits<std::uint64_t>::max();  ///< records printed
  bool tokens = false;
  std::uint32_t tokens_shown = 16;  ///< tokens printed per record with `tokens`
};

/// Throws InputError on a bad trace.
void write_trace_show(const std::string& path, const ShowOptions& options, std::ostream& out);

}  // namespace epsim

// Writes a `kind: measurements` file (docs/calibration.md) that load_measurements() reads back: the
// output of every `epsim-hw bench`. Extra observations that have no key in the format (head-of-line
// blocking, SM-copy grid sizes, ...) go into `# ` comment lines, which the strict reader ignores.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "hw/calibration/measurements.hpp"

namespace epsim::hw {

/// Serialises `m` (file and `where` fields are ignored); `comments` are written as leading `# ` lines,
/// `command_line` (when not empty) as a `# command:` comment inside the header. Optional keys are
/// written only when set: the header's hardware and source, a point's source, published rates (> 0, as
/// `TFLOPs` / `GBps`), an ep_comm point's sms (> 0) and max_nodes (group_limited). GEMM shapes carry
/// `dtype: bf16|fp8|...`; ep_comm points carry `timing: kernel|api` and no repetitions key.
void write_measurements(std::ostream& out, const Measurements& m, const std::vector<std::string>& comments = {},
                        const std::string& command_line = "");
/// Writes atomically (AtomicFile); an existing file is replaced only if `replace`. Throws InputError.
void write_measurements_file(const std::string& path, const Measurements& m,
                             const std::vector<std::string>& comments = {}, bool replace = false,
                             const std::string& command_line = "");

/// A YAML double-quoted scalar.
std::string yaml_quote(const std::string& text);
/// Shortest round-tripping decimal text of a finite double.
std::string format_number(double value);

}  // namespace epsim::hw

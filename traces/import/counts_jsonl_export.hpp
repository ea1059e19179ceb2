// Writes a binary trace as epsim-counts-jsonl (docs/trace-format.md, section 3.4): the header line,
// then one line per (record, source rank) in record order. `epsim trace export counts-jsonl`.
// Importing the result gives back the same records (token ids, if the trace had them, are not
// written: the format holds counts only). With a path holding "{rank}", one file per source rank is
// written, each with "rank" in its header, the way a recorder on every rank writes them.
#pragma once

#include <string>

namespace epsim {

/// Streams the trace (one record in memory). Every output appears whole or not at all; an existing
/// one is replaced only with `overwrite`. Throws InputError.
void export_counts_jsonl(const std::string& trace_path, const std::string& out_path, bool overwrite);

}  // namespace epsim

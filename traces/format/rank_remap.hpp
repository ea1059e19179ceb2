// Re-expressing a trace recorded with R source ranks for an EP degree of R' ranks, when R' is a
// multiple or a divisor of R (docs/trace-format.md, "Rank remapping").
//  - Merge (R' = R / f): rank s becomes s / f; rows are summed; token source ranks are divided by f.
//  - Split (R' = R * f): rank s becomes ranks s*f .. s*f+f-1.
//      * counts only: every count c[s][e] is split as evenly as possible, c / f each and the c % f
//        remaining tokens one each to the lowest new ranks (s*f, s*f+1, ...);
//      * with token ids: the tokens of old rank s keep their order and are cut into f contiguous
//        slices (the k-th of its n_s tokens goes to s*f + floor(k*f/n_s)); the count matrix is then
//        recomputed from the tokens, so it stays consistent with them.
//  Totals per expert are preserved in every case.
#pragma once

#include <cstdint>
#include <string>

#include "traces/format/trace_types.hpp"

namespace epsim {

/// True when `to_ranks` is a multiple or a divisor of `from_ranks` (both >= 1).
bool ranks_remappable(std::uint32_t from_ranks, std::uint32_t to_ranks);

/// The header of the remapped trace: num_ranks = to_ranks and the rule appended to rank_assignment.
/// Throws InputError when the ratio is not supported; `trace_path` names the file in that message
/// ("rank remap" when empty).
TraceHeader remap_header(const TraceHeader& header, std::uint32_t to_ranks, const std::string& trace_path = "");

/// The record with to_ranks source ranks. `header` is the record's own (original) header.
/// Throws InputError when the ratio is not supported; `trace_path` names the file in that message
/// ("rank remap" when empty).
TraceRecord remap_ranks(const TraceRecord& record, const TraceHeader& header, std::uint32_t to_ranks,
                        const std::string& trace_path = "");

}  // namespace epsim

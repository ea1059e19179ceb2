// A recorded trace re-expressed for another expert count, top-k or EP degree, so that one recording
// answers a what-if grid (docs/trace-format.md, "Derived traces"). Each record is derived on its own,
// so the micro-batch and step dynamics of the recording are kept record for record. Per record:
//  - Experts E -> E' = m E (split): expert e becomes experts e m .. e m + m - 1 and its count c on a
//    rank is shared as evenly as possible (c / m each, the c % m remaining assignments one each to the
//    lowest new experts). E -> E' = E / m (merge): experts e m .. e m + m - 1 become expert e, counts
//    summed. Other ratios are refused. Popularity shares are kept (a split expert's share divided by m).
//  - Top-k K -> K': each rank keeps its n tokens and gets n K' assignments; the share of every expert
//    in the rank's row is kept as closely as whole counts allow (largest remainder, ties to the lower
//    expert), and no count exceeds n (a token picks an expert once): what a capped expert cannot take
//    goes to the others in proportion to their shares.
//  - Ranks R -> R': the rank remapping of rank_remap.hpp (a multiple or a divisor of R).
// Applied in that order. Token ids are dropped when experts or top-k change (the counts no longer
// come from whole tokens); a rank remap alone keeps them.
#pragma once

#include <cstdint>
#include <string>

#include "traces/format/trace_types.hpp"

namespace epsim {

struct DeriveOptions {
  std::uint32_t experts = 0;  ///< 0: keep
  std::uint32_t top_k = 0;    ///< 0: keep
  std::uint32_t ranks = 0;    ///< 0: keep
};

/// The derived header, with the rule appended to the provenance. Throws InputError naming
/// `trace_path` when a target is unsupported (an expert ratio that is not a whole factor, a top-k
/// above the new expert count, a rank ratio that is not a whole factor).
TraceHeader derive_header(const TraceHeader& header, const DeriveOptions& options, const std::string& trace_path);

/// One record derived; `header` is the input's own header, checked by derive_header.
TraceRecord derive_record(const TraceRecord& record, const TraceHeader& header, const DeriveOptions& options,
                          const std::string& trace_path);

/// Streams `path` to `out_path` (atomic; an existing output only with `overwrite`).
void derive_trace(const std::string& path, const DeriveOptions& options, const std::string& out_path, bool overwrite);

}  // namespace epsim

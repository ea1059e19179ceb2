// Consistency rules of a trace header and of one record against its header. They return what is
// wrong as text (empty when all is well), so that the reader and the writer can each raise it as an
// InputError with their own file and place.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/format/trace_types.hpp"

namespace epsim {

/// Ranks, experts, top-k and layers within the format's limits, top_k <= experts, one layer id per
/// layer and no id twice, version == 1, strings not longer than the limit.
std::string check_trace_header(const TraceHeader& header);

/// The record against the header: layer index, matrix size, the format's limits on tokens and bytes
/// per record, and
///  - with token ids: arrays of num_tokens and num_tokens * top_k entries, every source rank
///    < num_ranks, every expert id < num_experts and distinct within its token, and the count matrix
///    equal to the histogram of the tokens (so each row sums to that rank's tokens * top_k);
///  - without: empty token arrays and the matrix summing to num_tokens * top_k.
/// `num_tokens` is the number the file states (the writer passes record_num_tokens()).
/// `scratch` is reused between calls to avoid allocations.
std::string check_trace_record(const TraceRecord& record, const TraceHeader& header, std::uint64_t num_tokens,
                               std::vector<std::uint32_t>& scratch);

/// Sum of the count matrix (every top-k assignment of every token).
std::uint64_t record_assignments(const TraceRecord& record);
/// Tokens of the record: the token arrays' length when present, else assignments / top_k.
std::uint64_t record_num_tokens(const TraceRecord& record, const TraceHeader& header);

/// "(step 0, micro-batch 1, layer 2)" for messages.
std::string record_key_text(const TraceRecord& record);
/// Records must come in strictly increasing (step, micro_batch, layer) order.
bool record_key_less(const TraceRecord& a, const TraceRecord& b);

}  // namespace epsim

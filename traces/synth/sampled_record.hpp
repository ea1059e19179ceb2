// Fills one record by sampling: every source rank s draws `tokens_per_rank` tokens, each a top-k of
// distinct experts from that rank's sampler. Token t of the R*T tokens belongs to rank t / T (the
// contiguous-slices rule with equal slices). Shared by the synthetic generator and the OLMoE importer.
#pragma once

#include <cstdint>
#include <vector>

#include "traces/format/trace_types.hpp"
#include "traces/synth/rng.hpp"
#include "traces/synth/topk_sampler.hpp"

namespace epsim {

/// `samplers` has one entry per rank, or a single entry shared by all ranks. The record's step,
/// micro_batch and layer are left as they are; counts (and token arrays when `with_token_ids`) are
/// overwritten. Tokens are drawn rank by rank, token by token, from `rng`.
void fill_sampled_record(TraceRecord& record, std::vector<TopkSampler>& samplers, std::uint32_t num_ranks,
                         std::uint32_t num_experts, std::uint32_t tokens_per_rank, bool with_token_ids,
                         Xoshiro256ss& rng);

/// The seed of the sampling stream of one record: mix_seed(seed, {stream, step, micro_batch, layer}).
std::uint64_t record_stream_seed(std::uint64_t seed, std::uint64_t stream, std::uint32_t step,
                                 std::uint32_t micro_batch, std::uint32_t layer);

}  // namespace epsim

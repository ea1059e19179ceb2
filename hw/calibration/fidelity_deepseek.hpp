// The DeepSeek-V3 section of docs/fidelity.md: one MoE layer of the bundled model on a preset at
// EP 8, 16, 32 and 64 (nodes of the preset's gpus_per_node), forward and backward, static EP, from a
// group-limited routing drawn in-process (uniform popularity, every token first picks
// routing.groups_per_token of routing.groups expert groups, then its top-k experts uniformly inside
// them; 4096 tokens per rank, fixed seed), with the time of every kernel, so that it can be held
// against published traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

constexpr std::uint64_t kDeepSeekSeed = 20241227;  ///< the report's release date, a fixed seed
constexpr std::uint32_t kDeepSeekTokensPerRank = 4096;

/// counts[rank][expert] of `ranks` ranks drawing `tokens_per_rank` tokens each with the model's
/// group-limited top-k (plain uniform top-k when model.routing is not limited).
TraceRecord group_limited_record(const ModelSpec& model, int ranks, std::uint32_t tokens_per_rank, std::uint64_t seed);

/// Markdown of the section (starting with its "## " heading). Runs the layer on `hardware` at each
/// EP degree in `eps`; a degree the preset cannot hold (gpus_per_node does not divide it) is refused
/// with InputError.
std::string deepseek_section(const ModelSpec& model, const HardwareSpec& hardware, const std::vector<int>& eps,
                             const std::string& model_path, const std::string& hardware_path);

}  // namespace epsim

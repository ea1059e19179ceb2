// Load figures of one record, as printed by `epsim trace stats`: expert load (tokens routed to an
// expert, summed over source ranks), hottest expert / mean expert load, and, under static expert
// parallelism over N GPUs, max / mean GPU load (a GPU's load is the sum of its experts' loads).
// Static EP placements: contiguous = GPU g holds experts [g*E/N, (g+1)*E/N) (integer division);
// interleaved = GPU g holds the experts e with e % N == g.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/format/trace_types.hpp"

namespace epsim {

enum class ExpertLayout { contiguous, interleaved };

/// "contiguous" or "interleaved"; false otherwise.
bool parse_expert_layout(const std::string& name, ExpertLayout& out);
const char* expert_layout_name(ExpertLayout layout);

/// GPU of every expert under static EP over `gpus` GPUs (1 <= gpus <= experts).
std::vector<std::uint32_t> static_ep_gpu_of_expert(std::uint32_t experts, std::uint32_t gpus, ExpertLayout layout);

struct RecordLoad {
  std::uint64_t tokens = 0;
  std::uint64_t assignments = 0;  ///< tokens * top_k
  std::uint32_t hottest_expert = 0;
  double hot_over_mean = 0;  ///< 0 when the record is empty
  std::uint32_t busiest_gpu = 0;
  double gpu_max_over_mean = 0;  ///< 0 when no GPUs are given or the record is empty
};

/// Per-expert loads of `record` (size num_experts).
std::vector<std::uint64_t> expert_loads(const TraceRecord& record, const TraceHeader& header);

/// `gpu_of_expert` may be empty (no EP figures); else it has num_experts entries below `gpus`.
RecordLoad record_load(const TraceRecord& record, const TraceHeader& header,
                       const std::vector<std::uint32_t>& gpu_of_expert, std::uint32_t gpus);

}  // namespace epsim

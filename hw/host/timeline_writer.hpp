// The hw runner's output: a measured timeline (format "epsim-measured-timeline", version 1, the form
// sim/validate/measured_timeline.hpp reads): one record per Plan, each event in the simulator's
// TimelineEvent schema {gpu, track, pass, name, start_ps, end_ps, bytes}.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "sim/replay/timeline.hpp"

namespace epsim::hw {

struct RunRecord {
  std::uint32_t step = 0, micro_batch = 0, layer = 0;
  std::vector<TimelineEvent> events;
};

/// Milliseconds (cudaEventElapsedTime) to whole picoseconds, rounded; negative values clamp to 0.
std::int64_t ms_to_ps(double ms);

nlohmann::json run_records_to_json(const std::string& gpu_name, const std::vector<RunRecord>& records);
/// Writes atomically (AtomicFile); an existing file is replaced only if `replace`. Throws InputError.
void write_run_records(const std::string& path, const std::string& gpu_name, const std::vector<RunRecord>& records,
                       bool replace = false);

}  // namespace epsim::hw

// The measured timeline: what `epsim-hw run PLANS.jsonl` writes after running the same Plans on real
// GPUs, one record per (step, micro-batch, layer), each event in exactly the simulator's own form
// (TimelineEvent). The schema is defined in docs/validation.md; the reader below is strict.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "sim/replay/timeline.hpp"

namespace epsim {

constexpr const char* kMeasuredTimelineFormat = "epsim-measured-timeline";
constexpr int kMeasuredTimelineVersion = 1;

/// One Plan as run on the GPUs: the events of every GPU, times relative to any origin (only
/// differences matter), in picoseconds.
struct MeasuredRecord {
  std::uint32_t step = 0;
  std::uint32_t micro_batch = 0;
  std::uint32_t layer = 0;
  std::vector<TimelineEvent> events;
};

struct MeasuredTimeline {
  std::string gpu_name;  ///< as the driver reports it
  std::vector<MeasuredRecord> records;
};

/// Reads and checks a measured-timeline file. Throws InputError naming the file and the place: the
/// line and column of a JSON syntax error (a number beyond a double, nesting deeper than
/// kMaxJsonDepth included), or the key path (`records[3].events[12].end_ps`) of a missing,
/// unknown, mistyped or impossible value, a duplicate record or an unknown format or version.
MeasuredTimeline read_measured_timeline(const std::string& path);
/// The same checks on a parsed document; `file` names it in errors.
MeasuredTimeline measured_timeline_from_json(const nlohmann::json& json, const std::string& file);
/// The document `read_measured_timeline` accepts (the hw runner's output, and test fixtures).
nlohmann::json measured_timeline_to_json(const MeasuredTimeline& timeline);

/// Parses a track name as written by to_string(Track); false if it is none of them.
bool track_from_string(const std::string& name, Track& track);
const char* to_string(Pass pass);

}  // namespace epsim

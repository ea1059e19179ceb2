// Pairing predicted with measured tasks of one record. Two events are the same task when they have
// the same (gpu, track, pass, name) and the same occurrence index among the events with that key in
// time order (start, then end). Link tracks (nvlink_out, nic_out) hold per-message flows, not tasks a
// GPU timer can see, and take no part.
#pragma once

#include <string>
#include <vector>

#include "sim/replay/timeline.hpp"

namespace epsim {

/// False for nvlink_out and nic_out.
bool is_matched_track(Track track);

/// The task kind of an event name: the name without its per-stage (" s2"), per-expert (" e17") and
/// per-GEMM-group (" g1", sim/validate/gemm_groups.hpp) suffixes, so that "dispatch s1", "weights e3"
/// and "gemm fwd g1" report as "dispatch", "weights" and "gemm fwd".
std::string task_kind(const std::string& name);

struct MatchedTask {
  TimelineEvent predicted;
  TimelineEvent measured;
  int occurrence = 0;  ///< index among the events with the same (gpu, track, pass, name)
};

struct UnmatchedTask {
  TimelineEvent event;
  int occurrence = 0;
};

struct TaskMatch {
  std::vector<MatchedTask> matched;           ///< by predicted start, then gpu, track, pass, name
  std::vector<UnmatchedTask> predicted_only;  ///< same order
  std::vector<UnmatchedTask> measured_only;   ///< by measured start, then gpu, track, pass, name
};

/// Events on link tracks are ignored on both sides. The result depends only on the events, not on
/// their order in the inputs.
TaskMatch match_tasks(const std::vector<TimelineEvent>& predicted, const std::vector<TimelineEvent>& measured);

}  // namespace epsim

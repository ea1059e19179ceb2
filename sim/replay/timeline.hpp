// What the engine did, task by task: the raw material of every metric and of the Perfetto trace.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/time.hpp"

namespace epsim {

/// The resource a task occupied. One track per GPU resource in the Perfetto trace.
enum class Track : std::uint8_t {
  compute,      ///< the compute stream (grouped GEMMs, planner kernels)
  comm_kernel,  ///< EP backend kernels holding SMs (dispatch, combine)
  copy_engine,  ///< the P2P Copy Engine
  nvlink_out,   ///< flows leaving the GPU over NVLink
  nic_out,      ///< flows leaving the GPU over InfiniBand
  host_cpu,     ///< the node's host CPU (gpu is the node's first GPU)
};

const char* to_string(Track track);

/// Which pass of the layer a task belongs to.
enum class Pass : std::uint8_t { forward, backward };

/// 64 bytes (a one-byte track and pass): a wide layer records hundreds of thousands of these, all in
/// fresh memory that the kernel clears page by page.
struct TimelineEvent {
  int gpu = 0;
  Track track = Track::compute;
  Pass pass = Pass::forward;
  std::string name;
  Time_ps start_ps = 0;
  Time_ps end_ps = 0;
  double bytes = 0;  ///< payload bytes for transfers, 0 for kernels
};
static_assert(sizeof(TimelineEvent) <= 64, "a timeline event fits a cache line");

struct Timeline {
  std::vector<TimelineEvent> events;
};

}  // namespace epsim

// What each GPU did during one pass of a simulated MoE layer, read off its timeline: how long its
// compute stream ran kernels, how long its data was moving (its outgoing NVLink and NIC messages and
// its Copy Engine copies), and how long it did either. An EP kernel's span is not communication here:
// it includes the time the kernel spins waiting for peers, which is the stragglers' doing, not this
// GPU's own transfer. Overlapping events count once (interval union).
#pragma once

#include <algorithm>
#include <utility>
#include <vector>

#include "sim/replay/timeline.hpp"

namespace epsim {

struct GpuPassBusy {
  double compute_us = 0;  ///< C_g: union of the compute track's kernels
  double comm_us = 0;     ///< M_g: union of its data in flight (messages out, Copy Engine copies)
  double active_us = 0;   ///< union of both: the pass length minus this is time the GPU waited idle
};

namespace pass_busy_detail {

/// Length of the union of half-open intervals, in us.
inline double union_us(std::vector<std::pair<Time_ps, Time_ps>> spans) {
  std::sort(spans.begin(), spans.end());
  Time_ps total = 0, open_start = 0, open_end = 0;
  bool open = false;
  for (const auto& [start, end] : spans) {
    if (end <= start) continue;
    if (open && start <= open_end) {
      open_end = std::max(open_end, end);
      continue;
    }
    if (open) total += open_end - open_start;
    open_start = start;
    open_end = end;
    open = true;
  }
  if (open) total += open_end - open_start;
  return ps_to_us(total);
}

inline bool is_comm(Track track) {
  return track == Track::copy_engine || track == Track::nvlink_out || track == Track::nic_out;
}

}  // namespace pass_busy_detail

/// Per GPU 0..num_gpus-1, the busy times of `pass` in `timeline`. Host CPU work (planners) is neither:
/// a GPU waiting for it is idle.
inline std::vector<GpuPassBusy> pass_busy(const Timeline& timeline, Pass pass, int num_gpus) {
  using Spans = std::vector<std::pair<Time_ps, Time_ps>>;
  std::vector<Spans> compute(num_gpus), comm(num_gpus);
  for (const TimelineEvent& e : timeline.events) {
    if (e.pass != pass || e.gpu < 0 || e.gpu >= num_gpus) continue;
    if (e.track == Track::compute) compute[e.gpu].emplace_back(e.start_ps, e.end_ps);
    else if (pass_busy_detail::is_comm(e.track)) comm[e.gpu].emplace_back(e.start_ps, e.end_ps);
  }
  std::vector<GpuPassBusy> out(num_gpus);
  for (int g = 0; g < num_gpus; ++g) {
    out[g].compute_us = pass_busy_detail::union_us(compute[g]);
    out[g].comm_us = pass_busy_detail::union_us(comm[g]);
    Spans both = compute[g];
    both.insert(both.end(), comm[g].begin(), comm[g].end());
    out[g].active_us = pass_busy_detail::union_us(std::move(both));
  }
  return out;
}

}  // namespace epsim

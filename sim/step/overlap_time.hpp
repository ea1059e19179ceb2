// Time of one pass of one MoE layer with its non-MoE work, without and with two-micro-batch overlap
// (docs/step.md, "Overlap"). Without overlap the non-MoE work runs, then the simulated MoE pass:
//   t = N + P.
// With two micro-batches (DeepSeek-V3's inference overlap; DualPipe pairs chunks the same way in
// training) each half runs attention, dispatch, experts, combine, and one half's communication runs
// under the other half's computation. Pairing the four stages of the halves, with each half costing
// half of the whole and the communication split evenly between dispatch and combine, gives per GPU g
//   t_g = max(N, M_g / 2) + max(C_g, M_g / 2)
// where C_g is g's MoE compute in the pass and M_g the time its data was moving. The slowest GPU gates
// the layer; what no GPU spent computing or moving data (a planner before the dispatch, kernels'
// fixed costs and latencies), U = P - max_g A_g with A_g the time g did either, is hidden by nothing;
// and overlap never makes a layer slower than running it plainly:
//   t = min(N + P, max_g t_g + U).
#pragma once

#include <algorithm>
#include <vector>

#include "sim/hardware/experiment_spec.hpp"
#include "sim/step/pass_busy.hpp"

namespace epsim {

/// `non_moe_us`: N; `moe_pass_us`: P, the simulated critical path of the pass; `busy`: per GPU.
inline double layer_pass_us(StepOverlap overlap, double non_moe_us, double moe_pass_us,
                            const std::vector<GpuPassBusy>& busy) {
  const double plain = non_moe_us + moe_pass_us;
  if (overlap == StepOverlap::none || busy.empty()) return plain;
  double gated = 0, busiest = 0;
  for (const GpuPassBusy& b : busy) {
    const double half_comm = b.comm_us / 2.0;
    gated = std::max(gated, std::max(non_moe_us, half_comm) + std::max(b.compute_us, half_comm));
    busiest = std::max(busiest, b.active_us);
  }
  const double unhidden = std::max(0.0, moe_pass_us - busiest);
  return std::min(plain, gated + unhidden);
}

}  // namespace epsim

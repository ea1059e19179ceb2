// The outcome of simulating one Plan (one layer of one micro-batch): its timeline and the per-GPU and
// per-resource totals that metrics are computed from.
#pragma once

#include <vector>

#include "sim/replay/timeline.hpp"

namespace epsim {

struct LayerResult {
  Timeline timeline;
  Time_ps forward_ps = 0;   ///< critical path of the forward pass
  Time_ps backward_ps = 0;  ///< critical path of the backward pass (0 when not simulated)

  // Per GPU.
  std::vector<Time_ps> routed_gemm_fwd_ps;  ///< T_g: forward routed-expert GEMM kernel time
  std::vector<Time_ps> gemm_finish_fwd_ps;  ///< when the GPU's last forward routed GEMM ended
  std::vector<Time_ps> compute_busy_ps;     ///< compute stream busy, both passes
  std::vector<Time_ps> copy_engine_busy_ps;
  std::vector<double> nvlink_out_util;      ///< wire bytes / (capacity * layer time)
  std::vector<double> nic_out_util;
  /// The GEMM groups (indices in the plan's gemm_order[gpu]) in the order the GPU's forward ran them:
  /// an on-arrival group may run before the groups listed ahead of it. `epsim validate` names each
  /// GEMM on the timeline by its group with it.
  std::vector<std::vector<int>> forward_gemm_groups;

  // Bytes moved, by what they are and what carried them (payload, both passes).
  double ep_token_bytes = 0;
  double ce_token_bytes = 0;
  double internode_token_bytes = 0;  ///< of the EP token bytes, those that cross between nodes (RDMA)
  double weight_bytes = 0;
  double gradient_bytes = 0;

  Time_ps layer_ps() const { return forward_ps + backward_ps; }
};

}  // namespace epsim

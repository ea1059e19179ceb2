// A record's metrics and forward GEMM finishes as the exact checks (sim/report/exact_check.hpp,
// comparison_exact_check.hpp) read them, set by hand.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/replay/layer_metrics.hpp"
#include "sim/replay/layer_result.hpp"

namespace epsim::test {

/// Layer `layer` of step 0, micro-batch 0: its time, the GPU that ends its forward GEMMs last and
/// that GPU's lead on the next.
inline LayerMetrics checked_metrics(double layer_us, int last_gpu, double lead_us = 0, std::uint32_t layer = 0) {
  LayerMetrics m;
  m.layer_id = layer;
  m.layer_time_us = layer_us;
  m.last_gpu = last_gpu;
  m.last_gpu_lead_us = lead_us;
  return m;
}

/// A result whose GPUs end their forward GEMMs at `us`, GPU by GPU.
inline LayerResult finishing(const std::vector<double>& us) {
  LayerResult r;
  for (const double t : us) r.gemm_finish_fwd_ps.push_back(static_cast<Time_ps>(t * kPsPerUs));
  return r;
}

}  // namespace epsim::test

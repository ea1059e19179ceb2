// The table `epsim run` prints: for the headline metrics, their mean, p50, p95, min and max over the
// replayed (micro-batch, layer) records in the balancer's steady state, the same apart for its warm-up
// records (n/a where the trace is too short to leave warm-up), where the critical path spends its
// time, and which GPUs straggle most often.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/report/layer_metrics.hpp"

namespace epsim {

class RunSummary {
 public:
  explicit RunSummary(int num_gpus);
  void add(const LayerMetrics& m);
  std::size_t records() const { return metrics_.size(); }
  /// Writes the table (after the caller's own header lines).
  void print(std::ostream& out) const;

 private:
  int num_gpus_;
  std::vector<LayerMetrics> metrics_;
};

}  // namespace epsim

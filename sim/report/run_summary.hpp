// The table `epsim run` prints: for the headline metrics, their median, mean, min and max over the
// replayed (micro-batch, layer) records, and which GPUs straggle most often.
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

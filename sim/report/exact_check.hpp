// `epsim run --check-exact N`: the run's first N records simulated again under exact bandwidth
// sharing, and how far the run's own sharing (auto's coupled or local past 256 GPUs, or a mode the
// hardware file names) is from it on the user's own trace: layer time, every GPU's forward GEMM
// finish, and the GPU named last.
//
// Why: the fast sharing models' errors are measured on synthetic layers (docs/performance.md,
// "coupled", "Which GPU is last"); a user's trace may differ. Exact costs seconds to minutes a layer
// past 256 GPUs, so the user checks a few records, not all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "sim/hardware/experiment_spec.hpp"
#include "sim/replay/layer_metrics.hpp"
#include "sim/replay/layer_result.hpp"

namespace epsim {

class ExactCheck {
 public:
  /// Checks the first `records` records of the run.
  explicit ExactCheck(std::size_t records) : wanted_(records) {}

  std::size_t wanted() const { return wanted_; }
  /// The run's record, in replay order: kept while fewer than wanted() are.
  void add_run(const LayerMetrics& metrics, const LayerResult& result);
  /// The same record under exact sharing, in the same order (std::logic_error past the run's kept
  /// records).
  void add_exact(const LayerMetrics& metrics, const LayerResult& result);
  /// The run's kept records simulated again under exact sharing: `run`, the experiment the run
  /// replayed, with exact sharing, its kept records alone and no timeline (the same plans: a
  /// balancer plans from the counts and its history of them; other rates). Up to `threads` records
  /// at once; the figures do not depend on it.
  void run_exact(const ExperimentSpec& run, unsigned threads);
  std::size_t checked() const { return rows_.size(); }

  /// What the checked records say, taken together (requires checked() > 0).
  struct Summary {
    std::size_t records = 0;
    double layer_error_min = 0, layer_error_max = 0;  ///< each record's layer time against exact's, as a share of it
    double gpu_error_min = 0, gpu_error_max = 0;      ///< every GPU's forward GEMM finish, the same way
    std::size_t same_last = 0;  ///< records whose GPU named last is exact's (or ends with it under exact)
    double worst_pick = 0;      ///< where not: how far before exact's last GPU the pick ends, under exact
    double layer_us_median = 0, exact_layer_us_median = 0;  ///< over the checked records
  };
  Summary summary() const;

  /// exact_check.csv's header: `prefix` (column names, each followed by a comma) before its own.
  static std::string csv_header(const std::string& prefix = "");
  /// One row per checked record, each after `prefix` (cells, each followed by a comma).
  void write_csv_rows(std::ostream& out, const std::string& prefix = "") const;
  /// exact_check.csv: the header, then one row per checked record.
  void write_csv(std::ostream& out) const;
  /// The summary's lines (indented as its sharing block), naming `sharing`, the run's mode.
  void print(std::ostream& out, const std::string& sharing) const;

 private:
  struct Kept {
    std::uint32_t step = 0, micro_batch = 0, layer_id = 0;
    double layer_us = 0;
    int last_gpu = 0;
    std::vector<Time_ps> finish_ps;  ///< every GPU's forward GEMM finish
  };
  struct Row {
    Kept run;
    double exact_layer_us = 0;
    int exact_last_gpu = 0;
    double exact_lead_us = 0;     ///< exact's last GPU on its next, under exact
    double gpu_error_min = 0;     ///< every GPU's finish against exact's, as a share of it
    double gpu_error_max = 0;
    double pick_before = 0;       ///< under exact, the run's last GPU ends this share before exact's
  };
  std::size_t wanted_;
  std::vector<Kept> kept_;
  std::vector<Row> rows_;
};

}  // namespace epsim

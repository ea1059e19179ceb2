// The table `epsim compare` writes: one row per (case, EP degree, balancer) summarising that replay's
// steady-state records (medians of the straggler and time metrics, the layer time's mean and p95 too,
// means of bytes and utilisation; warm-up records counted apart, n/a when every record is warm-up), and each
// balancer's excess reduction against the baseline balancer on the same case and EP degree. Column
// names are docs/metrics.md's with a `_median` or `_mean` suffix; docs/compare.md defines them all.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "sim/report/layer_metrics.hpp"

namespace epsim {

/// Which replay a row summarises.
struct ComparisonKey {
  std::string case_name;
  int ep_degree = 0;
  std::string balancer;       ///< the label (unique within a comparison)
  std::string balancer_name;  ///< the registry name, e.g. "fastermoe" for label "fastermoe-paper"
};

struct ComparisonRow {
  ComparisonKey key;
  std::size_t records = 0;         ///< steady-state records summarised
  std::size_t warmup_records = 0;  ///< records planned before the balancer's steady state, left out
  // Medians over records.
  double token_straggler_ratio_median = 0;
  double token_excess_median = 0;
  double token_idle_fraction_median = 0;
  double gemm_straggler_ratio_median = 0;
  double gemm_excess_median = 0;
  double layer_time_us_median = 0;
  double layer_time_us_mean = 0;
  double layer_time_us_p95 = 0;
  double bound_layer_time_us_median = 0;  ///< the oracle
  double gap_to_bound_us_median = 0;
  std::string crit_bound;                 ///< the resource bounding the critical path in most records
  double bound_nvlink_domain_median = 0;
  // Means over records.
  double ep_token_bytes_mean = 0;
  double ce_token_bytes_mean = 0;
  double weight_bytes_mean = 0;
  double gradient_bytes_mean = 0;
  double planner_us_mean = 0;
  double copy_engine_util_max_mean = 0;
  double nvlink_out_util_max_mean = 0;
  /// 1 - token_excess_median / (the baseline's token_excess_median); empty when the baseline's
  /// median excess is 0 (nothing to reduce) or before apply_reductions().
  std::optional<double> token_excess_reduction;
  std::optional<double> gemm_excess_reduction;  ///< the same for gemm_excess_median
  /// Why the balancer could not serve this case and EP degree (empty when it did): such a row has no
  /// records and no numbers; the table shows n/a and this reason.
  std::string not_served;
};

/// The row of a replay whose balancer could not serve the configuration.
ComparisonRow unserved_row(const ComparisonKey& key, const std::string& reason);

/// Collects the metrics of one replay, record by record, and summarises them.
class ComparisonAccumulator {
 public:
  /// Adds one record; a warm-up record is only counted.
  void add(const LayerMetrics& m);
  std::size_t records() const { return token_ratio_.size() + warmup_; }
  /// The row for `key`, reductions left empty. Requires at least one record; when every record is
  /// warm-up the row is n/a, saying so.
  ComparisonRow row(const ComparisonKey& key) const;

 private:
  std::vector<double> token_ratio_, token_excess_, token_idle_, gemm_ratio_, gemm_excess_, layer_time_, bound_,
      gap_, nvlink_floor_;
  std::vector<std::string> crit_bound_;
  std::size_t warmup_ = 0;
  double ep_bytes_ = 0, ce_bytes_ = 0, weight_bytes_ = 0, gradient_bytes_ = 0, planner_us_ = 0, ce_util_ = 0,
         nvlink_util_ = 0;
};

/// The median of `values` (the mean of the two middle values for an even count). Requires values.
double median_of(std::vector<double> values);

/// Fills every row's reductions against the row of `baseline` (a label) with the same case and EP
/// degree. A reduction stays empty when that baseline row is absent, not served or its median excess
/// is 0, and for rows not served.
void apply_reductions(std::vector<ComparisonRow>& rows, const std::string& baseline);

/// comparison.csv: a header line and one line per row, in the order given. Numbers are written with
/// 9 significant digits ("%.9g"), an empty reduction as an empty cell. The last column, not_served,
/// holds the reason of a row not served (quoted as CSV needs), whose other numbers are empty.
std::string comparison_csv(const std::vector<ComparisonRow>& rows);
const std::vector<std::string>& comparison_csv_columns();

/// The Markdown table (header, alignment line, one line per row), numbers rounded for reading:
/// ratios to 3 decimals, reductions in percent to 1 decimal ("n/a" when empty), times in us to 1
/// decimal, bytes in MB to 2 decimals, utilisations to 3 decimals. A row not served shows n/a in every
/// number and its reason in a last "not served" column, present only when some row needs it. Cells are
/// padded so that the table also reads as plain text.
std::string comparison_markdown(const std::vector<ComparisonRow>& rows);

}  // namespace epsim

#include "sim/report/exact_check.hpp"

#include <algorithm>
#include <cstdio>
#include <stdexcept>
#include <utility>

#include "sim/core/number_text.hpp"
#include "sim/core/quantile.hpp"
#include "sim/replay/replay.hpp"

namespace epsim {

void ExactCheck::add_run(const LayerMetrics& metrics, const LayerResult& result) {
  if (kept_.size() >= wanted_) return;
  kept_.push_back({metrics.step, metrics.micro_batch, metrics.layer_id, metrics.layer_time_us, metrics.last_gpu,
                   result.gemm_finish_fwd_ps});
}

void ExactCheck::add_exact(const LayerMetrics& metrics, const LayerResult& result) {
  if (rows_.size() >= kept_.size()) throw std::logic_error("ExactCheck: more exact records than the run kept");
  Row row;
  row.run = std::move(kept_[rows_.size()]);  // (kept until its exact record comes, then its row's)
  if (metrics.step != row.run.step || metrics.micro_batch != row.run.micro_batch || metrics.layer_id != row.run.layer_id)
    throw std::logic_error("ExactCheck: the exact record is not the run's record at its place");
  row.exact_layer_us = metrics.layer_time_us;
  row.exact_last_gpu = metrics.last_gpu;
  row.exact_lead_us = metrics.last_gpu_lead_us;
  const std::vector<Time_ps>& exact = result.gemm_finish_fwd_ps;
  const std::vector<Time_ps>& run = row.run.finish_ps;
  if (exact.size() != run.size()) throw std::logic_error("ExactCheck: the exact record has another GPU count");
  bool first = true;
  for (std::size_t g = 0; g < exact.size(); ++g) {
    if (exact[g] <= 0) continue;  // a GPU without forward GEMMs finishes nothing to compare
    const double e = static_cast<double>(run[g] - exact[g]) / static_cast<double>(exact[g]);
    row.gpu_error_min = first ? e : std::min(row.gpu_error_min, e);
    row.gpu_error_max = first ? e : std::max(row.gpu_error_max, e);
    first = false;
  }
  const double last = static_cast<double>(exact[static_cast<std::size_t>(row.exact_last_gpu)]);
  const double pick = static_cast<double>(exact[static_cast<std::size_t>(row.run.last_gpu)]);
  row.pick_before = last > 0 ? (last - pick) / last : 0;
  rows_.push_back(std::move(row));
}

void ExactCheck::run_exact(const ExperimentSpec& run, unsigned threads) {
  if (kept_.empty()) return;
  ExperimentSpec exact = run;
  exact.hardware.engine.bandwidth_sharing = BandwidthSharing::exact;
  exact.max_records = static_cast<int>(kept_.size());
  exact.timeline_records = 0;
  replay(exact, [&](const LayerOutcome& o) { add_exact(o.metrics, o.result); }, threads);
}

ExactCheck::Summary ExactCheck::summary() const {
  if (rows_.empty()) throw std::logic_error("ExactCheck: no record checked");
  Summary s;
  s.records = rows_.size();
  std::vector<double> run_us, exact_us;
  for (std::size_t i = 0; i < rows_.size(); ++i) {
    const Row& r = rows_[i];
    const double e = r.exact_layer_us > 0 ? r.run.layer_us / r.exact_layer_us - 1 : 0;
    s.layer_error_min = i == 0 ? e : std::min(s.layer_error_min, e);
    s.layer_error_max = i == 0 ? e : std::max(s.layer_error_max, e);
    s.gpu_error_min = i == 0 ? r.gpu_error_min : std::min(s.gpu_error_min, r.gpu_error_min);
    s.gpu_error_max = i == 0 ? r.gpu_error_max : std::max(s.gpu_error_max, r.gpu_error_max);
    // A pick that ends with exact's last GPU under exact (a tie) names a GPU that is last too.
    if (r.run.last_gpu == r.exact_last_gpu || r.pick_before <= 0) ++s.same_last;
    else s.worst_pick = std::max(s.worst_pick, r.pick_before);
    run_us.push_back(r.run.layer_us);
    exact_us.push_back(r.exact_layer_us);
  }
  s.layer_us_median = quantile_of(std::move(run_us), 0.5);
  s.exact_layer_us_median = quantile_of(std::move(exact_us), 0.5);
  return s;
}

std::string ExactCheck::csv_header(const std::string& prefix) {
  return prefix +
         "step,micro_batch,layer_id,layer_time_us,exact_layer_time_us,layer_error,gpu_error_min,gpu_error_max,"
         "last_gpu,exact_last_gpu,exact_last_gpu_lead_us,last_gpu_before_exact\n";
}

void ExactCheck::write_csv_rows(std::ostream& out, const std::string& prefix) const {
  for (const Row& r : rows_) {
    out << prefix << r.run.step << ',' << r.run.micro_batch << ',' << r.run.layer_id << ',' << g9(r.run.layer_us)
        << ',' << g9(r.exact_layer_us) << ',' << g9(r.exact_layer_us > 0 ? r.run.layer_us / r.exact_layer_us - 1 : 0)
        << ',' << g9(r.gpu_error_min) << ',' << g9(r.gpu_error_max) << ',' << r.run.last_gpu << ','
        << r.exact_last_gpu << ',' << g9(r.exact_lead_us) << ',' << g9(r.pick_before) << '\n';
  }
}

void ExactCheck::write_csv(std::ostream& out) const {
  out << csv_header();
  write_csv_rows(out);
}

void ExactCheck::print(std::ostream& out, const std::string& sharing) const {
  if (rows_.empty()) return;
  const Summary s = summary();
  const std::size_t n = s.records;
  out << "    checked against exact on this trace's first " << (n == 1 ? std::string("record") : std::to_string(n) + " records")
      << " (--check-exact, exact_check.csv):\n"
      << "      " << sharing << "'s layer time " << signed_percent(s.layer_error_min);
  if (n > 1) out << " to " << signed_percent(s.layer_error_max);
  out << ", every GPU's forward GEMM finish " << signed_percent(s.gpu_error_min) << " to " << signed_percent(s.gpu_error_max) << ",\n"
      << "      the GPU named last exact's in " << s.same_last << " of " << n;
  if (s.same_last < n) {
    char buf[80];
    std::snprintf(buf, sizeof buf, "; where not, its pick ends up to %.3f%% before exact's under exact", 100 * s.worst_pick);
    out << buf;
  }
  out << "\n";
}

}  // namespace epsim

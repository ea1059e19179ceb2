#include "sim/report/run_summary.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace epsim {

RunSummary::RunSummary(int num_gpus) : num_gpus_(num_gpus) {}

void RunSummary::add(const LayerMetrics& m) { metrics_.push_back(m); }

namespace {

struct Row {
  const char* label;
  std::function<double(const LayerMetrics&)> get;
  const char* format;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string line(const char* label, const char* format, double a, double b, double c, double d) {
  char cells[4][32];
  const double vals[4] = {a, b, c, d};
  for (int i = 0; i < 4; ++i) std::snprintf(cells[i], sizeof cells[i], format, vals[i]);
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-38s %12s %12s %12s %12s\n", label, cells[0], cells[1], cells[2], cells[3]);
  return buf;
}

}  // namespace

void RunSummary::print(std::ostream& out) const {
  if (metrics_.empty()) {
    out << "  no records replayed\n";
    return;
  }
  const std::vector<Row> rows = {
      {"token straggler ratio (max/mean L)", [](const LayerMetrics& m) { return m.token_straggler_ratio; }, "%.4f"},
      {"token excess (max-mean)/mean", [](const LayerMetrics& m) { return m.token_excess; }, "%.4f"},
      {"token idle fraction 1-mean/max", [](const LayerMetrics& m) { return m.token_idle_fraction; }, "%.4f"},
      {"GEMM straggler ratio (max/mean T)", [](const LayerMetrics& m) { return m.gemm_straggler_ratio; }, "%.4f"},
      {"GEMM time max (us)", [](const LayerMetrics& m) { return m.gemm_max_us; }, "%.1f"},
      {"GEMM time mean (us)", [](const LayerMetrics& m) { return m.gemm_mean_us; }, "%.1f"},
      {"forward time (us)", [](const LayerMetrics& m) { return m.forward_us; }, "%.1f"},
      {"backward time (us)", [](const LayerMetrics& m) { return m.backward_us; }, "%.1f"},
      {"layer time (us)", [](const LayerMetrics& m) { return m.layer_time_us; }, "%.1f"},
      {"balanced layer time (us)", [](const LayerMetrics& m) { return m.balanced_layer_time_us; }, "%.1f"},
      {"exposed overhead (us)", [](const LayerMetrics& m) { return m.exposed_overhead_us; }, "%.1f"},
      {"bound: NVLink-domain floor", [](const LayerMetrics& m) { return m.bound_nvlink_domain; }, "%.4f"},
      {"bound: largest unsplit expert", [](const LayerMetrics& m) { return m.bound_unsplit_expert; }, "%.4f"},
      {"EP backend token bytes (MB)", [](const LayerMetrics& m) { return m.ep_token_bytes / 1e6; }, "%.2f"},
      {"  of which cross nodes (MB)", [](const LayerMetrics& m) { return m.internode_token_bytes / 1e6; }, "%.2f"},
      {"Copy Engine token bytes (MB)", [](const LayerMetrics& m) { return m.ce_token_bytes / 1e6; }, "%.2f"},
      {"weight + gradient bytes (MB)", [](const LayerMetrics& m) { return (m.weight_bytes + m.gradient_bytes) / 1e6; }, "%.2f"},
      {"compute stream utilisation (mean GPU)", [](const LayerMetrics& m) { return m.compute_util_mean; }, "%.3f"},
      {"NVLink out utilisation (max GPU)", [](const LayerMetrics& m) { return m.nvlink_out_util_max; }, "%.3f"},
      {"IB NIC out utilisation (max GPU)", [](const LayerMetrics& m) { return m.nic_out_util_max; }, "%.3f"},
      {"Copy Engine utilisation (max GPU)", [](const LayerMetrics& m) { return m.copy_engine_util_max; }, "%.3f"},
  };
  char head[256];
  std::snprintf(head, sizeof head, "  %-38s %12s %12s %12s %12s\n", "metric", "median", "mean", "min", "max");
  out << head;
  for (const Row& row : rows) {
    std::vector<double> v;
    double sum = 0;
    for (const LayerMetrics& m : metrics_) {
      v.push_back(row.get(m));
      sum += v.back();
    }
    out << line(row.label, row.format, median(v), sum / static_cast<double>(v.size()),
                *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
  }

  // Who straggles: the GPU with the most tokens, and the GPU whose GEMMs end last, counted per record.
  std::vector<int> most_tokens(num_gpus_, 0), last(num_gpus_, 0);
  for (const LayerMetrics& m : metrics_) {
    ++most_tokens[m.token_straggler_gpu];
    ++last[m.last_gpu];
  }
  auto top = [&](const std::vector<int>& counts, const char* what) {
    const int g = static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin());
    char buf[200];
    std::snprintf(buf, sizeof buf, "  %s: gpu %d in %d of %zu records\n", what, g, counts[g], metrics_.size());
    out << buf;
  };
  out << "\n";
  top(most_tokens, "most tokens most often");
  top(last, "last to finish its forward GEMMs most often");
}

}  // namespace epsim

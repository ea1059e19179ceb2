#include "sim/report/run_summary.hpp"

#include "sim/core/quantile.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <map>
#include <string>

namespace epsim {

RunSummary::RunSummary(int num_gpus) : num_gpus_(num_gpus) {}

void RunSummary::add(const LayerMetrics& m) { metrics_.push_back(m); }

namespace {

struct Row {
  const char* label;
  std::function<double(const LayerMetrics&)> get;
  const char* format;
};

std::string line(const char* label, const char* format, const double (&vals)[5]) {
  char cells[5][32];
  for (int i = 0; i < 5; ++i) std::snprintf(cells[i], sizeof cells[i], format, vals[i]);
  char buf[256];
  std::snprintf(buf, sizeof buf, "  %-38s %11s %11s %11s %11s %11s\n", label, cells[0], cells[1], cells[2], cells[3],
                cells[4]);
  return buf;
}

const std::vector<Row>& rows() {
  static const std::vector<Row> all = {
      {"token straggler ratio (max/mean L)", [](const LayerMetrics& m) { return m.token_straggler_ratio; }, "%.4f"},
      {"token excess (max-mean)/mean", [](const LayerMetrics& m) { return m.token_excess; }, "%.4f"},
      {"token idle fraction 1-mean/max", [](const LayerMetrics& m) { return m.token_idle_fraction; }, "%.4f"},
      {"GEMM straggler ratio (max/mean T)", [](const LayerMetrics& m) { return m.gemm_straggler_ratio; }, "%.4f"},
      {"GEMM straggler (max-mean T, us)", [](const LayerMetrics& m) { return m.gemm_straggler_us; }, "%.1f"},
      {"GEMM time max (us)", [](const LayerMetrics& m) { return m.gemm_max_us; }, "%.1f"},
      {"GEMM time mean (us)", [](const LayerMetrics& m) { return m.gemm_mean_us; }, "%.1f"},
      {"last GPU's lead on the next GPU (us)", [](const LayerMetrics& m) { return m.last_gpu_lead_us; }, "%.1f"},
      {"forward time (us)", [](const LayerMetrics& m) { return m.forward_us; }, "%.1f"},
      {"backward time (us)", [](const LayerMetrics& m) { return m.backward_us; }, "%.1f"},
      {"layer time (us)", [](const LayerMetrics& m) { return m.layer_time_us; }, "%.1f"},
      {"oracle: bound on layer time (us)", [](const LayerMetrics& m) { return m.bound_layer_time_us; }, "%.1f"},
      {"gap to bound (us)", [](const LayerMetrics& m) { return m.gap_to_bound_us; }, "%.1f"},
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
      {"critical path: SM share", [](const LayerMetrics& m) { return m.crit_sm_share; }, "%.3f"},
      {"critical path: Copy Engine share", [](const LayerMetrics& m) { return m.crit_copy_engine_share; }, "%.3f"},
      {"critical path: NVLink share", [](const LayerMetrics& m) { return m.crit_nvlink_share; }, "%.3f"},
      {"critical path: NIC share", [](const LayerMetrics& m) { return m.crit_nic_share; }, "%.3f"},
      {"critical path: host share", [](const LayerMetrics& m) { return m.crit_host_share; }, "%.3f"},
      {"critical path: waiting share", [](const LayerMetrics& m) { return m.crit_wait_share; }, "%.3f"},
  };
  return all;
}

/// The table of `records` (all of one kind: steady state, or warm-up).
void print_table(std::ostream& out, const std::vector<const LayerMetrics*>& records) {
  char head[256];
  std::snprintf(head, sizeof head, "  %-38s %11s %11s %11s %11s %11s\n", "metric", "mean", "p50", "p95", "min", "max");
  out << head;
  for (const Row& row : rows()) {
    std::vector<double> v;
    double sum = 0;
    for (const LayerMetrics* m : records) {
      v.push_back(row.get(*m));
      sum += v.back();
    }
    const double vals[5] = {sum / static_cast<double>(v.size()), quantile_of(v, 0.5), quantile_of(v, 0.95),
                            *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end())};
    out << line(row.label, row.format, vals);
  }
  // The resource that bounds the critical path most often, and the bound's own binding term.
  std::map<std::string, int> bounds, terms;
  for (const LayerMetrics* m : records) {
    ++bounds[m->crit_bound];
    ++terms[m->bound_term];
  }
  const auto most = [](const std::map<std::string, int>& counts) {
    return *std::max_element(counts.begin(), counts.end(),
                             [](const auto& a, const auto& b) { return a.second < b.second; });
  };
  const auto [resource, times] = most(bounds);
  const auto [term, term_times] = most(terms);
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "  critical path bounded by: %s in %d of %zu records; the oracle's bound set by %s in %d\n",
                resource.c_str(), times, records.size(), term.c_str(), term_times);
  out << buf;
}

}  // namespace

void RunSummary::print(std::ostream& out) const {
  if (metrics_.empty()) {
    out << "  no records replayed\n";
    return;
  }
  std::vector<const LayerMetrics*> steady, warmup;
  for (const LayerMetrics& m : metrics_) (m.warmup ? warmup : steady).push_back(&m);
  if (steady.empty()) {
    out << "  steady state: n/a (all " << metrics_.size()
        << " records are the balancer's warm-up: its history needs more records than the trace has)\n";
  } else {
    if (!warmup.empty())
      out << "  steady state: " << steady.size() << " records (the " << warmup.size()
          << " warm-up records before them are summarised below)\n";
    print_table(out, steady);
  }
  if (!warmup.empty()) {
    out << "\n  warm-up: " << warmup.size() << " records planned before the balancer's history was full\n";
    print_table(out, warmup);
  }

  // Who straggles: the GPU with the most tokens, and the GPU whose GEMMs end last, counted per record.
  // A GPU named last on a tie (no lead on the next) is named for being the lowest-numbered of the
  // tied: the line says in how many of its records that was so.
  std::vector<int> most_tokens(num_gpus_, 0), last(num_gpus_, 0), last_tied(num_gpus_, 0);
  for (const LayerMetrics& m : metrics_) {
    ++most_tokens[m.token_straggler_gpu];
    ++last[m.last_gpu];
    if (num_gpus_ > 1 && m.last_gpu_lead_us <= 0) ++last_tied[m.last_gpu];
  }
  auto top = [&](const std::vector<int>& counts, const char* what, const std::vector<int>* tied) {
    const int g = static_cast<int>(std::max_element(counts.begin(), counts.end()) - counts.begin());
    char buf[300];
    std::snprintf(buf, sizeof buf, "  %s: gpu %d in %d of %zu records", what, g, counts[g], metrics_.size());
    out << buf;
    if (tied != nullptr && (*tied)[g] > 0) {
      std::snprintf(buf, sizeof buf, " (in %d of them tied with another GPU: the lowest-numbered is named)", (*tied)[g]);
      out << buf;
    }
    out << "\n";
  };
  out << "\n";
  top(most_tokens, "most tokens most often", nullptr);
  top(last, "last to finish its forward GEMMs most often", &last_tied);
}

}  // namespace epsim

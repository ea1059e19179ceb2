#include "sim/sweep/point_result.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>

#include <nlohmann/json.hpp>

#include "sim/core/input_error.hpp"
#include "sim/core/quantile.hpp"
#include "sim/replay/replay.hpp"
#include "sim/sweep/sweep_json_file.hpp"

namespace epsim {
namespace {

const char* const kFormat = "epsim-sweep-point";
constexpr int kVersion = 2;  // 2: the oracle's bound and the critical path; warm-up records left out

struct Metric {
  const char* name;
  std::function<double(const LayerMetrics&)> get;
};

const std::vector<Metric>& metrics() {
  static const std::vector<Metric> list = {
      {"token_straggler_ratio", [](const LayerMetrics& m) { return m.token_straggler_ratio; }},
      {"token_excess", [](const LayerMetrics& m) { return m.token_excess; }},
      {"token_idle_fraction", [](const LayerMetrics& m) { return m.token_idle_fraction; }},
      {"gemm_straggler_ratio", [](const LayerMetrics& m) { return m.gemm_straggler_ratio; }},
      {"gemm_excess", [](const LayerMetrics& m) { return m.gemm_excess; }},
      {"gemm_max_us", [](const LayerMetrics& m) { return m.gemm_max_us; }},
      {"forward_us", [](const LayerMetrics& m) { return m.forward_us; }},
      {"backward_us", [](const LayerMetrics& m) { return m.backward_us; }},
      {"layer_time_us", [](const LayerMetrics& m) { return m.layer_time_us; }},
      {"bound_layer_time_us", [](const LayerMetrics& m) { return m.bound_layer_time_us; }},
      {"gap_to_bound_us", [](const LayerMetrics& m) { return m.gap_to_bound_us; }},
      {"bound_nvlink_domain", [](const LayerMetrics& m) { return m.bound_nvlink_domain; }},
      {"bound_unsplit_expert", [](const LayerMetrics& m) { return m.bound_unsplit_expert; }},
      {"ep_token_bytes", [](const LayerMetrics& m) { return m.ep_token_bytes; }},
      {"ce_token_bytes", [](const LayerMetrics& m) { return m.ce_token_bytes; }},
      {"weight_bytes", [](const LayerMetrics& m) { return m.weight_bytes; }},
      {"gradient_bytes", [](const LayerMetrics& m) { return m.gradient_bytes; }},
      {"planner_us", [](const LayerMetrics& m) { return m.planner_us; }},
      {"compute_util_mean", [](const LayerMetrics& m) { return m.compute_util_mean; }},
      {"nvlink_out_util_max", [](const LayerMetrics& m) { return m.nvlink_out_util_max; }},
      {"nic_out_util_max", [](const LayerMetrics& m) { return m.nic_out_util_max; }},
      {"copy_engine_util_max", [](const LayerMetrics& m) { return m.copy_engine_util_max; }},
      // The critical path's shares, in PathResource order (results_tables names the largest).
      {"crit_sm_share", [](const LayerMetrics& m) { return m.crit_sm_share; }},
      {"crit_copy_engine_share", [](const LayerMetrics& m) { return m.crit_copy_engine_share; }},
      {"crit_nvlink_share", [](const LayerMetrics& m) { return m.crit_nvlink_share; }},
      {"crit_nic_share", [](const LayerMetrics& m) { return m.crit_nic_share; }},
      {"crit_host_share", [](const LayerMetrics& m) { return m.crit_host_share; }},
      {"crit_wait_share", [](const LayerMetrics& m) { return m.crit_wait_share; }},
  };
  return list;
}

/// Full precision, so that reading the file back gives the same double; null for a non-finite value.
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v == 0 ? 0.0 : v);
  return buf;
}

std::string json_text(const std::string& s) { return nlohmann::json(s).dump(); }


}  // namespace

const std::vector<std::string>& sweep_metric_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Metric& m : metrics()) out.push_back(m.name);
    return out;
  }();
  return names;
}

const std::array<const char*, 5>& metric_stat_names() {
  static const std::array<const char*, 5> names = {"mean", "p50", "p95", "min", "max"};
  return names;
}

MetricStats summarise(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  double sum = 0;
  for (const double v : values) sum += v;
  return {sum / static_cast<double>(n), quantile_sorted(values, 0.5), quantile_sorted(values, 0.95), values.front(),
          values.back()};
}

BalancerOutcome run_point_balancer(const SweepPoint& point, std::size_t b, const std::string& trace_path,
                                   unsigned threads) {
  ExperimentSpec x = point.experiments[b];
  x.trace_path = trace_path;
  BalancerOutcome out;
  out.label = point.labels[b];
  out.name = x.balancer.name;
  std::vector<std::vector<double>> values(metrics().size());
  std::size_t warmup = 0;
  try {
    // Statistics are over the balancer's steady state; its warm-up records are only counted.
    out.records = replay(
        x,
        [&](const LayerOutcome& o) {
          if (o.metrics.warmup) {
            ++warmup;
            return;
          }
          for (std::size_t i = 0; i < metrics().size(); ++i) values[i].push_back(metrics()[i].get(o.metrics));
        },
        threads);
  } catch (const BalancerCannotServe& e) {
    out.not_served = e.what();
    out.records = 0;
  }
  if (out.not_served.empty() && values.front().empty() && warmup > 0) {
    out.not_served = "n/a: all " + std::to_string(warmup) +
                     " records are the balancer's warm-up (the trace is too short for its history)";
    out.records = 0;
  }
  if (out.not_served.empty()) {
    if (values.front().empty()) throw InputError(trace_path, "", "the trace has no records to replay");
    // `records` counts what the statistics are over: the steady state.
    out.records = values.front().size();
    for (std::vector<double>& v : values) out.metrics.push_back(summarise(std::move(v)));
  }
  return out;
}

std::string point_json(const PointResult& r) {
  std::ostringstream out;
  out << "{\"format\": \"" << kFormat << "\", \"version\": " << kVersion << ", \"id\": " << json_text(r.id)
      << ", \"hash\": " << json_text(r.hash) << ",\n \"balancers\": [";
  for (std::size_t b = 0; b < r.balancers.size(); ++b) {
    const BalancerOutcome& o = r.balancers[b];
    out << (b ? ",\n  " : "\n  ") << "{\"label\": " << json_text(o.label) << ", \"name\": " << json_text(o.name)
        << ", \"records\": " << o.records << ", \"not_served\": " << json_text(o.not_served) << ", \"metrics\": {";
    for (std::size_t m = 0; m < o.metrics.size(); ++m) {
      out << (m ? ", " : "") << "\n    " << json_text(sweep_metric_names()[m]) << ": [";
      for (std::size_t s = 0; s < o.metrics[m].size(); ++s) out << (s ? ", " : "") << json_number(o.metrics[m][s]);
      out << "]";
    }
    out << "}}";
  }
  out << "]}\n";
  return out.str();
}

PointResult read_point_json(const std::string& path) {
  const SweepJsonFile file(path, "sweep point file", "remove it and run the sweep again to recompute that point");
  const nlohmann::json j = file.read(kFormat, kVersion);
  try {
    PointResult r;
    r.id = j.at("id").get<std::string>();
    r.hash = j.at("hash").get<std::string>();
    for (const nlohmann::json& b : j.at("balancers")) {
      BalancerOutcome o;
      o.label = b.at("label").get<std::string>();
      o.name = b.at("name").get<std::string>();
      o.records = b.at("records").get<std::size_t>();
      o.not_served = b.at("not_served").get<std::string>();
      const nlohmann::json& m = b.at("metrics");
      if (o.not_served.empty()) {
        for (const std::string& name : sweep_metric_names()) {
          const nlohmann::json& stats = m.at(name);
          if (!stats.is_array() || stats.size() != 5) file.bad("metric " + name);
          MetricStats s;
          for (std::size_t i = 0; i < 5; ++i) s[i] = stats[i].is_null() ? std::nan("") : stats[i].get<double>();
          o.metrics.push_back(s);
        }
      }
      r.balancers.push_back(std::move(o));
    }
    return r;
  } catch (const nlohmann::json::exception& e) {
    file.bad(e.what());
  }
}

}  // namespace epsim

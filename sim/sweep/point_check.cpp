#include "sim/sweep/point_check.hpp"

#include <cmath>
#include <sstream>
#include <utility>

#include <nlohmann/json.hpp>

#include "sim/core/input_error.hpp"
#include "sim/core/number_text.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/replay/replay.hpp"
#include "sim/sweep/sweep_json_file.hpp"

namespace epsim {
namespace {

const char* const kFormat = "epsim-sweep-check";
constexpr int kVersion = 1;

BandwidthSharing sharing_of(const ExperimentSpec& x) { return sharing_for(x.hardware.engine, x.ep_degree); }


/// A CSV cell: 9 significant digits, empty for a value that is not finite.
std::string cell(double v) { return std::isfinite(v) ? g9(v == 0 ? 0.0 : v) : ""; }

std::string csv_text(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

bool point_runs_fast(const SweepPoint& point) {
  return !point.experiments.empty() && sharing_of(point.experiments.front()) != BandwidthSharing::exact;
}

PointCheck check_point(const SweepPoint& point, const std::string& trace_path, std::size_t records,
                       unsigned threads) {
  if (!point_runs_fast(point)) throw std::logic_error("check_point: the point runs exact sharing");
  PointCheck result;
  result.id = point.id;
  result.hash = point.hash;
  result.wanted = records;
  result.sharing = to_string(sharing_of(point.experiments.front()));
  for (std::size_t b = 0; b < point.experiments.size(); ++b) {
    ExperimentSpec x = point.experiments[b];
    x.trace_path = trace_path;
    x.timeline_records = 0;
    // The first records of the replay, warm-up ones included: the check is of the sharing model.
    if (x.max_records == 0 || static_cast<std::size_t>(x.max_records) > records) x.max_records = static_cast<int>(records);
    BalancerCheck out;
    out.label = point.labels[b];
    ExactCheck check(records);
    try {
      replay(x, [&](const LayerOutcome& o) { check.add_run(o.metrics, o.result); }, threads);
      ExperimentSpec exact = x;
      exact.hardware.engine.bandwidth_sharing = BandwidthSharing::exact;
      replay(exact, [&](const LayerOutcome& o) { check.add_exact(o.metrics, o.result); }, threads);
    } catch (const BalancerCannotServe& e) {
      out.not_served = e.what();
    }
    if (out.not_served.empty()) {
      if (check.checked() == 0) throw InputError(trace_path, "", "the trace has no records to replay");
      out.summary = check.summary();
    }
    result.balancers.push_back(std::move(out));
  }
  return result;
}

std::string point_check_json(const PointCheck& c) {
  // nlohmann writes each double in the shortest form that reads back to the same double.
  nlohmann::json j = {{"format", kFormat}, {"version", kVersion}, {"id", c.id},
                      {"hash", c.hash},     {"records", c.wanted}, {"sharing", c.sharing}};
  nlohmann::json balancers = nlohmann::json::array();
  for (const BalancerCheck& b : c.balancers) {
    nlohmann::json e = {{"label", b.label}, {"not_served", b.not_served}};
    if (b.not_served.empty()) {
      const ExactCheck::Summary& s = b.summary;
      e["checked"] = s.records;
      e["layer_error"] = {s.layer_error_min, s.layer_error_max};
      e["gpu_error"] = {s.gpu_error_min, s.gpu_error_max};
      e["same_last"] = s.same_last;
      e["worst_pick"] = s.worst_pick;
      e["layer_us_median"] = s.layer_us_median;
      e["exact_layer_us_median"] = s.exact_layer_us_median;
    }
    balancers.push_back(std::move(e));
  }
  j["balancers"] = std::move(balancers);
  return j.dump() + "\n";
}

PointCheck read_point_check_json(const std::string& path) {
  const SweepJsonFile file(path, "sweep check file", "remove it and run the sweep with --check-exact again to recompute it");
  const nlohmann::json j = file.read(kFormat, kVersion);
  try {
    PointCheck c;
    c.id = j.at("id").get<std::string>();
    c.hash = j.at("hash").get<std::string>();
    c.wanted = j.at("records").get<std::size_t>();
    c.sharing = j.at("sharing").get<std::string>();
    for (const nlohmann::json& e : j.at("balancers")) {
      BalancerCheck b;
      b.label = e.at("label").get<std::string>();
      b.not_served = e.at("not_served").get<std::string>();
      if (b.not_served.empty()) {
        ExactCheck::Summary& s = b.summary;
        s.records = e.at("checked").get<std::size_t>();
        s.layer_error_min = e.at("layer_error").at(0).get<double>();
        s.layer_error_max = e.at("layer_error").at(1).get<double>();
        s.gpu_error_min = e.at("gpu_error").at(0).get<double>();
        s.gpu_error_max = e.at("gpu_error").at(1).get<double>();
        s.same_last = e.at("same_last").get<std::size_t>();
        s.worst_pick = e.at("worst_pick").get<double>();
        s.layer_us_median = e.at("layer_us_median").get<double>();
        s.exact_layer_us_median = e.at("exact_layer_us_median").get<double>();
      }
      c.balancers.push_back(std::move(b));
    }
    return c;
  } catch (const nlohmann::json::exception& e) {
    file.bad(e.what());
  }
}

std::string sweep_check_csv(const SweepLock& lock, const std::map<std::string, PointCheck>& checks) {
  std::ostringstream out;
  out << "point,point_id";
  for (const std::string& c : lock.columns) out << ',' << csv_text(c);
  out << ",sharing,balancer,records,layer_time_us_median,exact_layer_time_us_median,layer_error_min,"
         "layer_error_max,gpu_error_min,gpu_error_max,last_gpu_as_exact,last_gpu_before_exact_max,speedup,"
         "exact_speedup,not_served\n";
  for (std::size_t i = 0; i < lock.points.size(); ++i) {
    const SweepLock::Point& p = lock.points[i];
    const auto found = checks.find(p.id);
    if (found == checks.end()) continue;  // (a point that ran exact)
    const PointCheck& c = found->second;
    const BalancerCheck* base = nullptr;
    for (const BalancerCheck& b : c.balancers)
      if (b.label == lock.baseline && b.not_served.empty()) base = &b;
    for (const BalancerCheck& b : c.balancers) {
      out << i << ',' << p.id;
      for (const std::string& col : lock.columns) {
        std::string v;
        for (const auto& [k, value] : p.values)
          if (k == col) v = value;
        out << ',' << csv_text(v);
      }
      out << ',' << c.sharing << ',' << csv_text(b.label);
      if (!b.not_served.empty()) {
        out << std::string(12, ',') << ',' << csv_text(b.not_served) << '\n';
        continue;
      }
      const ExactCheck::Summary& s = b.summary;
      // The baseline's median layer time over the balancer's, on the same first records.
      const bool comparable = base != nullptr && base->summary.records == s.records;
      const double speedup = comparable ? base->summary.layer_us_median / s.layer_us_median : std::nan("");
      const double exact_speedup =
          comparable ? base->summary.exact_layer_us_median / s.exact_layer_us_median : std::nan("");
      out << ',' << s.records << ',' << cell(s.layer_us_median) << ',' << cell(s.exact_layer_us_median) << ','
          << cell(s.layer_error_min) << ',' << cell(s.layer_error_max) << ',' << cell(s.gpu_error_min) << ','
          << cell(s.gpu_error_max) << ',' << s.same_last << ',' << cell(s.worst_pick) << ',' << cell(speedup) << ','
          << cell(exact_speedup) << ",\n";
    }
  }
  return out.str();
}

}  // namespace epsim

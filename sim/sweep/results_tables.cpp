#include "sim/sweep/results_tables.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include <nlohmann/json.hpp>

namespace epsim {
namespace {

/// 9 significant digits, "-0" written as "0"; an empty cell for a value that is not finite.
std::string number(double v) {
  if (!std::isfinite(v)) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.9g", v == 0 ? 0.0 : v);
  return buf;
}

std::string fixed(const char* format, double v) {
  if (!std::isfinite(v)) return "n/a";
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v == 0 ? 0.0 : v);
  std::string s = buf;
  if (!s.empty() && s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string csv_text(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

std::string md_text(std::string text) {
  for (char& c : text)
    if (c == '|' || c == '\n' || c == '\r') c = c == '|' ? '/' : ' ';
  return text;
}

std::string value_of(const SweepLock::Point& p, const std::string& column) {
  for (const auto& [k, v] : p.values)
    if (k == column) return v;
  return "";
}

/// The resource holding the critical path longest, on average over the point's records: the largest of
/// the six crit_*_share means, which sit in PathResource order from `first`.
std::string critical_resource(const BalancerOutcome& o, std::size_t first) {
  static const char* const names[] = {"SM", "Copy Engine", "NVLink", "NIC", "host", "waiting"};
  std::size_t best = 0;
  for (std::size_t k = 1; k < 6; ++k)
    if (o.metrics[first + k][0] > o.metrics[first + best][0]) best = k;
  return fixed("%.0f", 100.0 * o.metrics[first + best][0]) + "% " + names[best];
}

const BalancerOutcome* find(const PointResult& r, const std::string& label) {
  for (const BalancerOutcome& o : r.balancers)
    if (o.label == label) return &o;
  return nullptr;
}

std::size_t metric_index(const std::string& name) {
  const auto& names = sweep_metric_names();
  return static_cast<std::size_t>(std::find(names.begin(), names.end(), name) - names.begin());
}

/// this / baseline of the means, or NaN when either is missing or the baseline's mean is 0.
double vs_baseline(const BalancerOutcome& o, const BalancerOutcome* base, std::size_t m) {
  if (!base || !o.not_served.empty() || !base->not_served.empty()) return std::nan("");
  const double b = base->metrics[m][0];
  return b != 0 && std::isfinite(b) ? o.metrics[m][0] / b : std::nan("");
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  const std::string fill(width > s.size() ? width - s.size() : 0, ' ');
  return right ? fill + s : s + fill;
}

std::string summary(const SweepLock& lock, const std::map<std::string, PointResult>& results) {
  std::string out = "# Sweep: " + lock.name + "\n\n";
  std::string labels;
  for (const auto& [label, name] : lock.balancers) labels += (labels.empty() ? "" : ", ") + label;
  out += std::to_string(lock.points.size()) + " points x " + std::to_string(lock.balancers.size()) +
         " balancers (" + labels + "); baseline " + lock.baseline + ". Means over each point's records, p95 the 95th "
         "percentile; `vs base` is the mean layer time over the baseline's at the same point. Every metric with its "
         "mean, p50, p95, min and max: results.csv. Columns: docs/sweep.md.\n\n";

  // Which balancer has the lowest mean layer time at how many points.
  const std::size_t layer = metric_index("layer_time_us");
  std::map<std::string, int> wins;
  for (const SweepLock::Point& p : lock.points) {
    const PointResult& r = results.at(p.id);
    const BalancerOutcome* best = nullptr;
    for (const BalancerOutcome& o : r.balancers)
      if (o.not_served.empty() && (!best || o.metrics[layer][0] < best->metrics[layer][0])) best = &o;
    if (best) ++wins[best->label];
  }
  for (const auto& [label, name] : lock.balancers)
    out += "- " + label + ": lowest mean layer time at " + std::to_string(wins[label]) + " of " +
           std::to_string(lock.points.size()) + " points\n";
  out += "\n";

  struct Col {
    std::string header;
    bool numeric;
  };
  std::vector<Col> cols = {{"point", true}};
  for (const std::string& c : lock.columns) cols.push_back({c, false});
  // The sharing each point ran with: `auto` (the default) runs exact up to 256 GPUs and coupled or
  // local past it, so a sweep over EP can change model between two points.
  cols.push_back({"sharing", false});
  for (const char* h : {"balancer", "token max/mean", "p95", "GEMM max/mean", "p95", "layer time us", "p95",
                        "gap to bound us", "critical path", "vs base"})
    cols.push_back({h, std::string(h) != "balancer"});
  cols.push_back({"not served", false});
  const std::size_t token = metric_index("token_straggler_ratio"), gemm = metric_index("gemm_straggler_ratio"),
                    gap = metric_index("gap_to_bound_us"), crit = metric_index("crit_sm_share");
  std::vector<std::vector<std::string>> rows;
  bool any_unserved = false;
  for (std::size_t i = 0; i < lock.points.size(); ++i) {
    const SweepLock::Point& p = lock.points[i];
    const PointResult& r = results.at(p.id);
    const BalancerOutcome* base = find(r, lock.baseline);
    for (const BalancerOutcome& o : r.balancers) {
      std::vector<std::string> row = {std::to_string(i)};
      for (const std::string& c : lock.columns) row.push_back(md_text(value_of(p, c)));
      row.push_back(p.sharing);
      row.push_back(o.label);
      if (o.not_served.empty()) {
        row.push_back(fixed("%.3f", o.metrics[token][0]));
        row.push_back(fixed("%.3f", o.metrics[token][2]));
        row.push_back(fixed("%.3f", o.metrics[gemm][0]));
        row.push_back(fixed("%.3f", o.metrics[gemm][2]));
        row.push_back(fixed("%.1f", o.metrics[layer][0]));
        row.push_back(fixed("%.1f", o.metrics[layer][2]));
        row.push_back(fixed("%.1f", o.metrics[gap][0]));
        row.push_back(critical_resource(o, crit));
        row.push_back(fixed("%.3f", vs_baseline(o, base, layer)));
        row.push_back("");
      } else {
        for (int k = 0; k < 9; ++k) row.push_back("n/a");
        row.push_back(md_text(o.not_served));
        any_unserved = true;
      }
      rows.push_back(std::move(row));
    }
  }
  if (!any_unserved) {
    cols.pop_back();
    for (auto& row : rows) row.pop_back();
  }
  std::vector<std::size_t> width(cols.size());
  for (std::size_t c = 0; c < cols.size(); ++c) {
    width[c] = cols[c].header.size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  std::string header = "|", rule = "|";
  for (std::size_t c = 0; c < cols.size(); ++c) {
    header += " " + pad(cols[c].header, width[c], cols[c].numeric) + " |";
    rule += " " + (cols[c].numeric ? std::string(width[c] - 1, '-') + ":" : std::string(width[c], '-')) + " |";
  }
  out += header + "\n" + rule + "\n";
  for (const auto& row : rows) {
    std::string line = "|";
    for (std::size_t c = 0; c < cols.size(); ++c) line += " " + pad(row[c], width[c], cols[c].numeric) + " |";
    out += line + "\n";
  }
  return out;
}

}  // namespace

SweepTables sweep_tables(const SweepLock& lock, const std::map<std::string, PointResult>& results) {
  SweepTables t;
  t.csv = "point,point_id";
  for (const std::string& c : lock.columns) t.csv += "," + csv_text(c);
  // `sharing` last, after the columns of earlier versions, which keep their places.
  t.csv += ",balancer,balancer_name,metric,records,mean,p50,p95,min,max,mean_vs_baseline,not_served,sharing\n";
  const auto& names = sweep_metric_names();
  for (std::size_t i = 0; i < lock.points.size(); ++i) {
    const SweepLock::Point& p = lock.points[i];
    const PointResult& r = results.at(p.id);
    const BalancerOutcome* base = find(r, lock.baseline);
    for (const BalancerOutcome& o : r.balancers) {
      for (std::size_t m = 0; m < names.size(); ++m) {
        std::string line = std::to_string(i) + "," + p.id;
        for (const std::string& c : lock.columns) line += "," + csv_text(value_of(p, c));
        line += "," + o.label + "," + o.name + "," + names[m] + "," + std::to_string(o.records);
        nlohmann::ordered_json j;
        j["point"] = i;
        j["point_id"] = p.id;
        nlohmann::ordered_json values = nlohmann::ordered_json::object();
        for (const std::string& c : lock.columns) values[c] = value_of(p, c);
        j["values"] = values;
        j["balancer"] = o.label;
        j["balancer_name"] = o.name;
        j["metric"] = names[m];
        j["records"] = o.records;
        const bool served = o.not_served.empty();
        for (std::size_t s = 0; s < metric_stat_names().size(); ++s) {
          const double v = served ? o.metrics[m][s] : std::nan("");
          line += "," + number(v);
          // The same 9 significant digits as the CSV, as a JSON number (null when there is none).
          const std::string text = number(v);
          j[metric_stat_names()[s]] = text.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(text);
        }
        const double ratio = vs_baseline(o, base, m);
        line += "," + number(ratio) + "," + csv_text(o.not_served) + "," + p.sharing + "\n";
        const std::string ratio_text = number(ratio);
        j["mean_vs_baseline"] = ratio_text.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json::parse(ratio_text);
        j["not_served"] = o.not_served;
        j["sharing"] = p.sharing;
        t.csv += line;
        t.jsonl += j.dump() + "\n";
      }
    }
  }
  t.summary_md = summary(lock, results);
  return t;
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
      for (const std::string& col : lock.columns) out << ',' << csv_text(value_of(p, col));
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
      out << ',' << s.records << ',' << number(s.layer_us_median) << ',' << number(s.exact_layer_us_median) << ','
          << number(s.layer_error_min) << ',' << number(s.layer_error_max) << ',' << number(s.gpu_error_min) << ','
          << number(s.gpu_error_max) << ',' << s.same_last << ',' << number(s.worst_pick) << ',' << number(speedup) << ','
          << number(exact_speedup) << ",\n";
    }
  }
  return out.str();
}

}  // namespace epsim

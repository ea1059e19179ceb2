#include "sim/report/comparison_table.hpp"

#include "sim/core/quantile.hpp"

#include <algorithm>
#include <map>
#include <numeric>
#include <cmath>
#include <cstdio>
#include <functional>
#include <stdexcept>

namespace epsim {

namespace {

/// printf-formats `v`, with "-0", "-0.0", ... written without the sign.
std::string format_number(const char* format, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v == 0 ? 0.0 : v);
  std::string s = buf;
  if (!s.empty() && s[0] == '-' && s.find_first_not_of("-0.") == std::string::npos) s.erase(0, 1);
  return s;
}

std::string csv_number(double v) { return std::isfinite(v) ? format_number("%.9g", v) : ""; }

std::string csv_optional(const std::optional<double>& v) { return v ? csv_number(*v) : ""; }

/// 1 - after/before, or empty when there was no excess to reduce.
std::optional<double> reduction(double after, double before) {
  if (!(before > 0)) return std::nullopt;
  return 1.0 - after / before;
}

/// A CSV field, quoted when it holds a separator, a quote or a line break.
std::string csv_text(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string out = "\"";
  for (const char c : text) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// Markdown cells may not hold '|' or line breaks.
std::string markdown_text(std::string text) {
  for (char& c : text)
    if (c == '|' || c == '\n' || c == '\r') c = c == '|' ? '/' : ' ';
  return text;
}

struct Column {
  const char* name;
  std::function<std::string(const ComparisonRow&)> csv;
};

/// The columns that describe the row rather than measure it: shown for rows not served too.
constexpr std::size_t kKeyColumns = 4;

const std::vector<Column>& columns() {
  static const std::vector<Column> cols = {
      {"case", [](const ComparisonRow& r) { return r.key.case_name; }},
      {"ep_degree", [](const ComparisonRow& r) { return std::to_string(r.key.ep_degree); }},
      {"balancer", [](const ComparisonRow& r) { return r.key.balancer; }},
      {"balancer_name", [](const ComparisonRow& r) { return r.key.balancer_name; }},
      {"records", [](const ComparisonRow& r) { return std::to_string(r.records); }},
      {"warmup_records", [](const ComparisonRow& r) { return std::to_string(r.warmup_records); }},
      {"token_straggler_ratio_median", [](const ComparisonRow& r) { return csv_number(r.token_straggler_ratio_median); }},
      {"token_excess_median", [](const ComparisonRow& r) { return csv_number(r.token_excess_median); }},
      {"token_excess_reduction", [](const ComparisonRow& r) { return csv_optional(r.token_excess_reduction); }},
      {"token_idle_fraction_median", [](const ComparisonRow& r) { return csv_number(r.token_idle_fraction_median); }},
      {"gemm_straggler_ratio_median", [](const ComparisonRow& r) { return csv_number(r.gemm_straggler_ratio_median); }},
      {"gemm_excess_median", [](const ComparisonRow& r) { return csv_number(r.gemm_excess_median); }},
      {"gemm_excess_reduction", [](const ComparisonRow& r) { return csv_optional(r.gemm_excess_reduction); }},
      {"layer_time_us_median", [](const ComparisonRow& r) { return csv_number(r.layer_time_us_median); }},
      {"layer_time_us_mean", [](const ComparisonRow& r) { return csv_number(r.layer_time_us_mean); }},
      {"layer_time_us_p95", [](const ComparisonRow& r) { return csv_number(r.layer_time_us_p95); }},
      {"bound_layer_time_us_median", [](const ComparisonRow& r) { return csv_number(r.bound_layer_time_us_median); }},
      {"gap_to_bound_us_median", [](const ComparisonRow& r) { return csv_number(r.gap_to_bound_us_median); }},
      {"crit_bound", [](const ComparisonRow& r) { return csv_text(r.crit_bound); }},
      {"bound_nvlink_domain_median", [](const ComparisonRow& r) { return csv_number(r.bound_nvlink_domain_median); }},
      {"ep_token_bytes_mean", [](const ComparisonRow& r) { return csv_number(r.ep_token_bytes_mean); }},
      {"ce_token_bytes_mean", [](const ComparisonRow& r) { return csv_number(r.ce_token_bytes_mean); }},
      {"weight_bytes_mean", [](const ComparisonRow& r) { return csv_number(r.weight_bytes_mean); }},
      {"gradient_bytes_mean", [](const ComparisonRow& r) { return csv_number(r.gradient_bytes_mean); }},
      {"planner_us_mean", [](const ComparisonRow& r) { return csv_number(r.planner_us_mean); }},
      {"copy_engine_util_max_mean", [](const ComparisonRow& r) { return csv_number(r.copy_engine_util_max_mean); }},
      {"nvlink_out_util_max_mean", [](const ComparisonRow& r) { return csv_number(r.nvlink_out_util_max_mean); }},
      {"not_served", [](const ComparisonRow& r) { return csv_text(r.not_served); }},
  };
  return cols;
}

std::string percent(const std::optional<double>& v) { return v ? format_number("%.1f", 100.0 * *v) + "%" : "n/a"; }

/// The Markdown table's columns: header, right-aligned (numbers) or not, and the cell text.
struct MarkdownColumn {
  const char* header;
  bool numeric;
  std::function<std::string(const ComparisonRow&)> cell;
};

const std::vector<MarkdownColumn>& markdown_columns() {
  static const std::vector<MarkdownColumn> cols = {
      {"case", false, [](const ComparisonRow& r) { return r.key.case_name; }},
      {"EP", true, [](const ComparisonRow& r) { return std::to_string(r.key.ep_degree); }},
      {"balancer", false, [](const ComparisonRow& r) { return r.key.balancer; }},
      {"token max/mean", true, [](const ComparisonRow& r) { return format_number("%.3f", r.token_straggler_ratio_median); }},
      {"token excess reduction", true, [](const ComparisonRow& r) { return percent(r.token_excess_reduction); }},
      {"GEMM max/mean", true, [](const ComparisonRow& r) { return format_number("%.3f", r.gemm_straggler_ratio_median); }},
      {"GEMM excess reduction", true, [](const ComparisonRow& r) { return percent(r.gemm_excess_reduction); }},
      {"NVLink floor", true, [](const ComparisonRow& r) { return format_number("%.3f", r.bound_nvlink_domain_median); }},
      {"layer time us", true, [](const ComparisonRow& r) { return format_number("%.1f", r.layer_time_us_median); }},
      {"layer p95 us", true, [](const ComparisonRow& r) { return format_number("%.1f", r.layer_time_us_p95); }},
      {"bound us", true, [](const ComparisonRow& r) { return format_number("%.1f", r.bound_layer_time_us_median); }},
      {"gap us", true, [](const ComparisonRow& r) { return format_number("%.1f", r.gap_to_bound_us_median); }},
      {"critical path", false, [](const ComparisonRow& r) { return r.crit_bound; }},
      {"EP token MB", true, [](const ComparisonRow& r) { return format_number("%.2f", r.ep_token_bytes_mean / 1e6); }},
      {"CE token MB", true, [](const ComparisonRow& r) { return format_number("%.2f", r.ce_token_bytes_mean / 1e6); }},
      {"weight+grad MB", true,
       [](const ComparisonRow& r) { return format_number("%.2f", (r.weight_bytes_mean + r.gradient_bytes_mean) / 1e6); }},
      {"CE util max", true, [](const ComparisonRow& r) { return format_number("%.3f", r.copy_engine_util_max_mean); }},
      {"NVLink util max", true, [](const ComparisonRow& r) { return format_number("%.3f", r.nvlink_out_util_max_mean); }},
  };
  return cols;
}

std::string pad(const std::string& s, std::size_t width, bool right) {
  const std::string fill(width > s.size() ? width - s.size() : 0, ' ');
  return right ? fill + s : s + fill;
}

}  // namespace

double median_of(std::vector<double> values) {
  if (values.empty()) throw std::invalid_argument("median_of: no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

void ComparisonAccumulator::add(const LayerMetrics& m) {
  if (m.warmup) {
    ++warmup_;
    return;
  }
  token_ratio_.push_back(m.token_straggler_ratio);
  token_excess_.push_back(m.token_excess);
  token_idle_.push_back(m.token_idle_fraction);
  gemm_ratio_.push_back(m.gemm_straggler_ratio);
  gemm_excess_.push_back(m.gemm_excess);
  layer_time_.push_back(m.layer_time_us);
  bound_.push_back(m.bound_layer_time_us);
  gap_.push_back(m.gap_to_bound_us);
  crit_bound_.push_back(m.crit_bound);
  nvlink_floor_.push_back(m.bound_nvlink_domain);
  ep_bytes_ += m.ep_token_bytes;
  ce_bytes_ += m.ce_token_bytes;
  weight_bytes_ += m.weight_bytes;
  gradient_bytes_ += m.gradient_bytes;
  planner_us_ += m.planner_us;
  ce_util_ += m.copy_engine_util_max;
  nvlink_util_ += m.nvlink_out_util_max;
}

ComparisonRow ComparisonAccumulator::row(const ComparisonKey& key) const {
  if (records() == 0) throw std::invalid_argument("ComparisonAccumulator::row: no records");
  if (token_ratio_.empty()) {
    ComparisonRow r = unserved_row(key, "n/a: all " + std::to_string(warmup_) +
                                            " records are the balancer's warm-up (the trace is too short for its "
                                            "history)");
    r.warmup_records = warmup_;
    return r;
  }
  const double n = static_cast<double>(token_ratio_.size());
  ComparisonRow r;
  r.key = key;
  r.records = token_ratio_.size();
  r.warmup_records = warmup_;
  r.token_straggler_ratio_median = median_of(token_ratio_);
  r.token_excess_median = median_of(token_excess_);
  r.token_idle_fraction_median = median_of(token_idle_);
  r.gemm_straggler_ratio_median = median_of(gemm_ratio_);
  r.gemm_excess_median = median_of(gemm_excess_);
  r.layer_time_us_median = median_of(layer_time_);
  r.layer_time_us_mean = std::accumulate(layer_time_.begin(), layer_time_.end(), 0.0) / n;
  r.layer_time_us_p95 = quantile_of(layer_time_, 0.95);
  r.bound_layer_time_us_median = median_of(bound_);
  r.gap_to_bound_us_median = median_of(gap_);
  // The most frequent bounding resource; ties go to the first in name order.
  std::map<std::string, int> seen;
  for (const std::string& b : crit_bound_) ++seen[b];
  r.crit_bound = std::max_element(seen.begin(), seen.end(), [](const auto& a, const auto& b) {
                   return a.second < b.second;
                 })->first;
  r.bound_nvlink_domain_median = median_of(nvlink_floor_);
  r.ep_token_bytes_mean = ep_bytes_ / n;
  r.ce_token_bytes_mean = ce_bytes_ / n;
  r.weight_bytes_mean = weight_bytes_ / n;
  r.gradient_bytes_mean = gradient_bytes_ / n;
  r.planner_us_mean = planner_us_ / n;
  r.copy_engine_util_max_mean = ce_util_ / n;
  r.nvlink_out_util_max_mean = nvlink_util_ / n;
  return r;
}

ComparisonRow unserved_row(const ComparisonKey& key, const std::string& reason) {
  ComparisonRow r;
  r.key = key;
  r.not_served = reason.empty() ? "not served" : reason;
  return r;
}

void apply_reductions(std::vector<ComparisonRow>& rows, const std::string& baseline) {
  for (ComparisonRow& r : rows) {
    r.token_excess_reduction.reset();
    r.gemm_excess_reduction.reset();
    if (!r.not_served.empty()) continue;
    for (const ComparisonRow& b : rows) {
      if (b.key.balancer != baseline || b.key.case_name != r.key.case_name || b.key.ep_degree != r.key.ep_degree)
        continue;
      if (!b.not_served.empty()) break;
      r.token_excess_reduction = reduction(r.token_excess_median, b.token_excess_median);
      r.gemm_excess_reduction = reduction(r.gemm_excess_median, b.gemm_excess_median);
      break;
    }
  }
}

const std::vector<std::string>& comparison_csv_columns() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Column& c : columns()) out.push_back(c.name);
    return out;
  }();
  return names;
}

std::string comparison_csv(const std::vector<ComparisonRow>& rows) {
  std::string out;
  for (const Column& c : columns()) out += (out.empty() ? "" : ",") + std::string(c.name);
  out += "\n";
  for (const ComparisonRow& r : rows) {
    std::string line;
    for (std::size_t i = 0; i < columns().size(); ++i) {
      const bool blank = !r.not_served.empty() && i >= kKeyColumns && i + 1 < columns().size();
      line += (i ? "," : "") + (blank ? std::string() : columns()[i].csv(r));
    }
    out += line + "\n";
  }
  return out;
}

std::string comparison_markdown(const std::vector<ComparisonRow>& rows) {
  std::vector<MarkdownColumn> cols = markdown_columns();
  const bool any_unserved =
      std::any_of(rows.begin(), rows.end(), [](const ComparisonRow& r) { return !r.not_served.empty(); });
  if (any_unserved)
    cols.push_back({"not served", false, [](const ComparisonRow& r) { return markdown_text(r.not_served); }});
  std::vector<std::vector<std::string>> cells(rows.size());
  std::vector<std::size_t> width(cols.size());
  for (std::size_t c = 0; c < cols.size(); ++c) width[c] = std::string(cols[c].header).size();
  for (std::size_t r = 0; r < rows.size(); ++r)
    for (std::size_t c = 0; c < cols.size(); ++c) {
      // A row not served has only its key (case, EP, balancer) and its reason.
      const bool na = !rows[r].not_served.empty() && c >= 3 && c < markdown_columns().size();
      cells[r].push_back(na ? std::string("n/a") : cols[c].cell(rows[r]));
      width[c] = std::max(width[c], cells[r][c].size());
    }
  std::string header = "|", rule = "|";
  for (std::size_t c = 0; c < cols.size(); ++c) {
    header += " " + pad(cols[c].header, width[c], cols[c].numeric) + " |";
    // The alignment line is as wide as the column; a numeric column ends in ':' (right-aligned).
    rule += " " + (cols[c].numeric ? std::string(width[c] - 1, '-') + ":" : std::string(width[c], '-')) + " |";
  }
  std::string out = header + "\n" + rule + "\n";
  for (const auto& row : cells) {
    std::string line = "|";
    for (std::size_t c = 0; c < cols.size(); ++c) line += " " + pad(row[c], width[c], cols[c].numeric) + " |";
    out += line + "\n";
  }
  return out;
}

}  // namespace epsim

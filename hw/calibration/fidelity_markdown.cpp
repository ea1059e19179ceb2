#include "hw/calibration/fidelity_markdown.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "hw/calibration/fidelity_ep_bench.hpp"
#include "hw/calibration/fidelity_summary.hpp"

namespace epsim {

namespace {

const FidelityKind kKinds[] = {FidelityKind::gemm, FidelityKind::dispatch, FidelityKind::combine, FidelityKind::copy,
                               FidelityKind::all_to_all};

std::string us_text(double us) {
  char buf[40];
  std::snprintf(buf, sizeof buf, us >= 100 ? "%.1f" : "%.2f", us);
  return buf;
}

std::string pct(double fraction, bool sign = true) {
  char buf[40];
  std::snprintf(buf, sizeof buf, sign ? "%+.1f%%" : "%.1f%%", 100 * fraction);
  return buf;
}

/// Text safe inside a table cell.
std::string cell(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '|') out += "\\|";
    else if (c == '\n') out += ' ';
    else out += c;
  }
  return out;
}

std::string source_cell(const std::string& source) {
  if (source.rfind("http://", 0) == 0 || source.rfind("https://", 0) == 0) return "[link](" + source + ")";
  if (source.empty()) return "";
  return "`" + cell(source) + "`";
}

std::string prediction_cells(const FidelityPrediction& p, double measured, bool with_error) {
  if (!p.ok) return "n/a: " + cell(p.note) + (with_error ? " | " : "");
  return us_text(p.us) + (with_error ? " | " + pct(relative_error(p, measured)) : "");
}

void kind_table(std::ostream& out, const std::vector<FidelityRow>& rows, FidelityKind kind) {
  out << "## " << kind_title(kind) << "\n\n"
      << "| setting | measured (us) | preset (us) | preset error | fitted (us) | fitted error | LOO (us) | LOO error | source |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---|\n";
  for (const FidelityRow& r : rows) {
    if (r.point.kind != kind) continue;
    const double m = r.point.measured_us;
    out << "| " << cell(r.point.setting) << " | " << us_text(m) << " | " << prediction_cells(r.preset, m, true) << " | "
        << prediction_cells(r.fitted, m, true) << " | " << prediction_cells(r.loo, m, true) << " | "
        << source_cell(r.point.source) << " |\n";
  }
  out << "\n";
}

std::string stats_cells(const ErrorStats& s) {
  if (s.predicted == 0) return "n/a | n/a";
  return pct(s.median, false) + " | " + pct(s.max, false);
}

/// What the rows beyond the target have in common: how many are API rows, which sources they come
/// from, the sign of the error, and the worst of them.
void explain_miss(std::ostream& out, const std::vector<FidelityRow>& rows, FidelityKind kind, const ErrorStats& s) {
  out << "- **" << kind_title(kind) << "**: leave-one-out median " << pct(s.median, false) << ", max "
      << pct(s.max, false);
  if (s.median > kTargetMedianError) out << "; the median misses by " << pct(s.median - kTargetMedianError, false);
  if (s.max > kTargetMaxError) out << "; the max misses by " << pct(s.max - kTargetMaxError, false);
  out << ".";
  int beyond = 0, api = 0, over = 0, not_predicted = 0;
  std::map<std::string, int> by_source, by_preset;
  const FidelityRow* worst = nullptr;
  for (const FidelityRow& r : rows) {
    if (r.point.kind != kind) continue;
    if (!r.loo.ok) {
      ++not_predicted;
      continue;
    }
    const double e = relative_error(r.loo, r.point.measured_us);
    if (!worst || std::fabs(e) > std::fabs(relative_error(worst->loo, worst->point.measured_us))) worst = &r;
    if (std::fabs(e) <= kTargetMaxError) continue;
    ++beyond;
    if (r.point.setting.find("API call") != std::string::npos) ++api;
    if (e > 0) ++over;
    ++by_source[r.point.source];
    ++by_preset[r.point.hardware];
  }
  if (beyond > 0) {
    out << " " << beyond << " of " << s.predicted << " rows are beyond " << pct(kTargetMaxError, false) << ": " << over
        << " predicted too slow, " << beyond - over << " too fast";
    if (api > 0) out << "; " << api << " of them are API rows (kernel plus a constant " << kApiHostCost_us << " us host cost)";
    out << "; by preset:";
    bool first_preset = true;
    for (const auto& [preset, n] : by_preset) {
      out << (first_preset ? " " : ", ") << preset << " (" << n << ")";
      first_preset = false;
    }
    out << "; by source:";
    bool first = true;
    for (const auto& [source, n] : by_source) {
      out << (first ? " " : ", ") << source_cell(source) << " (" << n << ")";
      first = false;
    }
    out << ".";
  }
  if (worst)
    out << " Worst: " << cell(worst->point.setting) << ", measured " << us_text(worst->point.measured_us)
        << " us, predicted " << us_text(worst->loo.us) << " us (" << pct(relative_error(worst->loo, worst->point.measured_us))
        << ").";
  if (not_predicted > 0) out << " " << not_predicted << " rows have no leave-one-out prediction (see their cells).";
  out << "\n";
}

void summary(std::ostream& out, const std::vector<FidelityRow>& rows) {
  out << "## Summary\n\n"
      << "Median and maximum |error| per kind. Targets (leave-one-out): median <= " << pct(kTargetMedianError, false)
      << ", max <= " << pct(kTargetMaxError, false) << ".\n\n"
      << "| kind | rows | preset median | preset max | fitted median | fitted max | LOO median | LOO max | LOO rows | target |\n"
      << "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|\n";
  std::vector<std::pair<FidelityKind, ErrorStats>> misses;
  for (FidelityKind kind : kKinds) {
    const ErrorStats pre = error_stats(rows, kind, FidelityColumn::preset);
    if (pre.rows == 0) continue;
    const ErrorStats fit = error_stats(rows, kind, FidelityColumn::fitted);
    const ErrorStats loo = error_stats(rows, kind, FidelityColumn::loo);
    const bool met = loo.meets_target();
    out << "| " << kind_title(kind) << " | " << pre.rows << " | " << stats_cells(pre) << " | " << stats_cells(fit)
        << " | " << stats_cells(loo) << " | " << loo.predicted << " | " << (met ? "met" : "missed") << " |\n";
    if (!met) misses.emplace_back(kind, loo);
  }
  out << "\n";
  if (!misses.empty()) {
    out << "Where a kind misses:\n\n";
    for (const auto& [kind, s] : misses) {
      if (s.predicted == 0)
        out << "- **" << kind_title(kind) << "**: no row has a leave-one-out prediction (see the cells).\n";
      else
        explain_miss(out, rows, kind, s);
    }
    out << "\nWhy: the terms the model lacks and the limits of the published points are explained in\n"
           "[calibration.md, \"Limits\"](calibration.md#limits-what-the-data-shows): GEMM shape (K and N at one M),\n"
           "per-token work in EP kernels (FP8 slower than BF16), too few points per fabric for leave-one-out,\n"
           "repeated measurements that differ by more than the target.\n";
    out << "\n";
  }
}

}  // namespace

void write_fidelity_markdown(std::ostream& out, const FidelityDocHeader& header, const std::vector<FidelityRow>& rows,
                             const std::string& deepseek_section) {
  out << "# Fidelity: epsim's predictions against measurements (published, and its own)\n\n"
      << "Generated by `" << header.command << "`; do not edit by hand (regenerate with `--force`).\n\n"
      << "Measurement files (" << header.files.size() << "):\n\n";
  for (const std::string& f : header.files) out << "- `" << f << "`\n";
  std::set<std::string> presets;
  for (const FidelityRow& r : rows) presets.insert(r.point.hardware);
  out << "\nPresets (`" << header.models_dir << "/NAME.yaml`):";
  for (const std::string& p : presets) out << " `" << p << "`";
  out << "\n\n"
      << "How to read it:\n\n"
      << "- **preset**: predicted on the preset file as shipped. **fitted**: on the preset calibrated with every\n"
      << "  point of its measurement files (`epsim calibrate`'s fit). **LOO** (leave-one-out): on the preset\n"
      << "  calibrated with every point but this one, so its error is a prediction's, not a fit's residual.\n"
      << "- error = (predicted - measured) / measured. A cell without a number says why.\n"
      << "- Dispatch and combine run the benchmark's own traffic through the engine (drawn as the benchmark\n"
      << "  draws it, seed 1): every rank starts at t = 0, tokens cross InfiniBand once per destination node and\n"
      << "  are forwarded over NVLink, each kernel holds its SMs and pays its fixed cost. The predicted time is\n"
      << "  the mean of the ranks' kernel times (DeepEP's tests print one figure per rank; the measured set keeps\n"
      << "  their mean). API rows add a host cost of " << kApiHostCost_us
      << " us per call (launch through Python layers,\n"
      << "  ../shared/reference/measurements/launch-and-latency-floors.md).\n"
      << "- A published rate is turned into a time with the bytes its benchmark counts (docs/calibration.md).\n"
      << "- EP points are fitted per group: one preset, one implementation, kernel or API timing (the\n"
      << "  ep_backend keys model one library). The EP fit (`epsim calibrate`, hw/calibration/ep_comm_fit.hpp)\n"
      << "  is a closed form that charges what the engine's replay charges (per-rank NVLink, forwarding, RDMA\n"
      << "  and SM loads, the mean over ranks, latency, the message size curve, the fixed and host costs once),\n"
      << "  so a fitted row errs only where the model cannot follow the points. A leave-one-out cell is n/a\n"
      << "  when fewer than 2 other points of its group cross the same link, or when the refit puts a parameter\n"
      << "  at a bound or 3x away from the whole group's fit (the other points do not determine it).\n\n";
  summary(out, rows);
  for (FidelityKind kind : kKinds) {
    bool any = false;
    for (const FidelityRow& r : rows) any = any || r.point.kind == kind;
    if (any) kind_table(out, rows, kind);
  }
  out << deepseek_section;
}

}  // namespace epsim

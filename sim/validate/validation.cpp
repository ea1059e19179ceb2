#include "sim/validate/validation.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <ostream>
#include <set>
#include <stdexcept>
#include <tuple>

#include "sim/core/input_error.hpp"
#include "sim/core/time.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "sim/validate/gemm_groups.hpp"

namespace epsim {

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string fmt(double v, const char* format = "%.9g") {
  if (std::isnan(v)) return "nan";
  char buf[48];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string us(Time_ps ps) { return fmt(ps_to_us(ps)); }

/// A CSV field, quoted when it holds a comma, a quote or a line break (names come from the hw side).
std::string csv(const std::string& s) {
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

/// A Markdown table cell: '|' escaped.
std::string cell(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

std::string percent(double fraction) {
  if (std::isnan(fraction)) return "n/a";
  return fmt(100 * fraction, "%+.2f") + "%";
}

std::string abs_percent(double fraction) {
  if (std::isnan(fraction)) return "n/a";
  return fmt(100 * fraction, "%.2f") + "%";
}

/// The layer's unmeasured tracks, separated by `sep` ("" when it is compared).
std::string tracks_text(const LayerComparison& l, const char* sep) {
  std::string out;
  for (Track t : l.unmeasured_tracks) out += (out.empty() ? "" : sep) + std::string(to_string(t));
  return out;
}

/// A layer's error cell: the error, or why it is not compared.
std::string layer_error_text(const LayerComparison& l) {
  return l.compared() ? percent(l.error()) : "n/a: no " + tracks_text(l, ", ") + " measured";
}

std::string record_text(const RecordId& r) {
  return "step " + std::to_string(r.step) + ", micro_batch " + std::to_string(r.micro_batch) + ", layer " +
         std::to_string(r.layer);
}

std::tuple<std::uint32_t, std::uint32_t, std::uint32_t> key(const RecordId& r) {
  return {r.step, r.micro_batch, r.layer};
}

/// Last end minus first start of the events on matched tracks; also the first start.
std::pair<Time_ps, Time_ps> span(const std::vector<TimelineEvent>& events) {
  Time_ps first = std::numeric_limits<Time_ps>::max(), last = std::numeric_limits<Time_ps>::min();
  for (const auto& e : events)
    if (is_matched_track(e.track)) {
      first = std::min(first, e.start_ps);
      last = std::max(last, e.end_ps);
    }
  if (first > last) return {0, 0};
  return {last - first, first};
}

double median(std::vector<double> v) {
  if (v.empty()) return kNaN;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

bool is_gemm(const TaskComparison& t) {
  return t.task.predicted.track == Track::compute &&
         (t.kind.rfind("gemm", 0) == 0 || t.kind.rfind("shared expert", 0) == 0);
}

}  // namespace

double relative_error(double predicted, double measured) {
  if (measured == 0) return kNaN;
  return (predicted - measured) / measured;
}

bool GoalCheck::met() const {
  const bool copies_ok = std::isnan(copy_median_abs_error) || copy_median_abs_error <= kTaskErrorGoal;
  return !std::isnan(gemm_median_abs_error) && gemm_median_abs_error <= kTaskErrorGoal && copies_ok &&
         !std::isnan(layer_worst_abs_error) && layer_worst_abs_error <= kLayerErrorGoal;
}

void add_record(ValidationReport& report, const RecordId& id, const std::vector<TimelineEvent>& predicted,
                const std::vector<TimelineEvent>& measured) {
  // Only the GPUs the measurement covers are compared (a single-GPU hw run measures one rank).
  std::set<int> measured_gpus;
  for (const auto& e : measured)
    if (is_matched_track(e.track)) measured_gpus.insert(e.gpu);
  std::vector<TimelineEvent> in_scope;
  LayerComparison layer;
  for (const auto& e : predicted) {
    if (measured_gpus.count(e.gpu))
      in_scope.push_back(e);
    else if (is_matched_track(e.track))
      ++layer.not_measured;
  }
  std::set<Track> predicted_tracks, measured_tracks;
  for (const auto& e : in_scope)
    if (is_matched_track(e.track)) predicted_tracks.insert(e.track);
  for (const auto& e : measured) measured_tracks.insert(e.track);
  for (Track t : predicted_tracks)
    if (!measured_tracks.count(t)) layer.unmeasured_tracks.push_back(t);
  TaskMatch match = match_tasks(in_scope, measured);
  layer.record = id;
  layer.measured_gpus = static_cast<int>(measured_gpus.size());
  layer.predicted_ps = span(in_scope).first;
  const auto [measured_span, measured_origin] = span(measured);
  layer.measured_ps = measured_span;
  layer.matched = static_cast<int>(match.matched.size());
  layer.predicted_only = static_cast<int>(match.predicted_only.size());
  layer.measured_only = static_cast<int>(match.measured_only.size());
  report.layers.push_back(layer);
  // Measured times are reported from the record's first measured event (the GPU clock's origin is
  // arbitrary); predicted times already start at 0.
  for (auto& m : match.matched) {
    m.measured.start_ps -= measured_origin;
    m.measured.end_ps -= measured_origin;
    report.tasks.push_back({id, m, task_kind(m.predicted.name)});
  }
  for (const auto& u : match.predicted_only) report.unmatched.push_back({id, true, u});
  for (auto u : match.measured_only) {
    u.event.start_ps -= measured_origin;
    u.event.end_ps -= measured_origin;
    report.unmatched.push_back({id, false, u});
  }
}

void finish_report(ValidationReport& report) {
  std::map<std::pair<int, std::string>, std::vector<const TaskComparison*>> by_kind;
  for (const auto& t : report.tasks) by_kind[{static_cast<int>(t.task.predicted.track), t.kind}].push_back(&t);
  report.kinds.clear();
  for (const auto& [k, list] : by_kind) {
    KindStats s;
    s.track = static_cast<Track>(k.first);
    s.kind = k.second;
    std::vector<double> abs_errors;
    for (const TaskComparison* t : list) {
      s.predicted_total_ps += t->predicted_ps();
      s.measured_total_ps += t->measured_ps();
      const double e = t->error();
      if (std::isnan(e)) {
        ++s.zero_measured;
        continue;
      }
      ++s.count;
      abs_errors.push_back(std::fabs(e));
      if (std::fabs(e) > std::fabs(s.worst_error)) s.worst_error = e;
    }
    s.median_abs_error = median(abs_errors);
    if (abs_errors.empty()) s.worst_error = kNaN;
    report.kinds.push_back(s);
  }
  std::vector<double> gemm, copy, layer;
  for (const auto& t : report.tasks) {
    const double e = t.error();
    if (std::isnan(e)) continue;
    if (is_gemm(t)) gemm.push_back(std::fabs(e));
    if (t.task.predicted.track == Track::copy_engine) copy.push_back(std::fabs(e));
  }
  for (const auto& l : report.layers)
    if (l.compared() && !std::isnan(l.error())) layer.push_back(std::fabs(l.error()));
  report.goals.gemm_median_abs_error = median(gemm);
  report.goals.copy_median_abs_error = median(copy);
  report.goals.layer_worst_abs_error = layer.empty() ? kNaN : *std::max_element(layer.begin(), layer.end());
}

std::vector<std::int64_t> local_tokens_of(const Plan& plan, int top_k) {
  std::vector<std::int64_t> assignments(plan.num_gpus, 0);
  for (const auto& r : plan.routes)
    if (r.src_rank >= 0 && r.src_rank < plan.num_gpus) assignments[r.src_rank] += r.tokens;
  for (auto& a : assignments) a /= std::max(1, top_k);
  return assignments;
}

ValidationReport validate_measurements(const std::vector<Plan>& plans, const MeasuredTimeline& measured,
                                       const HardwareSpec& hw, const ModelSpec& model, bool backward,
                                       const std::string& plans_path, const std::string& measured_path) {
  std::map<std::tuple<std::uint32_t, std::uint32_t, std::uint32_t>, const Plan*> by_id;
  for (const auto& p : plans) by_id[{p.step, p.micro_batch, p.layer}] = &p;
  const PlanLookup find_plan = [&](const RecordId& id) -> std::optional<Plan> {
    const auto it = by_id.find(key(id));
    if (it == by_id.end()) return std::nullopt;
    return *it->second;
  };
  return validate_measurements(find_plan, measured, hw, model, backward, plans_path, measured_path);
}

ValidationReport validate_measurements(const PlanLookup& find_plan, const MeasuredTimeline& measured,
                                       const HardwareSpec& hw, const ModelSpec& model, bool backward,
                                       const std::string& plans_path, const std::string& measured_path) {
  ValidationReport report;
  report.gpu_name = measured.gpu_name;
  for (std::size_t r = 0; r < measured.records.size(); ++r) {
    const MeasuredRecord& rec = measured.records[r];
    const RecordId id{rec.step, rec.micro_batch, rec.layer};
    const std::string place = "records[" + std::to_string(r) + "]";
    const std::optional<Plan> found = find_plan(id);
    if (!found) throw InputError(measured_path, place, "no plan for " + record_text(id) + " in " + plans_path);
    const Plan& plan = *found;
    const std::string plan_place = record_text(id);
    if (plan.num_gpus < 1 || plan.num_gpus > hw.nodes * hw.gpus_per_node)
      throw InputError(plans_path, plan_place,
                       "plan for " + std::to_string(plan.num_gpus) + " GPUs does not fit hardware '" + hw.name + "' (" +
                           std::to_string(hw.nodes * hw.gpus_per_node) + " GPUs)");
    try {
      validate_plan(plan, model.num_experts, hw.gpus_per_node);
    } catch (const std::logic_error& e) {
      throw InputError(plans_path, plan_place,
                       std::string("plan does not fit model '") + model.name + "': " + e.what());
    }
    for (std::size_t i = 0; i < rec.events.size(); ++i)
      if (rec.events[i].gpu >= plan.num_gpus)
        throw InputError(measured_path, place + ".events[" + std::to_string(i) + "].gpu",
                         "GPU " + std::to_string(rec.events[i].gpu) + " but the plan has " +
                             std::to_string(plan.num_gpus) + " GPUs");
    LayerResult result;
    try {
      result = simulate_layer(hw, model, plan, local_tokens_of(plan, model.top_k), backward);
    } catch (const TimeOverflow& e) {
      throw InputError(hw.source_file.empty() ? plans_path : hw.source_file, plan_place,
                       std::string(e.what()) + " (hardware " + hw.name +
                           "): the bandwidths, TFLOP/s or latencies are too small for the plan's bytes and tokens");
    }
    // Each GEMM named by its group on both sides, so that groups run in another order still pair.
    std::vector<TimelineEvent> measured = rec.events;
    name_gemm_groups(plan, result.forward_gemm_groups, result.timeline.events, measured);
    add_record(report, id, result.timeline.events, measured);
  }
  finish_report(report);
  return report;
}

void write_tasks_csv(std::ostream& out, const ValidationReport& report) {
  out << "step,micro_batch,layer,gpu,track,pass,name,kind,occurrence,predicted_start_us,predicted_us,"
         "measured_start_us,measured_us,error\n";
  for (const auto& t : report.tasks) {
    const TimelineEvent& p = t.task.predicted;
    out << t.record.step << "," << t.record.micro_batch << "," << t.record.layer << "," << p.gpu << ","
        << to_string(p.track) << "," << to_string(p.pass) << "," << csv(p.name) << "," << csv(t.kind) << ","
        << t.task.occurrence << "," << us(p.start_ps) << "," << us(t.predicted_ps()) << ","
        << us(t.task.measured.start_ps) << "," << us(t.measured_ps()) << "," << fmt(t.error()) << "\n";
  }
}

void write_layers_csv(std::ostream& out, const ValidationReport& report) {
  out << "step,micro_batch,layer,predicted_us,measured_us,error,matched,predicted_only,measured_only,measured_gpus,"
         "not_measured,unmeasured_tracks\n";
  for (const auto& l : report.layers)
    out << l.record.step << "," << l.record.micro_batch << "," << l.record.layer << "," << us(l.predicted_ps) << ","
        << us(l.measured_ps) << "," << fmt(l.error()) << "," << l.matched << "," << l.predicted_only << ","
        << l.measured_only << "," << l.measured_gpus << "," << l.not_measured << "," << tracks_text(l, " ") << "\n";
}

void write_unmatched_csv(std::ostream& out, const ValidationReport& report) {
  out << "side,step,micro_batch,layer,gpu,track,pass,name,occurrence,start_us,duration_us\n";
  for (const auto& u : report.unmatched) {
    const TimelineEvent& e = u.task.event;
    out << (u.predicted ? "predicted" : "measured") << "," << u.record.step << "," << u.record.micro_batch << ","
        << u.record.layer << "," << e.gpu << "," << to_string(e.track) << "," << to_string(e.pass) << "," << csv(e.name)
        << "," << u.task.occurrence << "," << us(e.start_ps) << "," << us(e.end_ps - e.start_ps) << "\n";
  }
}

void write_summary_md(std::ostream& out, const ValidationReport& report, const std::vector<std::string>& header,
                      std::size_t max_unmatched_listed) {
  const GoalCheck& g = report.goals;
  std::size_t predicted_only = 0;
  for (const auto& u : report.unmatched) predicted_only += u.predicted ? 1 : 0;
  out << "# epsim validate\n\n";
  for (const auto& line : header) out << "- " << line << "\n";
  out << "- measured GPU: " << report.gpu_name << "\n";
  out << "- records: " << report.layers.size() << "; matched tasks: " << report.tasks.size()
      << "; unmatched: " << predicted_only << " predicted only, " << report.unmatched.size() - predicted_only
      << " measured only\n";
  std::size_t not_measured = 0;
  for (const auto& l : report.layers) not_measured += l.not_measured;
  if (not_measured)
    out << "- not compared: " << not_measured
        << " predicted tasks on GPUs without any measured event (column `not measured` per layer)\n";
  out << "\n";
  out << "**Goals " << (g.met() ? "met" : "NOT met") << "**: median |error| of GEMMs "
      << abs_percent(g.gemm_median_abs_error) << " (goal <= 5%), of copies " << abs_percent(g.copy_median_abs_error)
      << (std::isnan(g.copy_median_abs_error) ? " (none measured)" : " (goal <= 5%)") << ", worst layer "
      << abs_percent(g.layer_worst_abs_error)
      << (std::isnan(g.layer_worst_abs_error) && !report.layers.empty()
              ? " (no record measured every track it predicts: see the layers' error column)"
              : " (goal <= 10%)")
      << ".\n\n";
  out << "Error = (predicted - measured) / measured.\n\n";
  out << "## Per task kind\n\n";
  out << "| track | kind | tasks | predicted total us | measured total us | median abs error | worst error |\n";
  out << "|---|---|---:|---:|---:|---:|---:|\n";
  for (const auto& k : report.kinds)
    out << "| " << to_string(k.track) << " | " << cell(k.kind) << " | " << k.count
        << (k.zero_measured ? " (+" + std::to_string(k.zero_measured) + " of 0 us)" : std::string()) << " | "
        << us(k.predicted_total_ps) << " | " << us(k.measured_total_ps) << " | " << abs_percent(k.median_abs_error)
        << " | " << percent(k.worst_error) << " |\n";
  out << "\n## Per layer\n\n";
  out << "| step | micro_batch | layer | predicted us | measured us | error | matched | predicted only | measured only "
         "| measured GPUs | not measured |\n";
  out << "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const auto& l : report.layers)
    out << "| " << l.record.step << " | " << l.record.micro_batch << " | " << l.record.layer << " | "
        << us(l.predicted_ps) << " | " << us(l.measured_ps) << " | " << layer_error_text(l) << " | " << l.matched
        << " | " << l.predicted_only << " | " << l.measured_only << " | " << l.measured_gpus << " | " << l.not_measured
        << " |\n";
  out << "\n## Unmatched tasks\n\n";
  if (report.unmatched.empty()) {
    out << "None: every task was found on both sides.\n";
    return;
  }
  out << "| side | step | micro_batch | layer | gpu | track | pass | name | occurrence | start us | duration us |\n";
  out << "|---|---:|---:|---:|---:|---|---|---|---:|---:|---:|\n";
  for (std::size_t i = 0; i < report.unmatched.size() && i < max_unmatched_listed; ++i) {
    const UnmatchedRow& u = report.unmatched[i];
    const TimelineEvent& e = u.task.event;
    out << "| " << (u.predicted ? "predicted" : "measured") << " | " << u.record.step << " | " << u.record.micro_batch
        << " | " << u.record.layer << " | " << e.gpu << " | " << to_string(e.track) << " | " << to_string(e.pass)
        << " | " << cell(e.name) << " | " << u.task.occurrence << " | " << us(e.start_ps) << " | "
        << us(e.end_ps - e.start_ps) << " |\n";
  }
  if (report.unmatched.size() > max_unmatched_listed)
    out << "\n" << report.unmatched.size() - max_unmatched_listed << " more in unmatched.csv.\n";
}

}  // namespace epsim

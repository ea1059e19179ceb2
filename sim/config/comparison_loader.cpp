// Reads a comparison file (kind: comparison) with the same strictness as the other loaders: one
// ConfigMap per mapping, list entries named `cases[i]` / `balancers[i]` in messages, every error
// "file:line:col: message". Cross checks (EP degrees against each case, the traces' headers, the
// balancers' parameters) happen here so that a long comparison never fails half way through.
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "sim/balancers/registry.hpp"
#include "sim/config/comparison_spec.hpp"
#include "sim/config/config_file.hpp"
#include "sim/config/config_map.hpp"
#include "sim/config/loaders.hpp"
#include "sim/core/input_error.hpp"
#include "traces/format/rank_remap.hpp"
#include "traces/format/trace_reader.hpp"

namespace epsim {
namespace {

namespace fs = std::filesystem;

constexpr std::int64_t kMaxInt = std::numeric_limits<int>::max();
const char* const kKind = "comparison";

std::string line_col(const YAML::Mark& mark) {
  if (mark.is_null()) return "1:1";
  return std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

/// "file:line" of a "file:line:col" place.
std::string file_line(const std::string& place) { return place.substr(0, place.rfind(':')); }

/// The line number of a "file:line:col" place.
std::string line_of(const std::string& place) {
  const std::string fl = file_line(place);
  return fl.substr(fl.rfind(':') + 1);
}

/// The value of `key`, which must be a non-empty sequence.
YAML::Node get_sequence(ConfigMap& top, const std::string& key, const std::string& what) {
  // An absent key goes through get_string so that the message is ConfigMap's own (naming a misspelt
  // key when there is one); a present one is read raw and checked here.
  if (!top.has(key)) top.get_string(key);
  const YAML::Node node = top.get_raw(key);
  if (!node.IsSequence() || node.size() == 0)
    top.fail(key, key + ": expected a non-empty sequence of " + what);
  return node;
}

/// Names that end up in CSV cells, Markdown tables and plot labels: no separators, no spaces.
void check_name(ConfigMap& m, const std::string& key, const std::string& value) {
  for (const char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-' || c == '+';
    if (!ok)
      m.fail(key, key + ": '" + value + "' may only contain letters, digits, '.', '_', '-' and '+' (it names a row "
                                        "of comparison.csv)");
  }
}

/// Paths are relative to the comparison file's folder, kept relative and normalised (as in experiments).
std::string resolve(const fs::path& folder, const std::string& written) {
  return (folder / written).lexically_normal().string();
}

bool is_file(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(path, ec);
}

bool exists(const std::string& path) {
  std::error_code ec;
  return fs::exists(path, ec);
}

void require_file(ConfigMap& m, const std::string& key, const std::string& resolved, const std::string& written) {
  if (!is_file(resolved))
    m.fail(key, key + " file '" + resolved + "' " +
                    (exists(resolved) ? "is not a regular file" : "does not exist") + " (" + key + ": " +
                    written + ", relative to the comparison file's folder)");
}

/// The EP degrees and the line each is written on (for messages about a case).
struct EpDegrees {
  std::vector<int> values;
  std::vector<int> lines;
};

EpDegrees read_ep_degrees(const YAML::Node& list, const std::string& file, const HardwareSpec& hw) {
  EpDegrees eps;
  for (std::size_t i = 0; i < list.size(); ++i) {
    // Each entry is read through a one-key mapping so that it gets ConfigMap's integer rules and
    // messages; the entry keeps its own position in the file.
    const std::string key = "ep_degrees[" + std::to_string(i) + "]";
    YAML::Node wrapper(YAML::NodeType::Map);
    wrapper[key] = list[i];
    ConfigMap entry(wrapper, file);
    const int ep = static_cast<int>(entry.get_int(key, 1, kMaxInt));
    const std::string at = line_col(list[i].Mark());
    for (std::size_t k = 0; k < eps.values.size(); ++k)
      if (eps.values[k] == ep)
        throw InputError(file, at, key + ": EP degree " + std::to_string(ep) + " is listed twice (first at line " +
                                       std::to_string(eps.lines[k]) + ")");
    if (ep > hw.total_gpus())
      throw InputError(file, at,
                       "impossible cluster: ep_degree " + std::to_string(ep) + " needs " + std::to_string(ep) +
                           " GPUs, hardware " + hw.name + " has " + std::to_string(hw.total_gpus()));
    eps.values.push_back(ep);
    eps.lines.push_back(static_cast<int>(list[i].Mark().line) + 1);
  }
  return eps;
}

/// Checks the trace's header against the case's model and every EP degree (what replay() would
/// reject at its first record), so that a comparison does not stop half way through.
void check_trace(ConfigMap& m, const ComparisonCase& c, const EpDegrees& eps) {
  const TraceReader reader(c.trace_path);
  const TraceHeader& h = reader.header();
  const std::string what = "case '" + c.name + "': ";
  if (static_cast<int>(h.num_experts) != c.model.num_experts)
    m.fail("trace", what + "trace '" + c.trace_path + "' routes to " + std::to_string(h.num_experts) +
                        " experts but model " + c.model.name + " has " + std::to_string(c.model.num_experts));
  if (static_cast<int>(h.top_k) != c.model.top_k)
    m.fail("trace", what + "trace '" + c.trace_path + "' has top-" + std::to_string(h.top_k) + " routing but model " +
                        c.model.name + " says top-" + std::to_string(c.model.top_k));
  for (std::size_t i = 0; i < eps.values.size(); ++i) {
    const std::string ep = std::to_string(eps.values[i]);
    if (!ranks_remappable(h.num_ranks, static_cast<std::uint32_t>(eps.values[i])))
      m.fail("trace", what + "trace '" + c.trace_path + "' has " + std::to_string(h.num_ranks) +
                          " source ranks; EP degree " + ep + " (ep_degrees, line " + std::to_string(eps.lines[i]) +
                          ") must be a multiple or a divisor of that (re-import with --ranks " + ep + ")");
  }
}

void read_cases(const YAML::Node& list, ConfigMap& top, const fs::path& folder, const EpDegrees& eps,
                ComparisonSpec& spec) {
  std::map<std::string, std::string> seen;  // name -> line
  for (std::size_t i = 0; i < list.size(); ++i) {
    ConfigMap m(list[i], top.file(), "cases[" + std::to_string(i) + "]");
    ComparisonCase c;
    c.place = m.where();
    c.name = m.get_string("name");
    check_name(m, "name", c.name);
    if (seen.count(c.name)) m.fail("name", "duplicate case name '" + c.name + "' (first at line " + seen[c.name] + ")");
    seen[c.name] = line_of(m.where("name"));
    const std::string trace = m.get_string("trace");
    const std::string model = m.get_string("model");
    c.optional = m.get_bool_or("optional", false);
    m.finish();

    const std::string model_path = resolve(folder, model);
    require_file(m, "model", model_path, model);
    c.model = load_model(model_path);
    for (std::size_t k = 0; k < eps.values.size(); ++k) {
      if (c.model.num_experts % eps.values[k] != 0)
        m.fail("", "case '" + c.name + "': EP degree " + std::to_string(eps.values[k]) + " (ep_degrees, line " +
                       std::to_string(eps.lines[k]) + ") does not divide the " + std::to_string(c.model.num_experts) +
                       " experts of model " + c.model.name);
    }

    c.trace_path = resolve(folder, trace);
    if (c.optional && !exists(c.trace_path)) {
      spec.skipped.push_back(SkippedCase{c.name, c.trace_path});
      continue;
    }
    if (!is_file(c.trace_path))
      m.fail("trace", "case '" + c.name + "': trace file '" + c.trace_path + "' " +
                          (exists(c.trace_path) ? "is not a regular file" : "does not exist") + " (trace: " + trace +
                          ", relative to the comparison file's folder; `optional: true` skips a case whose trace "
                          "is missing)");
    check_trace(m, c, eps);
    spec.cases.push_back(std::move(c));
  }
  if (spec.cases.empty())
    top.fail("cases", "no case left to compare: every case is optional and its trace is missing (first: " +
                          spec.skipped.front().trace_path + ")");
}

void read_balancers(const YAML::Node& list, const std::string& file, ComparisonSpec& spec) {
  std::vector<std::string> known;
  for (const BalancerInfo& info : balancer_registry()) known.push_back(info.name);
  std::map<std::string, std::string> seen;  // label -> line
  for (std::size_t i = 0; i < list.size(); ++i) {
    ConfigMap m(list[i], file, "balancers[" + std::to_string(i) + "]");
    ComparisonBalancer b;
    if (m.has("name") && m.get_string("name") == "oracle") m.fail("name", kOracleIsABound);
    b.choice.name = m.get_choice("name", known);  // an unknown name lists the registry's, with a typo hint
    const bool labelled = m.has("label");
    b.label = m.get_string_or("label", b.choice.name);
    const std::string label_key = labelled ? "label" : "name";
    check_name(m, label_key, b.label);
    const bool has_params = m.has("params");
    b.choice.params = m.get_raw("params");
    if (b.choice.params.IsDefined() && !b.choice.params.IsNull() && !b.choice.params.IsMap())
      m.fail("params", "balancers[" + std::to_string(i) + "].params: expected a mapping of the balancer's parameters");
    m.finish();

    if (seen.count(b.label))
      m.fail(label_key, "duplicate balancer label '" + b.label + "' (first at line " + seen[b.label] +
                            "); give one of them its own `label:`");
    seen[b.label] = line_of(m.where(label_key));
    b.choice.params_place = file_line(m.where(has_params ? "params" : "name"));
    make_balancer(b.choice, file);  // validates the parameters; the instance is not kept
    spec.balancers.push_back(std::move(b));
  }
}

}  // namespace

std::string SkippedCase::message() const {
  return "skipped case " + name + ": trace " + trace_path + " not found (optional: true)";
}

ExperimentSpec ComparisonSpec::experiment(const ComparisonCase& c, int ep_degree, const ComparisonBalancer& b) const {
  ExperimentSpec x;
  x.name = name + "/" + c.name + "/ep" + std::to_string(ep_degree) + "/" + b.label;
  x.source_file = source_file;
  x.trace_path = c.trace_path;
  x.model = c.model;
  x.hardware = hardware;
  x.balancer = b.choice;
  x.ep_degree = ep_degree;
  x.placement = placement;
  x.output_dir = output_dir;
  x.seed = seed;
  x.backward = backward;
  x.max_records = max_records;
  x.timeline_records = 0;
  return x;
}

ComparisonSpec load_comparison(const std::string& path) {
  ConfigMap top = open_config(path, kKind);

  ComparisonSpec spec;
  spec.source_file = path;
  spec.name = top.get_string("name");
  const std::string hardware = top.get_string("hardware");
  spec.placement = top.get_choice_or("placement", "contiguous", {"contiguous", "interleaved"}) == "interleaved"
                       ? Placement::interleaved
                       : Placement::contiguous;
  const bool baseline_given = top.has("baseline");
  spec.baseline = top.get_string_or("baseline", "static_ep");
  spec.output_dir = top.get_string("output");
  spec.seed = static_cast<std::uint64_t>(top.get_int_or("seed", 0, 0, std::numeric_limits<std::int64_t>::max()));
  spec.backward = top.get_bool_or("backward", true);
  spec.max_records = static_cast<int>(top.get_int_or("max_records", 0, 0, kMaxInt));
  const YAML::Node ep_list = get_sequence(top, "ep_degrees", "EP degrees, e.g. [8, 16]");
  const YAML::Node case_list = get_sequence(top, "cases", "cases, each {name, trace, model}");
  const YAML::Node balancer_list = get_sequence(top, "balancers", "balancers, each {name, label, params}");
  top.finish();

  const fs::path folder = fs::path(path).parent_path();
  const std::string hardware_path = resolve(folder, hardware);
  require_file(top, "hardware", hardware_path, hardware);
  spec.hardware = load_hardware(hardware_path);
  const EpDegrees eps = read_ep_degrees(ep_list, path, spec.hardware);
  spec.ep_degrees = eps.values;

  read_balancers(balancer_list, path, spec);
  std::string labels;
  bool baseline_listed = false;
  for (const ComparisonBalancer& b : spec.balancers) {
    baseline_listed = baseline_listed || b.label == spec.baseline;
    labels += (labels.empty() ? "" : ", ") + b.label;
  }
  if (!baseline_listed)
    top.fail(baseline_given ? "baseline" : "balancers",
             "baseline '" + spec.baseline + "'" + (baseline_given ? "" : " (the default)") +
                 " is not one of the balancer labels (" + labels + ")");

  read_cases(case_list, top, folder, eps, spec);
  return spec;
}

}  // namespace epsim

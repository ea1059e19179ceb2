// A sweep point is the base experiment with some keys changed. The experiment, hardware and model
// files are read as YAML trees, each point's values are set in copies of them, and the copies go
// through the ordinary loaders (load_experiment and the loaders it calls), so that a point obeys
// exactly the rules of a hand-written experiment and its errors read the same way.
#include "sim/sweep/sweep_loader.hpp"

#include <algorithm>
#include <filesystem>
#include <limits>
#include <map>
#include <set>

#include "sim/balancers/registry.hpp"
#include "sim/config/config_file.hpp"
#include "sim/config/config_map.hpp"
#include "sim/config/loaders.hpp"
#include "sim/config/preset_lookup.hpp"
#include "sim/core/input_error.hpp"
#include "sim/sweep/content_hash.hpp"
#include "sim/sweep/scratch_inputs.hpp"
#include "sim/sweep/sweep_key.hpp"
#include "sim/sweep/yaml_text.hpp"
#include "traces/format/rank_remap.hpp"
#include "traces/format/trace_reader.hpp"

namespace epsim {
namespace {

namespace fs = std::filesystem;

/// Changes of what a point computes: a new version invalidates the point files of older ones.
const char* const kPointFormat = "epsim-sweep-point-1";
const char* const kCommandLine = "command line";

std::string line_col(const YAML::Mark& mark) {
  if (mark.is_null()) return "1:1";
  return std::to_string(mark.line + 1) + ":" + std::to_string(mark.column + 1);
}

/// Names end up in file names, CSV cells and Markdown tables.
void check_name(ConfigMap& m, const std::string& key, const std::string& value) {
  for (const char c : value) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-' || c == '+';
    if (!ok) m.fail(key, key + ": '" + value + "' may only contain letters, digits, '.', '_', '-' and '+'");
  }
}

YAML::Node load_yaml(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::Exception& e) {
    throw InputError(path, e.mark.is_null() ? "" : line_col(e.mark), "YAML syntax error: " + e.msg);
  }
}

/// An assignment whose key has been resolved.
struct Change {
  SweepAssignment assignment;
  SweepKey key;
};

/// The loaded base experiment and what every point starts from.
struct Base {
  std::string sweep_file;
  fs::path sweep_folder;
  ExperimentSpec experiment;
  YAML::Node experiment_doc, hardware_doc, model_doc;
  YAML::Node trace_doc;  ///< the sweep's `trace:` block; null when the experiment's trace is replayed
  std::string trace_place;
  std::vector<SweepBalancer> balancers;
};

/// The hardware a `hardware:` value names: a preset (name or stem) or a file relative to the sweep.
std::string hardware_file(const Change& c, const Base& base) {
  const std::string v = c.assignment.value.IsScalar() ? c.assignment.value.Scalar() : "";
  if (v.empty()) throw InputError(c.assignment.place, "", "hardware: expected a preset name or a file");
  const bool is_path = v.find('/') != std::string::npos || fs::path(v).extension() == ".yaml" ||
                       fs::path(v).extension() == ".yml";
  if (!is_path) {
    try {
      return find_preset(v, models_dir()).path;
    } catch (const InputError& e) {
      throw InputError(c.assignment.place, "", std::string("hardware: ") + e.what());
    }
  }
  const std::string resolved = (base.sweep_folder / v).lexically_normal().string();
  std::error_code ec;
  if (!fs::is_regular_file(resolved, ec))
    throw InputError(c.assignment.place, "",
                     "hardware file '" + resolved + "' does not exist (relative to the sweep file's folder)");
  return resolved;
}

std::string model_file(const Change& c, const Base& base) {
  const std::string v = c.assignment.value.IsScalar() ? c.assignment.value.Scalar() : "";
  const std::string resolved = (base.sweep_folder / v).lexically_normal().string();
  std::error_code ec;
  if (v.empty() || !fs::is_regular_file(resolved, ec))
    throw InputError(c.assignment.place, "",
                     "model file '" + resolved + "' does not exist (relative to the sweep file's folder)");
  return resolved;
}

SyntheticOptions read_trace_options(const YAML::Node& doc, const std::string& file, const ExperimentSpec& x) {
  ConfigMap m(doc, file, "trace");
  SyntheticOptions o;
  const std::string dist = m.get_choice_or("distribution", "zipf", {"uniform", "zipf", "lognormal"});
  parse_popularity_dist(dist, o.dist);
  o.zipf_alpha = m.get_double_or("zipf_alpha", 1.2, 0, 100);
  o.lognormal_sigma = m.get_double_or("lognormal_sigma", 1.0, 0, 100);
  o.rank_skew = m.get_double_or("rank_skew", 0, 0, 100);
  o.drift = m.get_double_or("drift", 0, 0, 100);
  o.tokens_per_rank = static_cast<std::uint32_t>(m.get_int("tokens_per_rank", 1, 1 << 24));
  o.layers = static_cast<std::uint32_t>(m.get_int_or("layers", 1, 1, 4096));
  o.micro_batches = static_cast<std::uint32_t>(m.get_int_or("micro_batches", 1, 1, 1 << 20));
  o.steps = static_cast<std::uint32_t>(m.get_int_or("steps", 1, 1, 1 << 20));
  o.seed = static_cast<std::uint64_t>(
      m.get_int_or("seed", static_cast<std::int64_t>(x.seed), 0, std::numeric_limits<std::int64_t>::max()));
  o.ranks = static_cast<std::uint32_t>(m.get_int_or("ranks", x.ep_degree, 1, 65536));
  m.finish();
  o.experts = static_cast<std::uint32_t>(x.model.num_experts);
  o.top_k = static_cast<std::uint32_t>(x.model.top_k);
  if (x.model.routing.limited()) {
    o.groups = static_cast<std::uint32_t>(x.model.routing.groups);
    o.groups_per_token = static_cast<std::uint32_t>(x.model.routing.groups_per_token);
  }
  return o;
}

class PointBuilder {
 public:
  explicit PointBuilder(const Base& base) : base_(base) {}

  /// Resolves `point` (its changes plus the fixed ones) into its experiments, trace and hash.
  void build(SweepPoint& point, const std::vector<Change>& changes, const std::string& place) {
    try {
      build_checked(point, changes);
    } catch (const InputError& e) {
      throw InputError(base_.sweep_file, place,
                       "point " + std::to_string(point.index) + " (" + (point.assignments.empty() ? "the base" : point.describe()) +
                           "): " + scratch_.rewrite(e.what()));
    }
  }

 private:
  void build_checked(SweepPoint& point, const std::vector<Change>& changes) {
    YAML::Node experiment = YAML::Clone(base_.experiment_doc);
    YAML::Node hardware = YAML::Clone(base_.hardware_doc);
    YAML::Node model = YAML::Clone(base_.model_doc);
    YAML::Node trace = YAML::Clone(base_.trace_doc);
    std::string hardware_shown = base_.experiment.hardware.source_file;
    std::string model_shown = base_.experiment.model.source_file;
    std::map<std::string, YAML::Node> params;
    for (const SweepBalancer& b : base_.balancers) params[b.label] = YAML::Clone(b.choice.params);

    // Whole files first, so that a key changed in the same point changes the file it names.
    for (const Change& c : changes) {
      if (c.key.target == SweepTarget::hardware_file) {
        hardware_shown = hardware_file(c, base_);
        hardware = load_yaml(hardware_shown);
      } else if (c.key.target == SweepTarget::model_file) {
        model_shown = model_file(c, base_);
        model = load_yaml(model_shown);
      }
    }
    bool changed_hardware = false, changed_model = false;
    for (const Change& c : changes) {
      switch (c.key.target) {
        case SweepTarget::experiment: set_yaml_path(experiment, c.key.path, c.assignment.value); break;
        case SweepTarget::hardware: set_yaml_path(hardware, c.key.path, c.assignment.value); changed_hardware = true; break;
        case SweepTarget::model: set_yaml_path(model, c.key.path, c.assignment.value); changed_model = true; break;
        case SweepTarget::trace:
          if (!trace.IsDefined() || trace.IsNull())
            throw InputError(c.assignment.place, "",
                             c.assignment.key + ": the sweep replays the experiment's trace; trace keys need a "
                                                "`trace:` block of generation parameters");
          set_yaml_path(trace, c.key.path, c.assignment.value);
          break;
        case SweepTarget::balancer_params: set_yaml_path(params[c.key.label], c.key.path, c.assignment.value); break;
        default: break;
      }
    }

    const std::string hw_text = yaml_document(hardware), model_text = yaml_document(model);
    const std::string hw_path =
        scratch_.write("hardware.yaml", hw_text, "hardware " + hardware_shown + (changed_hardware ? " (with the point's changes)" : ""));
    const std::string model_path =
        scratch_.write("model.yaml", model_text, "model " + model_shown + (changed_model ? " (with the point's changes)" : ""));
    const bool generated = trace.IsDefined() && !trace.IsNull();
    // A generated trace does not exist yet; the loader only needs some regular file there.
    experiment["trace"] = fs::absolute(generated ? base_.sweep_file : base_.experiment.trace_path).string();
    experiment["hardware"] = hw_path;
    experiment["model"] = model_path;
    YAML::Node balancer(YAML::NodeType::Map);
    balancer["name"] = base_.balancers.front().choice.name;
    experiment["balancer"] = balancer;
    const std::string exp_path =
        scratch_.write("experiment.yaml", yaml_document(experiment), "experiment " + base_.experiment.source_file);
    ExperimentSpec x = load_experiment(exp_path);
    x.source_file = base_.sweep_file;
    x.hardware.source_file = hardware_shown;
    x.model.source_file = model_shown;
    x.timeline_records = 0;
    x.step.reset();

    ContentHash hash;
    hash.add(kPointFormat).add(hw_text).add(model_text);
    hash.add(std::to_string(x.ep_degree)).add(x.placement == Placement::interleaved ? "interleaved" : "contiguous");
    hash.add(std::to_string(x.seed)).add(x.backward ? "backward" : "forward").add(std::to_string(x.max_records));
    // auto names no mode in the hardware's text; what it resolves to has changed between versions
    // (coupled, once local, past exact_max_gpus), and a point computed under the old meaning must
    // not be taken for one under the new.
    if (x.hardware.engine.bandwidth_sharing == BandwidthSharing::automatic)
      hash.add(std::string("auto sharing: ") + to_string(sharing_for(x.hardware.engine, x.ep_degree)));
    if (generated) {
      SyntheticOptions o = read_trace_options(trace, base_.sweep_file, x);
      check_synthetic_options(o);
      if (!ranks_remappable(o.ranks, static_cast<std::uint32_t>(x.ep_degree)))
        throw InputError(base_.sweep_file, base_.trace_place,
                         "trace.ranks " + std::to_string(o.ranks) + " cannot be remapped to EP degree " +
                             std::to_string(x.ep_degree) + " (a multiple or a divisor is needed)");
      const std::string command = synthetic_command(o);
      point.trace_file = "synth-" + ContentHash().add(command).hex() + ".eptrace";
      point.trace = o;
      hash.add(command);
      x.trace_path.clear();  // set by the runner, under the sweep's output folder
    } else {
      x.trace_path = base_.experiment.trace_path;
      const TraceHeader& h = check_recorded_trace(x);
      hash.add(trace_hash(x.trace_path));
      if (static_cast<int>(h.num_experts) != x.model.num_experts || static_cast<int>(h.top_k) != x.model.top_k) {
        // Another expert count or top-k: the recording derived for the point (docs/trace-format.md).
        DeriveOptions d;
        d.experts = static_cast<std::uint32_t>(x.model.num_experts);
        d.top_k = static_cast<std::uint32_t>(x.model.top_k);
        derive_header(h, d, x.trace_path);  // refuses a ratio the rule cannot serve, naming the trace
        const std::string rule = "experts " + std::to_string(d.experts) + " top_k " + std::to_string(d.top_k);
        point.trace_file = "derived-" + ContentHash().add(trace_hash(x.trace_path)).add(rule).hex() + ".eptrace";
        point.derive = d;
        point.derive_source = x.trace_path;
        hash.add("derived " + rule);
        x.trace_path.clear();  // set by the runner, under the sweep's output folder
      }
    }
    for (const SweepBalancer& b : base_.balancers) {
      ExperimentSpec bx = x;
      bx.balancer = b.choice;
      bx.balancer.params = params[b.label];
      make_balancer(bx.balancer, base_.sweep_file);  // the parameters as this point sets them
      hash.add(b.label).add(b.choice.name).add(yaml_flow(bx.balancer.params));
      point.experiments.push_back(std::move(bx));
      point.labels.push_back(b.label);
    }
    point.hash = hash.hex();
  }

  /// The experiment's own trace must fit every point's EP degree (its expert count and top-k may
  /// differ: the trace is then derived for the point). Returns its header.
  const TraceHeader& check_recorded_trace(const ExperimentSpec& x) {
    auto it = headers_.find(x.trace_path);
    if (it == headers_.end()) it = headers_.emplace(x.trace_path, TraceReader(x.trace_path).header()).first;
    const TraceHeader& h = it->second;
    if (!ranks_remappable(h.num_ranks, static_cast<std::uint32_t>(x.ep_degree)))
      throw InputError(x.trace_path, "",
                       "the trace has " + std::to_string(h.num_ranks) + " source ranks; EP degree " +
                           std::to_string(x.ep_degree) + " must be a multiple or a divisor of that");
    return h;
  }

  const std::string& trace_hash(const std::string& path) {
    auto it = trace_hashes_.find(path);
    if (it == trace_hashes_.end()) it = trace_hashes_.emplace(path, file_hash(path)).first;
    return it->second;
  }

  const Base& base_;
  ScratchInputs scratch_;
  std::map<std::string, TraceHeader> headers_;
  std::map<std::string, std::string> trace_hashes_;
};

std::vector<SweepBalancer> read_balancers(ConfigMap& top, const ExperimentSpec& x, const std::string& file) {
  std::vector<SweepBalancer> out;
  if (!top.has("balancers")) {
    // The experiment's own balancer.
    out.push_back(SweepBalancer{x.balancer.name, x.balancer});
    return out;
  }
  const YAML::Node list = top.get_raw("balancers");
  if (!list.IsSequence() || list.size() == 0)
    top.fail("balancers", "balancers: expected a non-empty sequence of {name, label, params}");
  std::vector<std::string> known;
  for (const BalancerInfo& info : balancer_registry()) known.push_back(info.name);
  std::map<std::string, std::string> seen;
  for (std::size_t i = 0; i < list.size(); ++i) {
    ConfigMap m(list[i], file, "balancers[" + std::to_string(i) + "]");
    SweepBalancer b;
    if (m.has("name") && m.get_string("name") == "oracle") m.fail("name", kOracleIsABound);
    b.choice.name = m.get_choice("name", known);
    const std::string label_key = m.has("label") ? "label" : "name";
    b.label = m.get_string_or("label", b.choice.name);
    check_name(m, label_key, b.label);
    const bool has_params = m.has("params");
    b.choice.params = m.get_raw("params");
    if (b.choice.params.IsDefined() && !b.choice.params.IsNull() && !b.choice.params.IsMap())
      m.fail("params", "balancers[" + std::to_string(i) + "].params: expected a mapping of the balancer's parameters");
    m.finish();
    const std::string at = m.where(has_params ? "params" : "name");
    b.choice.params_place = at.substr(0, at.rfind(':'));
    if (seen.count(b.label))
      m.fail(label_key, "duplicate balancer label '" + b.label + "' (first at " + seen[b.label] +
                            "); give one of them its own `label:`");
    seen[b.label] = m.where(label_key);
    out.push_back(std::move(b));
  }
  return out;
}

/// `KEY=VALUE` of the command line; the value is YAML (`120`, `[1, 2]`, `"text"`).
SweepAssignment parse_cli_set(const std::string& text) {
  const std::size_t eq = text.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == text.size())
    throw InputError(kCommandLine, "--set " + text, "expected --set KEY=VALUE, e.g. --set gpu.sms=120");
  SweepAssignment a;
  a.key = text.substr(0, eq);
  a.place = kCommandLine;
  try {
    a.value = YAML::Load(text.substr(eq + 1));
  } catch (const YAML::Exception& e) {
    throw InputError(kCommandLine, "--set " + text, "the value is not YAML: " + e.msg);
  }
  if (!a.value.IsDefined() || a.value.IsNull())
    throw InputError(kCommandLine, "--set " + text, "expected a value after '='");
  return a;
}

std::string assignment_place(const std::string& file, const YAML::Node& value) {
  return file + ":" + line_col(value.Mark());
}

/// Resolves `a`; the error names the file and line of the key.
Change resolve(const SweepAssignment& a, const std::vector<std::string>& labels, const std::string& file,
               const std::string& key_place) {
  const bool cli = a.place == kCommandLine;
  return Change{a, resolve_sweep_key(a.key, labels, cli ? kCommandLine : file, cli ? "--set " + a.key : key_place)};
}

/// One character of a point id: letters, digits, '.', '+' and '-' as they are, anything else '_'.
std::string id_text(const std::string& s) {
  std::string out;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '+' || c == '-';
    out += ok ? c : '_';
  }
  return out;
}

std::string point_id(const std::vector<SweepAssignment>& assignments) {
  ContentHash h;
  std::string slug;
  for (const SweepAssignment& a : assignments) {
    h.add(a.key).add(a.text());
    std::string key = a.key.substr(a.key.rfind('.') + 1);
    slug += (slug.empty() ? "" : "_") + id_text(key) + "-" + id_text(a.text());
  }
  if (slug.empty()) slug = "base";
  if (slug.size() > 80) slug.resize(80);
  return slug + "-" + h.hex().substr(0, 8);
}

}  // namespace

std::string SweepAssignment::text() const { return yaml_flow(value); }

std::string SweepPoint::describe() const {
  std::string out;
  for (const SweepAssignment& a : assignments) out += (out.empty() ? "" : " ") + a.key + "=" + a.text();
  return out.empty() ? "base" : out;
}

SweepSpec load_sweep(const std::string& path, const std::vector<std::string>& cli_sets) {
  ConfigMap top = open_config(path, "sweep");
  SweepSpec spec;
  spec.source_file = path;
  spec.name = top.get_string("name");
  check_name(top, "name", spec.name);
  const std::string experiment = top.get_string("experiment");
  Base base;
  base.sweep_file = path;
  base.sweep_folder = fs::path(path).parent_path();
  spec.experiment_file = (base.sweep_folder / experiment).lexically_normal().string();
  {
    std::error_code ec;
    if (!fs::is_regular_file(spec.experiment_file, ec))
      top.fail("experiment", "experiment file '" + spec.experiment_file + "' does not exist (experiment: " + experiment +
                                 ", relative to the sweep file's folder)");
  }
  base.experiment = load_experiment(spec.experiment_file);
  base.balancers = read_balancers(top, base.experiment, path);
  std::vector<std::string> labels;
  for (const SweepBalancer& b : base.balancers) labels.push_back(b.label);
  spec.baseline = top.get_string_or("baseline", labels.front());
  if (std::find(labels.begin(), labels.end(), spec.baseline) == labels.end())
    top.fail("baseline", "baseline '" + spec.baseline + "' is not one of the balancer labels");
  if (top.has("trace")) {
    base.trace_place = top.where("trace");
    base.trace_doc = top.get_raw("trace");
    if (!base.trace_doc.IsMap()) top.fail("trace", "trace: expected a mapping of generation parameters");
  }
  const bool has_grid = top.has("grid"), has_points = top.has("points");
  if (has_grid && has_points) top.fail("points", "give either `grid:` or `points:`, not both");
  const std::string grid_place = has_grid ? top.where("grid") : top.where("points");
  const YAML::Node grid = top.get_raw("grid");
  const YAML::Node points = top.get_raw("points");
  const YAML::Node fixed = top.get_raw("set");
  spec.output_dir = top.get_string_or("output", "");
  top.finish();
  if (has_grid && (!grid.IsMap() || grid.size() == 0))
    top.fail("grid", "grid: expected a mapping of keys to non-empty lists of values");
  if (has_points && (!points.IsSequence() || points.size() == 0))
    top.fail("points", "points: expected a non-empty sequence of mappings (key: value)");
  if (fixed.IsDefined() && !fixed.IsNull() && !fixed.IsMap()) top.fail("set", "set: expected a mapping (key: value)");

  base.experiment_doc = load_yaml(spec.experiment_file);
  base.hardware_doc = load_yaml(base.experiment.hardware.source_file);
  base.model_doc = load_yaml(base.experiment.model.source_file);

  // The changes every point shares: `set:` of the file, then --set.
  std::vector<Change> shared;
  std::map<std::string, std::string> shared_keys;  // canonical -> where
  auto add_shared = [&](const Change& c, const std::string& where) {
    if (shared_keys.count(c.key.canonical))
      throw InputError(where, "", c.assignment.key + " is set twice (also at " + shared_keys[c.key.canonical] + ")");
    shared_keys[c.key.canonical] = where;
    shared.push_back(c);
  };
  if (fixed.IsMap())
    for (const auto& kv : fixed) {
      SweepAssignment a{kv.first.Scalar(), kv.second, assignment_place(path, kv.second)};
      add_shared(resolve(a, labels, path, line_col(kv.first.Mark())), path + ":" + line_col(kv.first.Mark()));
    }
  for (const std::string& s : cli_sets) {
    const SweepAssignment a = parse_cli_set(s);
    const Change c = resolve(a, labels, path, "");
    // The command line overrides the file's `set:`; twice on the command line is a mistake.
    auto same = std::find_if(shared.begin(), shared.end(),
                             [&](const Change& x) { return x.key.canonical == c.key.canonical; });
    if (same != shared.end() && same->assignment.place != kCommandLine) {
      *same = c;
      shared_keys[c.key.canonical] = "--set " + a.key;
    } else {
      add_shared(c, "--set " + a.key);
    }
  }
  for (const Change& c : shared) spec.fixed.push_back(c.assignment);

  // The points' own changes, in sweep order.
  struct Raw {
    std::vector<Change> changes;
    std::string place;
  };
  std::vector<Raw> raw;
  if (has_grid) {
    std::vector<std::pair<Change, YAML::Node>> axes;
    for (const auto& kv : grid) {
      const std::string key = kv.first.Scalar();
      const std::string at = line_col(kv.first.Mark());
      if (!kv.second.IsSequence() || kv.second.size() == 0)
        throw InputError(path, at, "grid." + key + ": expected a non-empty list of values");
      SweepAssignment probe{key, kv.second[0], assignment_place(path, kv.second[0])};
      axes.emplace_back(resolve(probe, labels, path, at), kv.second);
      std::set<std::string> values;
      for (const YAML::Node& v : kv.second)
        if (!values.insert(yaml_flow(v)).second)
          throw InputError(path, line_col(v.Mark()), "grid." + key + ": value " + yaml_flow(v) + " is listed twice");
    }
    std::size_t count = 1;
    for (const auto& axis : axes) {
      count *= axis.second.size();
      if (count > 1000000) throw InputError(path, line_col(grid.Mark()), "grid: more than 1000000 points");
    }
    for (std::size_t p = 0; p < count; ++p) {
      Raw r;
      r.place = grid_place.substr(path.size() + 1);
      std::size_t rest = p;
      std::vector<std::size_t> pick(axes.size());
      for (std::size_t a = axes.size(); a-- > 0;) {  // the first axis varies slowest
        pick[a] = rest % axes[a].second.size();
        rest /= axes[a].second.size();
      }
      for (std::size_t a = 0; a < axes.size(); ++a) {
        Change c = axes[a].first;
        // reset(), not '=': assigning to a node bound to the probe's value would overwrite that value.
        c.assignment.value.reset(axes[a].second[pick[a]]);
        c.assignment.place = assignment_place(path, c.assignment.value);
        r.changes.push_back(c);
      }
      raw.push_back(std::move(r));
    }
  } else if (has_points) {
    for (std::size_t i = 0; i < points.size(); ++i) {
      const YAML::Node entry = points[i];
      const std::string at = line_col(entry.Mark());
      if (!entry.IsMap() || entry.size() == 0)
        throw InputError(path, at, "points[" + std::to_string(i) + "]: expected a non-empty mapping (key: value)");
      Raw r;
      r.place = at;
      for (const auto& kv : entry) {
        SweepAssignment a{kv.first.Scalar(), kv.second, assignment_place(path, kv.second)};
        r.changes.push_back(resolve(a, labels, path, line_col(kv.first.Mark())));
      }
      raw.push_back(std::move(r));
    }
  } else {
    raw.push_back(Raw{{}, "1:1"});
  }

  PointBuilder builder(base);
  std::map<std::string, std::size_t> ids;
  std::set<std::string> columns;
  for (std::size_t i = 0; i < raw.size(); ++i) {
    SweepPoint point;
    point.index = i;
    std::map<std::string, std::string> own;  // canonical -> key as written
    for (const Change& c : raw[i].changes) {
      if (shared_keys.count(c.key.canonical))
        throw InputError(path, raw[i].place,
                         c.assignment.key + " is varied by the " + (has_grid ? "grid" : "points") +
                             " and also set for every point (" + shared_keys[c.key.canonical] + ")");
      if (own.count(c.key.canonical))
        throw InputError(path, raw[i].place,
                         c.assignment.key + " and " + own[c.key.canonical] + " change the same key in one point");
      own[c.key.canonical] = c.assignment.key;
      point.assignments.push_back(c.assignment);
      if (columns.insert(c.assignment.key).second) spec.columns.push_back(c.assignment.key);
    }
    point.id = point_id(point.assignments);
    if (ids.count(point.id))
      throw InputError(path, raw[i].place,
                       "point " + std::to_string(i) + " has the same values as point " + std::to_string(ids[point.id]));
    ids[point.id] = i;
    std::vector<Change> changes = shared;
    changes.insert(changes.end(), raw[i].changes.begin(), raw[i].changes.end());
    builder.build(point, changes, raw[i].place);
    spec.points.push_back(std::move(point));
  }

  spec.balancers = base.balancers;
  ContentHash hash;
  hash.add("epsim-sweep-1").add(spec.name).add(spec.baseline);
  for (const SweepBalancer& b : spec.balancers) hash.add(b.label);
  for (const std::string& c : spec.columns) hash.add(c);
  for (const SweepPoint& p : spec.points) hash.add(p.id).add(p.hash);
  spec.hash = hash.hex();
  return spec;
}

}  // namespace epsim

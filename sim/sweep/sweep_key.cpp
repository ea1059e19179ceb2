#include "sim/sweep/sweep_key.hpp"

#include <algorithm>
#include <cctype>
#include <map>

#include "sim/core/input_error.hpp"

namespace epsim {
namespace {

// Top-level keys of each kind of file that a sweep may change (docs/config.md). Names, kinds, paths
// and outputs are not among them: a point changes what is simulated, not where the files are. The
// hardware file's `engine` is: a wide-EP sweep wants local or auto sharing, and an axis over the sharing
// puts local beside exact at every point.
const std::vector<std::string> kHardwareKeys = {"nodes",      "gpus_per_node", "gpu",  "gemm",
                                                "copy_engine", "nvlink",       "infiniband", "pcie",
                                                "ep_backend", "engine"};
const std::vector<std::string> kModelKeys = {"hidden_size",   "expert_ffn_size",       "num_experts", "top_k",
                                             "shared_experts", "shared_expert_ffn_size", "gated_ffn",   "dtype_bytes",
                                             "moe_layers",    "precision",             "routing",     "non_moe"};
const std::vector<std::string> kExperimentKeys = {"ep_degree", "placement", "seed", "backward", "max_records"};
const std::vector<std::string> kTraceKeys = {"distribution", "zipf_alpha", "lognormal_sigma", "rank_skew", "drift",
                                             "tokens_per_rank", "layers",  "micro_batches",   "steps",     "seed",
                                             "ranks"};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = s.find('.', start);
    parts.push_back(s.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return parts;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<std::size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

bool contains(const std::vector<std::string>& list, const std::string& s) {
  return std::find(list.begin(), list.end(), s) != list.end();
}

/// " (did you mean 'x'?)" for the closest of `known` within two edits (case-insensitive), else "".
std::string hint(const std::string& word, const std::vector<std::string>& known) {
  std::string best;
  std::size_t best_d = 3;
  for (const std::string& k : known) {
    const std::size_t d = edit_distance(lower(word), lower(k));
    if (d < best_d) best_d = d, best = k;
  }
  return best.empty() ? "" : " (did you mean '" + best + "'?)";
}

[[noreturn]] void unknown(const std::string& written, const std::string& word, const std::vector<std::string>& known,
                          const std::string& file, const std::string& place, const std::string& what) {
  throw InputError(file, place,
                   "cannot vary '" + written + "': " + what + hint(word, known) +
                       "; keys: ep_degree, experts, top_k, tokens_per_rank, hardware, model, a key of the hardware, "
                       "model or experiment file (gpu.sms, num_experts, seed, ...), trace.KEY or "
                       "balancers.LABEL.params.KEY (docs/sweep.md)");
}

}  // namespace

SweepKey resolve_sweep_key(const std::string& written, const std::vector<std::string>& labels,
                           const std::string& file, const std::string& place) {
  std::vector<std::string> parts = split(written);
  for (const std::string& p : parts)
    if (p.empty()) throw InputError(file, place, "cannot vary '" + written + "': empty part in the key path");
  SweepKey key;
  const std::string& head = parts[0];
  auto rest = [&]() { return std::vector<std::string>(parts.begin() + 1, parts.end()); };
  auto finish = [&](SweepTarget target, std::vector<std::string> path, const std::string& prefix) {
    key.target = target;
    key.path = std::move(path);
    key.canonical = prefix;
    for (const std::string& p : key.path) key.canonical += (key.canonical.empty() ? "" : ".") + p;
    return key;
  };

  if (parts.size() == 1) {
    if (head == "hardware") return finish(SweepTarget::hardware_file, {}, "hardware");
    if (head == "model") return finish(SweepTarget::model_file, {}, "model");
    if (head == "experts") return finish(SweepTarget::model, {"num_experts"}, "model");
    if (head == "tokens_per_rank") return finish(SweepTarget::trace, {"tokens_per_rank"}, "trace");
  }
  if (parts.size() >= 2) {
    if (head == "hardware") {
      if (!contains(kHardwareKeys, parts[1]))
        unknown(written, parts[1], kHardwareKeys, file, place, "'" + parts[1] + "' is not a hardware key one may vary");
      return finish(SweepTarget::hardware, rest(), "hardware");
    }
    if (head == "model") {
      if (!contains(kModelKeys, parts[1]))
        unknown(written, parts[1], kModelKeys, file, place, "'" + parts[1] + "' is not a model key one may vary");
      return finish(SweepTarget::model, rest(), "model");
    }
    if (head == "experiment") {
      if (parts.size() != 2 || !contains(kExperimentKeys, parts[1]))
        unknown(written, parts[1], kExperimentKeys, file, place,
                "'" + parts[1] + "' is not an experiment key one may vary");
      return finish(SweepTarget::experiment, rest(), "experiment");
    }
    if (head == "trace") {
      if (parts.size() != 2 || !contains(kTraceKeys, parts[1]))
        unknown(written, parts[1], kTraceKeys, file, place, "'" + parts[1] + "' is not a trace generation key");
      return finish(SweepTarget::trace, rest(), "trace");
    }
    if (head == "balancers") {
      if (parts.size() < 4 || parts[2] != "params")
        throw InputError(file, place,
                         "cannot vary '" + written + "': a balancer parameter is written balancers.LABEL.params.KEY");
      if (!contains(labels, parts[1])) {
        std::string list;
        for (const std::string& l : labels) list += (list.empty() ? "" : ", ") + l;
        throw InputError(file, place,
                         "cannot vary '" + written + "': no balancer labelled '" + parts[1] + "'" + hint(parts[1], labels) +
                             " (labels: " + list + ")");
      }
      key.label = parts[1];
      key.target = SweepTarget::balancer_params;
      key.path.assign(parts.begin() + 3, parts.end());
      key.canonical = written;
      return key;
    }
  }
  if (contains(kHardwareKeys, head)) return finish(SweepTarget::hardware, parts, "hardware");
  if (contains(kModelKeys, head)) return finish(SweepTarget::model, parts, "model");
  if (parts.size() == 1 && contains(kExperimentKeys, head)) return finish(SweepTarget::experiment, parts, "experiment");
  std::vector<std::string> known = kHardwareKeys;
  known.insert(known.end(), kModelKeys.begin(), kModelKeys.end());
  known.insert(known.end(), kExperimentKeys.begin(), kExperimentKeys.end());
  for (const char* s : {"hardware", "model", "experiment", "trace", "balancers", "experts", "tokens_per_rank"})
    known.push_back(s);
  unknown(written, head, known, file, place, "unknown key '" + head + "'");
}

void set_yaml_path(YAML::Node& doc, const std::vector<std::string>& path, const YAML::Node& value) {
  if (path.empty()) return;
  if (!doc.IsMap()) doc = YAML::Node(YAML::NodeType::Map);
  if (path.size() == 1) {
    doc[path[0]] = YAML::Clone(value);
    return;
  }
  YAML::Node child = doc[path[0]];
  YAML::Node copy = child.IsMap() ? child : YAML::Node(YAML::NodeType::Map);
  set_yaml_path(copy, std::vector<std::string>(path.begin() + 1, path.end()), value);
  doc[path[0]] = copy;
}

}  // namespace epsim

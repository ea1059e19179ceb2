// A side-by-side comparison of balancers, as loaded from a comparison YAML file (kind: comparison):
// every case (trace + model) at every EP degree under every balancer, on one cluster. Each
// (case, EP degree, balancer) is replayed as an ExperimentSpec built by experiment(). Keys, defaults
// and rules: docs/compare.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/hardware/experiment_spec.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"

namespace epsim {

/// One workload: a trace and the model it routes for.
struct ComparisonCase {
  std::string name;        ///< unique among the cases; letters, digits, '.', '_', '-', '+'
  std::string trace_path;  ///< resolved (relative to the comparison file's folder, normalised)
  ModelSpec model;
  bool optional = false;   ///< a missing trace skips the case instead of failing
  std::string place;       ///< "file:line:col" of the case entry, for messages
};

/// A case that was left out because it is optional and its trace does not exist.
struct SkippedCase {
  std::string name;
  std::string trace_path;  ///< resolved
  /// One line for the user: "skipped case NAME: trace PATH not found (optional: true)".
  std::string message() const;
};

/// One balancer column of the comparison.
struct ComparisonBalancer {
  std::string label;      ///< unique among the balancers; defaults to choice.name
  BalancerChoice choice;  ///< registry name and raw parameters (validated by the loader)
};

struct ComparisonSpec {
  std::string name;
  std::string source_file;
  HardwareSpec hardware;
  std::vector<ComparisonCase> cases;    ///< in file order, without the skipped ones (never empty)
  std::vector<SkippedCase> skipped;     ///< optional cases whose trace is missing, in file order
  std::vector<int> ep_degrees;          ///< in file order, distinct
  Placement placement = Placement::contiguous;
  std::vector<ComparisonBalancer> balancers;  ///< in file order, labels distinct
  std::string baseline = "static_ep";   ///< label of the balancer the reductions are measured against
  std::string output_dir;               ///< as written (relative to the working directory)
  std::uint64_t seed = 0;
  bool backward = true;
  int max_records = 0;                  ///< per (case, EP, balancer) replay; 0 = all records

  /// The experiment that replays `c` at `ep_degree` under `b` (no timeline, no output folder).
  ExperimentSpec experiment(const ComparisonCase& c, int ep_degree, const ComparisonBalancer& b) const;
};

/// Loads and validates a comparison file: strict keys and types as everywhere in epsim, every
/// balancer built once through the registry, every (case, EP degree) checked as an experiment would be
/// (the EP degree divides the case model's experts and fits in the cluster, the trace's header fits
/// the model and can be remapped to the EP degree). Throws InputError "file:line:col: message".
/// Optional cases whose trace is missing are listed in `skipped`, not reported as errors.
ComparisonSpec load_comparison(const std::string& path);

}  // namespace epsim

// A what-if sweep, as loaded from a sweep file (kind: sweep; docs/sweep.md): a base experiment, the
// balancers every point runs, and the points, each a list of assignments to configuration keys (the
// EP degree, the hardware, the model, model and hardware keys, the generated trace's parameters,
// balancer parameters). Every point is resolved into one ExperimentSpec per balancer when the file is
// loaded, so that a long sweep never fails half way through.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "sim/hardware/experiment_spec.hpp"
#include "traces/format/trace_derive.hpp"
#include "traces/synth/synthetic_trace.hpp"

namespace epsim {

/// One `key = value` of a point, as the user wrote it.
struct SweepAssignment {
  std::string key;    ///< as written: `ep_degree`, `gpu.sms`, `hardware`, `balancers.feplb.params.x`
  YAML::Node value;   ///< the YAML value as written (its text goes into ids and tables)
  std::string place;  ///< "file:line:col" of the value, or "command line"
  std::string text() const;  ///< the value in one line of flow YAML (`120`, `[1, 2]`, `h100-sxm-8`)
};

/// One balancer every point runs.
struct SweepBalancer {
  std::string label;  ///< unique; defaults to the registry name
  BalancerChoice choice;
};

struct SweepPoint {
  std::size_t index = 0;                    ///< position in the sweep (grid order or list order)
  std::vector<SweepAssignment> assignments; ///< the point's own values (grid axes or list entry)
  std::string id;                           ///< stable file name stem, from the assignments
  std::string hash;                         ///< 16 hex digits over everything the point's results depend on
  std::vector<ExperimentSpec> experiments;  ///< one per balancer, in the sweep's balancer order
  std::vector<std::string> labels;          ///< the balancers' labels, in the same order
  std::optional<SyntheticOptions> trace;    ///< set when the point replays a generated trace
  /// Set when the point replays the experiment's trace derived for its expert count or top-k
  /// (trace_derive.hpp), from `derive_source`.
  std::optional<DeriveOptions> derive;
  std::string derive_source;
  std::string trace_file;                   ///< generated or derived trace's file name under OUTDIR/traces/
  /// `ep_degree=8 gpu.sms=120` (for messages and progress lines).
  std::string describe() const;
};

struct SweepSpec {
  std::string name;
  std::string source_file;
  std::string experiment_file;           ///< the base experiment, resolved
  std::string output_dir;                ///< the file's `output` (empty when absent: -o is needed)
  std::vector<SweepBalancer> balancers;  ///< in file order
  std::string baseline;                  ///< label the tables compare against
  std::vector<std::string> columns;      ///< the assignment keys, in first-seen order (table columns)
  std::vector<SweepAssignment> fixed;    ///< `set:` of the file, then --set of the command line
  std::vector<SweepPoint> points;        ///< in sweep order (never empty)
  std::string hash;                      ///< 16 hex digits over every point's hash, in order
};

}  // namespace epsim

// The configuration keys a sweep may vary (docs/sweep.md, "Keys"). A key is written as in the file it
// changes, optionally after the name of that file: `hardware.gpu.sms` or just `gpu.sms`,
// `model.num_experts` or `num_experts`, `experiment.ep_degree` or `ep_degree`; `trace.KEY` is a
// parameter of the generated trace and `balancers.LABEL.params.KEY` a balancer's parameter. Short
// names: `experts` (model.num_experts), `tokens_per_rank` (trace.tokens_per_rank), and `hardware` /
// `model` for a whole other hardware (preset name or file) or model file.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

namespace epsim {

enum class SweepTarget { experiment, hardware, model, trace, balancer_params, hardware_file, model_file };

struct SweepKey {
  SweepTarget target = SweepTarget::experiment;
  std::vector<std::string> path;  ///< inside the target document (empty for the *_file targets)
  std::string label;              ///< the balancer's label for balancer_params
  std::string canonical;          ///< "hardware.gpu.sms", "model.num_experts", "hardware", ...
};

/// Resolves a key as written. Throws InputError(file, place, ...) for a key epsim cannot vary, with a
/// "did you mean" when a known name is within two edits; `labels` are the sweep's balancer labels.
SweepKey resolve_sweep_key(const std::string& written, const std::vector<std::string>& labels,
                           const std::string& file, const std::string& place);

/// Sets `value` at `path` inside the mapping `doc`, creating the mappings on the way (a value that is
/// not a mapping on the way is replaced: the loader then reports whatever is wrong with the result).
void set_yaml_path(YAML::Node& doc, const std::vector<std::string>& path, const YAML::Node& value);

}  // namespace epsim

// Loading the three kinds of YAML file. Each file names its kind at the top (`kind: hardware`,
// `kind: model`, `kind: experiment`) so that passing the wrong file is caught at once.
#pragma once

#include <string>

#include "sim/hardware/experiment_spec.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"

namespace epsim {

/// Throw InputError (file:line:col: message) on a missing file, a YAML syntax error, an unknown key,
/// a wrong type or an impossible value.
HardwareSpec load_hardware(const std::string& path);
ModelSpec load_model(const std::string& path);
/// Also loads the model and hardware files the experiment names (relative to its folder) and checks
/// the combination: the EP degree divides the experts and fits in the cluster, the trace exists.
ExperimentSpec load_experiment(const std::string& path);

}  // namespace epsim

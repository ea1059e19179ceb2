// Reading a sweep file (kind: sweep; docs/sweep.md) with the strictness of every epsim file, and
// resolving every point into the experiments it replays.
#pragma once

#include <string>
#include <vector>

#include "sim/sweep/sweep_spec.hpp"

namespace epsim {

/// Loads `path`; `cli_sets` are the command line's `--set KEY=VALUE` (applied to every point). Every
/// point is checked as `epsim run` would check its experiment (the loaders' rules, the EP degree
/// against the cluster and the experts, the trace against the model, each balancer's parameters).
/// Throws InputError "file:line:col: message" (a point's problem names the point and its values).
SweepSpec load_sweep(const std::string& path, const std::vector<std::string>& cli_sets);

}  // namespace epsim

// The epsim subcommands. Each takes the arguments after its own name and returns the exit status;
// bad input is reported by throwing InputError (main prints it on one line and exits with 2).
#pragma once

#include <string>
#include <vector>

namespace epsim {

/// epsim run EXPERIMENT.yaml [options]
int run_command(const std::vector<std::string>& args);
/// epsim trace {show|stats|import|generate} ...
int trace_command(const std::vector<std::string>& args);
/// epsim balancers
int balancers_command(const std::vector<std::string>& args);
/// epsim compare COMPARISON.yaml [options]
int compare_command(const std::vector<std::string>& args);
/// epsim sweep SWEEP.yaml -o OUTDIR [options] | epsim sweep --join OUTDIR...
int sweep_command(const std::vector<std::string>& args);
/// epsim calibrate MEASUREMENTS.yaml... --base HARDWARE.yaml -o OUT.yaml [--force]
int calibrate_command(const std::vector<std::string>& args);
/// epsim validate --plans PLANS.jsonl --measured MEASURED.json --hardware HW.yaml --model MODEL.yaml -o DIR
int validate_command(const std::vector<std::string>& args);
/// epsim fidelity [MEASUREMENTS.yaml...] [-o docs/fidelity.md] [--force]
int fidelity_command(const std::vector<std::string>& args);
/// epsim hardware {list|show NAME}
int hardware_command(const std::vector<std::string>& args);

}  // namespace epsim

// epsim: predicts and explains the stragglers of MoE expert-parallel training.
#include <boost/program_options/errors.hpp>
#include <iostream>
#include <string>
#include <vector>

#include "sim/cli/commands.hpp"
#include "sim/core/input_error.hpp"
#include "sim/core/signal_cleanup.hpp"
#include "sim/core/time.hpp"

namespace {

const char* kUsage =
    "usage: epsim COMMAND [ARGS]\n"
    "\n"
    "commands:\n"
    "  run EXPERIMENT.yaml     replay a trace through the cluster model; write metrics, timeline, summary\n"
    "  trace info|show|stats   inspect a binary gating trace (sizes, records, per-layer imbalance and drift)\n"
    "  trace merge|slice ...   join traces by ranks or by steps; keep some steps, micro-batches, layers\n"
    "  trace import KIND ...   convert a recording (counts-jsonl, topk-jsonl, sglang-csv, expert-load, ...)\n"
    "  trace export ...        write a trace as counts-jsonl\n"
    "  trace generate ...      make a synthetic trace (uniform, zipf, lognormal; skew and drift)\n"
    "  balancers               list the load balancers\n"
    "  compare COMPARISON.yaml balancers side by side over cases and EP degrees; comparison.csv and .md\n"
    "  sweep SWEEP.yaml -o DIR what-if grid over EP, experts, hardware, balancers...; resumable, on every core\n"
    "  calibrate MEAS.yaml...  fit the hardware model to measurements; write a calibrated hardware YAML\n"
    "  validate --plans ...    compare predictions with a measured timeline of the same plans; errors per task\n"
    "  fidelity [MEAS.yaml...] predicted against measured for every published point; writes docs/fidelity.md\n"
    "  hardware list|show ...  the hardware presets: one line each, or every value of one with its source\n"
    "\n"
    "`epsim COMMAND --help` describes each command; `epsim --version` prints the version.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  // Ctrl-C, kill or a closed terminal remove what a run was writing; a full disk or a file-size limit
  // is a reported write error, not a silent truncation.
  epsim::SignalCleanup::install();
  const std::string command = argv[1];
  if (command == "--version") {
    std::cout << "epsim " << EPSIM_VERSION << "\n";
    return 0;
  }
  const std::vector<std::string> args(argv + 2, argv + argc);
  try {
    if (command == "run") return epsim::run_command(args);
    if (command == "trace") return epsim::trace_command(args);
    if (command == "balancers") return epsim::balancers_command(args);
    if (command == "compare") return epsim::compare_command(args);
    if (command == "sweep") return epsim::sweep_command(args);
    if (command == "calibrate") return epsim::calibrate_command(args);
    if (command == "validate") return epsim::validate_command(args);
    if (command == "fidelity") return epsim::fidelity_command(args);
    if (command == "hardware") return epsim::hardware_command(args);
    std::cerr << "epsim: error: unknown command '" << command << "'\n\n" << kUsage;
    return 2;
  } catch (const epsim::InputError& e) {
    std::cerr << "epsim: error: " << e.what() << "\n";
    return 2;
  } catch (const epsim::TimeOverflow& e) {
    // Readers turn this into an InputError naming the hardware file; this is the last line of defence.
    std::cerr << "epsim: error: " << e.what()
              << ": the hardware's bandwidths, TFLOP/s or latencies are too small for the work\n";
    return 2;
  } catch (const boost::program_options::error& e) {
    std::cerr << "epsim: error: command line: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "epsim: internal error: " << e.what() << "\n";
    return 3;
  }
}

// The commands of epsim-hw, their options and their help texts, and the parsing of one command line
// into the command to run (or the help to print). CPU-side, so every command's usage, its options and
// its refusals are tested without a GPU; hw/cuda/main.cu only dispatches.
//   epsim-hw --help | --version
//   epsim-hw COMMAND [--key value]... [--switch]...        COMMAND: "bench gemm", ..., "suite", "run"
//   epsim-hw COMMAND --help | -h                           that command's usage, exit 0
#pragma once

#include <set>
#include <string>
#include <vector>

#include "hw/host/hw_args.hpp"

namespace epsim::hw {

struct HwCommand {
  std::string name;                 ///< as typed: "bench gemm", "suite", "run"
  std::string summary;              ///< one line for the overview
  std::string usage;                ///< the full help text: synopsis, what it measures, every option
  std::set<std::string> options;    ///< options taking a value ("o" is -o/--output)
  std::set<std::string> switches;   ///< options without a value
  std::set<std::string> required;   ///< options that must be given
  std::string positional;           ///< name of the one positional argument ("" when none)
};

/// Every command, in the order the overview lists them.
const std::vector<HwCommand>& hw_commands();
/// The text of `epsim-hw --help`: the commands with their summaries and the exit statuses.
std::string hw_overview();

struct HwInvocation {
  enum class Action { run, help, version };
  Action action = Action::run;
  const HwCommand* command = nullptr;  ///< run, and help of one command
  HwArgs args;                         ///< run: args.command is the command's name
  std::string text;                    ///< help / version: what to print on stdout
};

/// Parses argv (without the program name). `-h`/`--help` anywhere after the command words asks for
/// that command's help; `epsim-hw bench --help` lists the bench kinds. Throws std::invalid_argument
/// with one line (starting with "epsim-hw" and the command's name) on an unknown command or option, a missing value,
/// a missing required option or a wrong number of positional arguments; main prints it and exits 2.
HwInvocation parse_invocation(const std::vector<std::string>& argv, const std::string& version);

}  // namespace epsim::hw

// Shared pieces of the `epsim trace` command line (trace_command.cpp, trace_import_command.cpp):
// option parsing with boost::program_options, strict integer and number conversion, and the line that
// reports a trace just written.
#pragma once

#include <boost/program_options.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "traces/import/provenance_label.hpp"

namespace epsim::trace_cli {

namespace po = boost::program_options;

/// Parses `args` against the visible options plus hidden positional arguments named `positional`
/// (none when empty; `many` = any number, else exactly one) into `vm`. Returns false when --help was
/// asked (the help is then printed).
bool parse(const std::string& command, const std::string& usage, const std::vector<std::string>& args,
           po::options_description& visible, const std::string& positional, po::variables_map& vm, bool many = false);

std::uint64_t to_uint(const std::string& command, const std::string& option, const std::string& text, std::uint64_t min,
                      std::uint64_t max);
double to_double(const std::string& command, const std::string& option, const std::string& text);
std::uint32_t u32_opt(const std::string& command, const po::variables_map& vm, const std::string& name,
                      std::uint64_t min = 1, std::uint64_t max = 0xffffffffull);

/// Adds --provenance and --licence to `desc`.
void add_label_options(po::options_description& desc);
ProvenanceOptions label_options(const po::variables_map& vm);

/// Reads the trace back (every record checked) and prints "wrote PATH: N records, ...".
void report_written(const std::string& path);

/// `epsim trace import KIND ...` (args start after "import").
int import_command(const std::vector<std::string>& args);

/// The usage lines of every `epsim trace` subcommand.
extern const char* const kTraceUsage;

}  // namespace epsim::trace_cli

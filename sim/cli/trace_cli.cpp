#include "sim/cli/trace_cli.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <iostream>

#include "sim/cli/command_line.hpp"
#include "sim/core/input_error.hpp"
#include "traces/format/trace_reader.hpp"

namespace epsim::trace_cli {

bool parse(const std::string& command, const std::string& usage, const std::vector<std::string>& args,
           po::options_description& visible, const std::string& positional, po::variables_map& vm, bool many) {
  visible.add_options()("help,h", "print this help");
  po::options_description all;
  all.add(visible);
  po::positional_options_description pos;
  if (!positional.empty()) {
    if (many)
      all.add_options()(positional.c_str(), po::value<std::vector<std::string>>(), "");
    else
      all.add_options()(positional.c_str(), po::value<std::string>(), "");
    pos.add(positional.c_str(), many ? -1 : 1);
  }
  try {
    po::store(po::command_line_parser(one_replace_flag(args, all)).options(all).positional(pos).run(), vm);
    if (vm.count("help")) {
      std::cout << "usage: " << command << " " << usage << "\n" << visible;
      return false;
    }
    po::notify(vm);
  } catch (const po::error& e) {
    throw InputError(command, "", std::string(e.what()) + " (see --help)");
  }
  if (!positional.empty() && !vm.count(positional))
    throw InputError(command, "", "expected " + usage + " (see --help)");
  return true;
}

std::uint64_t to_uint(const std::string& command, const std::string& option, const std::string& text, std::uint64_t min,
                      std::uint64_t max) {
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || text[0] == '-' || text[0] == '+' || end != text.c_str() + text.size() || errno != 0 || v < min ||
      v > max)
    throw InputError(command, "--" + option,
                     "'" + text + "' is not an integer between " + std::to_string(min) + " and " + std::to_string(max));
  return v;
}

double to_double(const std::string& command, const std::string& option, const std::string& text) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno != 0 || !std::isfinite(v))
    throw InputError(command, "--" + option, "'" + text + "' is not a number");
  return v;
}

std::uint32_t u32_opt(const std::string& command, const po::variables_map& vm, const std::string& name,
                      std::uint64_t min, std::uint64_t max) {
  return static_cast<std::uint32_t>(to_uint(command, name, vm[name].as<std::string>(), min, max));
}

void add_label_options(po::options_description& desc) {
  desc.add_options()("provenance", po::value<std::string>(),
                     "where the routing came from (model, run, command); replaces what the input says")(
      "licence", po::value<std::string>(), "the licence of the recording; replaces what the input says");
}

ProvenanceOptions label_options(const po::variables_map& vm) {
  ProvenanceOptions o;
  if (vm.count("provenance")) o.provenance = vm["provenance"].as<std::string>();
  if (vm.count("licence")) o.licence = vm["licence"].as<std::string>();
  return o;
}

void report_written(const std::string& path) {
  TraceReader reader(path);
  TraceRecord record;
  while (reader.next(record)) {
  }
  const TraceHeader& h = reader.header();
  std::cout << "wrote " << path << ": " << reader.records_read() << " records, ranks " << h.num_ranks << ", experts "
            << h.num_experts << ", top-k " << h.top_k << ", layers " << h.num_layers << ", token ids "
            << (h.has_token_ids ? "yes" : "no") << "\n";
}

}  // namespace epsim::trace_cli

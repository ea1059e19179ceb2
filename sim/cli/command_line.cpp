#include "sim/cli/command_line.hpp"

#include <iostream>

#include "sim/core/input_error.hpp"

namespace po = boost::program_options;

namespace epsim {

std::vector<std::string> one_replace_flag(const std::vector<std::string>& args, const po::options_description& options) {
  const bool force = options.find_nothrow("force", false) != nullptr;
  const bool overwrite = options.find_nothrow("overwrite", false) != nullptr;
  if (force == overwrite) return args;
  std::vector<std::string> out = args;
  for (std::string& a : out) {
    if (force && a == "--overwrite") a = "--force";
    if (overwrite && a == "--force") a = "--overwrite";
  }
  return out;
}

bool parse_command_line(const std::vector<std::string>& args, const po::options_description& options,
                        const char* positional, int positional_count) {
  po::positional_options_description positionals;
  if (positional) positionals.add(positional, positional_count);
  po::variables_map vm;
  po::store(po::command_line_parser(one_replace_flag(args, options)).options(options).positional(positionals).run(), vm);
  if (vm.count("help")) {
    std::cout << options << "\n";
    return false;
  }
  po::notify(vm);
  return true;
}

std::function<void(int)> require_non_negative(const std::string& option) {
  return [option](int value) {
    if (value < 0)
      throw InputError("command line", "", option + ": expected an integer >= 0, got " + std::to_string(value));
  };
}

}  // namespace epsim

#include "sim/cli/command_line.hpp"

#include <iostream>

#include "sim/core/input_error.hpp"

namespace po = boost::program_options;

namespace epsim {

bool parse_command_line(const std::vector<std::string>& args, const po::options_description& options,
                        const char* positional, int positional_count) {
  po::positional_options_description positionals;
  if (positional) positionals.add(positional, positional_count);
  po::variables_map vm;
  po::store(po::command_line_parser(args).options(options).positional(positionals).run(), vm);
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

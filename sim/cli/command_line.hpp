// The parsing every subcommand does the same way: named options, at most one positional argument
// name (taking `positional_count` values, -1 for any number), and --help.
#pragma once

#include <boost/program_options.hpp>
#include <functional>
#include <string>
#include <vector>

namespace epsim {

/// Parses `args` into the variables bound in `options`. Returns false after printing the options when
/// --help was given (the command then exits 0). Throws boost::program_options::error on bad arguments.
bool parse_command_line(const std::vector<std::string>& args, const boost::program_options::options_description& options,
                        const char* positional = nullptr, int positional_count = 1);

/// `args` with --force and --overwrite read as one flag: commands that write a file call it --force,
/// commands that write a folder --overwrite, and each accepts the other's spelling (the one `options`
/// does not define becomes the one it does).
std::vector<std::string> one_replace_flag(const std::vector<std::string>& args,
                                          const boost::program_options::options_description& options);

/// A notifier for an integer option that must be >= 0 (InputError naming `option` otherwise).
std::function<void(int)> require_non_negative(const std::string& option);

}  // namespace epsim

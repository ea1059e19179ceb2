// Runs the epsim binary the way a user does, capturing exit status, stdout and stderr.
#pragma once

#include <filesystem>
#include <string>

namespace epsim::test {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
};

/// Runs `epsim ARGS` (ARGS already shell-quoted) inside `workdir`.
CliResult run_epsim(const std::string& args, const std::filesystem::path& workdir);
std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& text);

}  // namespace epsim::test

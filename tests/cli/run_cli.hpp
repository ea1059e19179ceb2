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

/// Runs `epsim ARGS` (ARGS already shell-quoted) inside `workdir`. `shell_prefix` runs first in the
/// same shell (for example `ulimit -f 64;` to make writes fail).
CliResult run_epsim(const std::string& args, const std::filesystem::path& workdir, const std::string& shell_prefix = "");
/// Runs a shell script inside `workdir`; `$EPSIM` names the binary. Status as run_epsim's.
CliResult run_shell(const std::string& script, const std::filesystem::path& workdir);
std::string read_file(const std::filesystem::path& path);
void write_file(const std::filesystem::path& path, const std::string& text);

}  // namespace epsim::test

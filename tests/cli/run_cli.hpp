// Runs the epsim binary the way a user does, capturing exit status, stdout and stderr.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

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
/// `path` as one shell word, for run_epsim's ARGS (single-quoted; paths with a quote are not used).
std::string quoted(const std::filesystem::path& path);
/// Whether `text` (a command's output) holds `part`.
bool says(const std::string& text, const std::string& part);
/// Checks that a command was refused as bad input: exit status 2, `part` on stderr, nothing on stdout.
void check_refused(const CliResult& r, const std::string& part);
void write_file(const std::filesystem::path& path, const std::string& text);
/// A CSV text's rows (the header first), split at commas (no quoted cells).
std::vector<std::vector<std::string>> csv_rows(const std::string& text);
/// Column `name` of `rows` (header first), row by row; std::out_of_range when the header lacks it.
std::vector<std::string> csv_column(const std::vector<std::vector<std::string>>& rows, const std::string& name);

}  // namespace epsim::test

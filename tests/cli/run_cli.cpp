#include "tests/cli/run_cli.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <sys/wait.h>

#include "tests/test_paths.hpp"

namespace epsim::test {

bool says(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

void check_refused(const CliResult& r, const std::string& part) {
  CHECK(r.status == 2);
  CHECK(says(r.err, part));
  CHECK(r.out.empty());
}

std::string quoted(const std::filesystem::path& path) { return "'" + path.string() + "'"; }

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::vector<std::vector<std::string>> csv_rows(const std::string& text) {
  std::vector<std::vector<std::string>> rows;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::vector<std::string> cells;
    std::istringstream cells_in(line);
    for (std::string cell; std::getline(cells_in, cell, ',');) cells.push_back(cell);
    rows.push_back(cells);
  }
  return rows;
}

std::vector<std::string> csv_column(const std::vector<std::vector<std::string>>& rows, const std::string& name) {
  if (rows.empty()) throw std::out_of_range("csv_column: no header");
  const auto at = std::find(rows.front().begin(), rows.front().end(), name);
  if (at == rows.front().end()) throw std::out_of_range("csv_column: no column " + name);
  const std::size_t c = static_cast<std::size_t>(at - rows.front().begin());
  std::vector<std::string> out;
  for (std::size_t r = 1; r < rows.size(); ++r) out.push_back(rows[r].at(c));
  return out;
}

void write_file(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

CliResult run_shell(const std::string& script, const std::filesystem::path& workdir) {
  const auto out = workdir / "cli.stdout";
  const auto err = workdir / "cli.stderr";
  const auto file = workdir / "cli.sh";
  write_file(file, "EPSIM='" + epsim_binary() + "'\n" + script + "\n");
  const std::string command = "cd '" + workdir.string() + "' && sh ./cli.sh >'" + out.string() + "' 2>'" +
                              err.string() + "' </dev/null";
  const int raw = std::system(command.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  std::filesystem::remove(file);
  return r;
}

CliResult run_epsim(const std::string& args, const std::filesystem::path& workdir, const std::string& shell_prefix) {
  return run_shell(shell_prefix + " exec \"$EPSIM\" " + args, workdir);
}

}  // namespace epsim::test

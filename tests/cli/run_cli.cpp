#include "tests/cli/run_cli.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

#include "tests/test_paths.hpp"

namespace epsim::test {

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
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

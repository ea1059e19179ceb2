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

CliResult run_epsim(const std::string& args, const std::filesystem::path& workdir) {
  const auto out = workdir / "cli.stdout";
  const auto err = workdir / "cli.stderr";
  const std::string command = "cd '" + workdir.string() + "' && '" + epsim_binary() + "' " + args + " >'" +
                              out.string() + "' 2>'" + err.string() + "' </dev/null";
  const int raw = std::system(command.c_str());
  CliResult r;
  r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
  r.out = read_file(out);
  r.err = read_file(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

}  // namespace epsim::test

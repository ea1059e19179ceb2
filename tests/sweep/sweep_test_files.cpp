#include "tests/sweep/sweep_test_files.hpp"

#include <fstream>
#include <sstream>

#include "tests/test_paths.hpp"

namespace fs = std::filesystem;

namespace epsim::test {

std::string sweep_yaml(const std::string& body, const std::string& name) {
  return "kind: sweep\nname: " + name + "\nexperiment: " + (source_dir() / "experiments/default.yaml").string() +
         "\n" + body;
}

std::map<std::string, std::string> folder_files(const fs::path& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    if (!entry.is_regular_file()) continue;
    std::ifstream in(entry.path(), std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    out[fs::relative(entry.path(), dir).string()] = s.str();
  }
  return out;
}

}  // namespace epsim::test

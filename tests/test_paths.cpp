#include "tests/test_paths.hpp"

#include <algorithm>

namespace epsim::test {

std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::current_path() / "scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::string> leftovers(const std::filesystem::path& dir) {
  std::vector<std::string> found;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    for (const char* mark : {".epsim-tmp-", ".epsim-stage", ".epsim-lock", ".epsim-old", ".partial"})
      if (name.find(mark) != std::string::npos) found.push_back(name);
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace epsim::test

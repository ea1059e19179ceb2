#include "tests/test_paths.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <system_error>

namespace epsim::test {
namespace {

// CTest runs every test case as its own process, two at a time: a folder named only by its caller
// would be emptied by one case while another writes in it. Each process gets its own folders, and
// removes them when it exits.
std::vector<std::filesystem::path>& created_scratch() {
  static std::vector<std::filesystem::path> dirs;
  return dirs;
}

void remove_scratch() {
  std::error_code ec;
  for (const auto& dir : created_scratch()) std::filesystem::remove_all(dir, ec);
}

}  // namespace

std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::current_path() / "scratch" / (name + "." + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  if (created_scratch().empty()) std::atexit(remove_scratch);
  if (std::find(created_scratch().begin(), created_scratch().end(), dir) == created_scratch().end())
    created_scratch().push_back(dir);
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

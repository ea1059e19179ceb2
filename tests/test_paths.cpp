#include "tests/test_paths.hpp"

namespace epsim::test {

std::filesystem::path scratch_dir(const std::string& name) {
  auto dir = std::filesystem::current_path() / "scratch" / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace epsim::test

#include "tests/fuzz/config_tree.hpp"

#include <filesystem>

#include "tests/fuzz/fuzz_input.hpp"

namespace epsim::fuzz {

namespace {

namespace fs = std::filesystem;

fs::path make_tree() {
  const fs::path root = scratch_dir() / "config-tree";
  const fs::path input_dir = root / "a" / "b" / "c";
  fs::create_directories(input_dir);
  for (const fs::path& at : {root, root / "a" / "b"}) {
    fs::create_directory_symlink(source_dir() / "models", at / "models");
    fs::create_directory_symlink(source_dir() / "traces", at / "traces");
  }
  for (const auto& entry : fs::directory_iterator(source_dir() / "tests" / "fixtures" / "config"))
    fs::create_symlink(entry.path(), input_dir / entry.path().filename());
  return input_dir;
}

}  // namespace

std::string config_input_path(const std::string& name) {
  static const fs::path input_dir = make_tree();
  return (input_dir / name).string();
}

}  // namespace epsim::fuzz

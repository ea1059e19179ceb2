// Where tests find the repository, the shared recordings and the epsim binary (set by CMake).
#pragma once

#include <filesystem>
#include <string>

namespace epsim::test {

inline std::filesystem::path source_dir() { return EPSIM_SOURCE_DIR; }
inline std::filesystem::path shared_dir() { return EPSIM_SHARED_DIR; }
inline std::string epsim_binary() { return EPSIM_BINARY; }
/// A fresh empty folder under the build tree for one test's files.
std::filesystem::path scratch_dir(const std::string& name);

}  // namespace epsim::test

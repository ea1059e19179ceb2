// Where tests find the repository, the shared recordings and the epsim binary (set by CMake).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace epsim::test {

inline std::filesystem::path source_dir() { return EPSIM_SOURCE_DIR; }
inline std::filesystem::path shared_dir() { return EPSIM_SHARED_DIR; }
inline std::string epsim_binary() { return EPSIM_BINARY; }
/// A fresh empty folder under the build tree for one test's files.
std::filesystem::path scratch_dir(const std::string& name);
/// Entries of `dir` that epsim makes only while it writes (temporary files, staging folders, locks):
/// after a command has finished or failed there must be none.
std::vector<std::string> leftovers(const std::filesystem::path& dir);

}  // namespace epsim::test

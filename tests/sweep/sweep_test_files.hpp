// Small sweeps over the bundled default experiment for the sweep tests, and reading an output folder.
#pragma once

#include <filesystem>
#include <map>
#include <string>

namespace epsim::test {

/// A sweep file over experiments/default.yaml (absolute path) with `body` after the common keys
/// (kind, name, experiment); `max_records: 2` for every point unless the body sets it.
std::string sweep_yaml(const std::string& body, const std::string& name = "t");

/// Every regular file under `dir` (relative path -> bytes), hidden lock and temporary files included.
std::map<std::string, std::string> folder_files(const std::filesystem::path& dir);

}  // namespace epsim::test

#include "sim/report/output_marker.hpp"

#include <algorithm>
#include <fstream>
#include <set>
#include <unistd.h>

namespace fs = std::filesystem;

namespace epsim {

namespace {

// The names the marker lists, or nullopt-like false when the marker is missing or not epsim's.
bool read_marker(const fs::path& folder, std::set<std::string>& names) {
  std::error_code ec;
  const fs::path marker = folder / kOutputMarkerName;
  if (!fs::is_regular_file(fs::symlink_status(marker, ec))) return false;
  std::ifstream in(marker, std::ios::binary);
  std::string line;
  if (!std::getline(in, line) || line != kOutputMarkerHeader) return false;
  while (std::getline(in, line))
    if (!line.empty() && line[0] != '#' && line.find('/') == std::string::npos) names.insert(line);
  return true;
}

}  // namespace

std::vector<std::string> foreign_entries(const fs::path& folder) {
  std::set<std::string> ours;
  const bool marked = read_marker(folder, ours);
  std::vector<std::string> foreign;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    const std::string name = e.path().filename().string();
    const fs::file_status st = e.symlink_status(ec);
    if (marked && name == kOutputMarkerName) continue;
    if (marked && fs::is_regular_file(st) && ours.count(name)) continue;
    foreign.push_back(fs::is_directory(st) ? name + "/" : name);
  }
  if (ec) foreign.push_back("(the folder cannot be listed: " + ec.message() + ")");
  std::sort(foreign.begin(), foreign.end());
  return foreign;
}

std::string describe_entries(const std::vector<std::string>& entries) {
  constexpr std::size_t kShown = 4;
  std::string out;
  for (std::size_t i = 0; i < entries.size() && i < kShown; ++i) out += (i ? ", " : "") + entries[i];
  if (entries.size() > kShown) out += " and " + std::to_string(entries.size() - kShown) + " more";
  return out;
}

bool remove_owned_folder(const fs::path& folder) {
  std::set<std::string> ours;
  read_marker(folder, ours);
  for (const std::string& name : ours) ::unlink((folder / name).c_str());
  ::unlink((folder / kOutputMarkerName).c_str());
  return ::rmdir(folder.c_str()) == 0;
}

}  // namespace epsim

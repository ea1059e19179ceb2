#include "sim/config/preset_lookup.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "sim/core/input_error.hpp"

namespace fs = std::filesystem;

namespace epsim {

namespace {

/// The parsed top mapping of a YAML file; InputError (file:line:col) when it does not parse.
YAML::Node parse(const std::string& path) {
  try {
    return YAML::LoadFile(path);
  } catch (const YAML::BadFile&) {
    throw InputError(path, "", "cannot open: no such file, or it is not readable");
  } catch (const YAML::Exception& e) {
    const std::string where =
        e.mark.is_null() ? "" : std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    throw InputError(path, where, "YAML syntax error: " + e.msg);
  }
}

std::string scalar_or(const YAML::Node& map, const char* key, const std::string& fallback) {
  const YAML::Node v = map[key];
  return v && v.IsScalar() && !v.Scalar().empty() ? v.Scalar() : fallback;
}

std::string known_names(const std::vector<PresetFile>& presets) {
  std::string out;
  for (const PresetFile& p : presets)
    out += (out.empty() ? "" : ", ") + p.name + (p.stem == p.name ? "" : " (file " + p.stem + ".yaml)");
  return out.empty() ? "none" : out;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

/// Splits "text  # comment" at the first '#' that starts a comment (at the line's start or after a
/// blank, outside quotes), as YAML does.
std::pair<std::string, std::string> split_comment(const std::string& line) {
  char quote = 0;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '#' && (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t')) {
      return {line.substr(0, i), trim(line.substr(i + 1))};
    }
  }
  return {line, ""};
}

}  // namespace

PresetComments read_preset_comments(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw InputError(path, "", "cannot open: no such file, or it is not readable");
  PresetComments out;
  std::vector<std::pair<std::size_t, std::string>> open_keys;  // (indent, key) of the enclosing mappings
  std::string pending;                                         // comment lines above the next key
  std::string curve;                                           // key path of the sequence being read
  std::string line;
  while (std::getline(in, line)) {
    const auto [text, comment] = split_comment(line);
    const std::string body = trim(text);
    if (body.empty()) {
      // A comment-only line belongs to the key below it; a blank line ends such a block.
      pending = comment.empty() ? "" : pending + (pending.empty() ? "" : " ") + comment;
      continue;
    }
    const std::size_t indent = text.find_first_not_of(" ");
    if (body[0] == '-') {
      if (!curve.empty()) out.points[curve].push_back(comment);
      pending.clear();
      continue;
    }
    const auto colon = body.find(':');
    if (colon == std::string::npos) continue;
    while (!open_keys.empty() && open_keys.back().first >= indent) open_keys.pop_back();
    std::string key_path;
    for (const auto& k : open_keys) key_path += k.second + ".";
    key_path += trim(body.substr(0, colon));
    const std::string c = !comment.empty() ? comment : pending;
    if (!c.empty()) out.keys[key_path] = c;
    pending.clear();
    curve = key_path;
    if (trim(body.substr(colon + 1)).empty()) open_keys.emplace_back(indent, trim(body.substr(0, colon)));
  }
  return out;
}

std::string models_dir() {
  const char* env = std::getenv("EPSIM_MODELS_DIR");
  if (env && *env) return env;
  return EPSIM_MODELS_DIR;
}

std::vector<PresetFile> list_presets(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw InputError(dir, "", "the models folder does not exist or is not a folder (set EPSIM_MODELS_DIR to the "
                              "folder that holds the hardware presets)");
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if ((p.extension() == ".yaml" || p.extension() == ".yml") && it->is_regular_file(ec)) files.push_back(p);
  }
  if (ec) throw InputError(dir, "", "cannot list the models folder: " + ec.message());
  // Directory order differs between file systems; sorting first keeps every message deterministic.
  std::sort(files.begin(), files.end());
  std::vector<PresetFile> presets;
  for (const fs::path& file : files) {
    const YAML::Node top = parse(file.string());
    if (!top.IsMap() || scalar_or(top, "kind", "") != "hardware") continue;
    const std::string stem = file.stem().string();
    presets.push_back(PresetFile{scalar_or(top, "name", stem), stem, file.string()});
  }
  std::sort(presets.begin(), presets.end(),
            [](const PresetFile& a, const PresetFile& b) { return a.name < b.name; });
  for (std::size_t i = 1; i < presets.size(); ++i)
    if (presets[i].name == presets[i - 1].name)
      throw InputError(presets[i].path, "name",
                       "hardware preset name '" + presets[i].name + "' is also the name of " + presets[i - 1].path +
                           "; each preset in the models folder needs its own name");
  return presets;
}

PresetFile find_preset(const std::string& name, const std::string& dir) {
  const std::vector<PresetFile> presets = list_presets(dir);
  for (const PresetFile& p : presets)
    if (p.name == name) return p;
  for (const PresetFile& p : presets)
    if (p.stem == name) return p;
  throw InputError("command line", "",
                   "unknown hardware preset '" + name + "'; known presets: " + known_names(presets) +
                       " (the kind: hardware files of " + dir + ", by name: or file stem)");
}

}  // namespace epsim

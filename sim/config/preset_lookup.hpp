// Hardware presets: the `kind: hardware` YAML files of the models folder, found by name. The folder is
// the source tree's models/ (compiled in as EPSIM_MODELS_DIR) unless the environment variable
// EPSIM_MODELS_DIR names another one, so that an installed binary or a test can point elsewhere.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace epsim {

/// One hardware file of the models folder.
struct PresetFile {
  std::string name;  ///< its `name:` (the file stem when the key is missing)
  std::string stem;  ///< file name without `.yaml`
  std::string path;  ///< folder / file name
};

/// The models folder: $EPSIM_MODELS_DIR when set and non-empty, else the compiled-in source folder.
std::string models_dir();

/// Every `kind: hardware` file (`*.yaml`, `*.yml`) directly in `dir`, sorted by name. Other kinds are
/// skipped. InputError when the folder cannot be read, a YAML file in it does not parse, or two files
/// claim the same name.
std::vector<PresetFile> list_presets(const std::string& dir);

/// The preset whose `name:` is `name`, else whose file stem is `name`. InputError naming every known
/// preset when there is none.
PresetFile find_preset(const std::string& name, const std::string& dir);

/// The source comments of a hardware file, by key path (`gpu.sms`, `ep_backend.message_efficiency`).
struct PresetComments {
  /// A key's comment: the one on its own line, else the comment lines just above it (joined by spaces).
  std::map<std::string, std::string> keys;
  /// The comments on a curve's `- [x, y]` lines, one per point ("" where a point has none).
  std::map<std::string, std::vector<std::string>> points;
};

/// Reads the comments of a YAML file line by line (yaml-cpp drops them). Block-style mappings and
/// sequences, as the committed presets are written; anything else simply has no comment.
PresetComments read_preset_comments(const std::string& path);

}  // namespace epsim

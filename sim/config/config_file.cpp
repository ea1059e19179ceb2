#include "sim/config/config_file.hpp"

#include <filesystem>
#include <fstream>
#include <system_error>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "sim/core/input_error.hpp"

namespace fs = std::filesystem;

namespace epsim {

namespace {

YAML::Node read_document(const std::string& path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw InputError(path, "", "cannot open: it is a folder, not a YAML file");
  std::ifstream in(path);
  if (!in) throw InputError(path, "", "cannot open: no such file, or it is not readable");
  try {
    return YAML::Load(in);
  } catch (const YAML::DeepRecursion& e) {
    // yaml-cpp stops at a fixed depth instead of overflowing the stack, but says only "bad file".
    throw InputError(path, std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1),
                     "YAML values nested more than " + std::to_string(e.depth() - 1) +
                         " levels deep; epsim's files nest a few levels at most");
  } catch (const YAML::Exception& e) {
    const std::string where =
        e.mark.is_null() ? "" : std::to_string(e.mark.line + 1) + ":" + std::to_string(e.mark.column + 1);
    throw InputError(path, where, "YAML syntax error: " + e.msg);
  }
}

}  // namespace

/// The file's top mapping, after checking that it says `kind: <kind>`.
ConfigMap open_config(const std::string& path, const std::string& kind) {
  ConfigMap top(read_document(path), path);
  if (!top.has("kind"))
    top.fail("", "missing key 'kind' (a " + kind + " file starts with 'kind: " + kind + "')");
  const std::string found = top.get_string("kind");
  if (found != kind) top.fail("kind", "expected kind: " + kind + ", got '" + found + "' (wrong file?)");
  return top;
}

}  // namespace epsim

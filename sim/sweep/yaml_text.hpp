// YAML written back as text with its meaning intact: a quoted scalar stays quoted (so "450" is still a
// string to the strict loaders, never a number), everything else as yaml-cpp writes it. Used for the
// hardware, model and experiment files a sweep point derives, for ids and for hashing.
#pragma once

#include <string>

#include <yaml-cpp/yaml.h>

namespace epsim {

/// The node as a block-style YAML document.
std::string yaml_document(const YAML::Node& node);
/// The node on one line, in flow style (`120`, `[1, 2]`, `{a: 1}`, `"quoted"`).
std::string yaml_flow(const YAML::Node& node);

}  // namespace epsim

// Opening one epsim YAML file: read and parse it (syntax errors become InputError with line:column)
// and check that it declares the expected `kind:`. Every loader starts here.
#pragma once

#include <string>

#include "sim/config/config_map.hpp"

namespace epsim {

/// The file's top mapping, after checking that it says `kind: <kind>` (the key is consumed).
ConfigMap open_config(const std::string& path, const std::string& kind);

}  // namespace epsim

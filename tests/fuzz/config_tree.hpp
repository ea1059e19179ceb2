// Experiment and comparison files name other files relative to their own folder. The fuzz input is
// written where the repository's own files find their neighbours: three folders deep in a scratch tree
// whose models/ and traces/ (at the top and one level below) lead to the repository's, and whose input
// folder holds the files of tests/fixtures/config/. So experiments/*.yaml (../models/...) and the
// fixtures (../../../models/..., hardware-good.yaml) load as they do in place.
#pragma once

#include <string>

namespace epsim::fuzz {

/// Path of the input file in that tree (the tree is made on first use).
std::string config_input_path(const std::string& name);

}  // namespace epsim::fuzz

// Writing a calibrated hardware file: the base hardware file's values with every fitted parameter
// replaced, as a complete kind: hardware YAML that load_hardware reads. Each fitted number carries a
// comment with its standard error, the number of points and the measurement files; every other number
// says that it was kept from the base file.
#pragma once

#include <string>

#include "hw/calibration/calibration_fit.hpp"
#include "sim/hardware/hardware_spec.hpp"

namespace epsim {

/// The YAML text. `name` becomes the file's `name:`; `base_path` is named in the comments.
std::string calibrated_hardware_yaml(const HardwareSpec& base, const std::string& base_path, const Calibration& cal,
                                     const std::string& name);

/// Writes `text` to `path` atomically (an AtomicFile, checked with load_hardware before it is renamed
/// into place). Throws InputError if `path` exists and `force` is false, or on any I/O error; a failed
/// write leaves no temporary file behind.
void write_hardware_file(const std::string& path, const std::string& text, bool force);

}  // namespace epsim

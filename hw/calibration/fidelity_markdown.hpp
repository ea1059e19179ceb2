// docs/fidelity.md: the header (command, data files, presets, rules), one table per kind (setting,
// measured, predicted on the preset and calibrated, leave-one-out, errors, source), the summary of
// errors against the targets with, for every kind that misses, by how much and what the misses have
// in common, and the DeepSeek-V3 section (given as text). Nothing in it depends on the time or the
// machine: the same inputs give the same bytes.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "hw/calibration/fidelity_table.hpp"

namespace epsim {

struct FidelityDocHeader {
  std::string command;             ///< how the file was made, as a user types it
  std::vector<std::string> files;  ///< the measurement files, as given
  std::string models_dir;
};

void write_fidelity_markdown(std::ostream& out, const FidelityDocHeader& header, const std::vector<FidelityRow>& rows,
                             const std::string& deepseek_section);

}  // namespace epsim

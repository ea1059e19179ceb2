// The provenance and licence labels an importer stores in a trace header. They come from the input
// (what the file itself says) or from the user (--provenance, --licence), never from the importer:
// a label given by the user replaces the input's. The trace header has one provenance string, so a
// licence is appended to it as "; licence: ...".
#pragma once

#include <string>

namespace epsim {

struct ProvenanceOptions {
  std::string provenance;  ///< empty = not given
  std::string licence;     ///< empty = not given
};

/// `from_input` / `licence_from_input`: what the input says (empty when nothing). The user's labels
/// win. Returns "PROVENANCE; licence: LICENCE", or just PROVENANCE when no licence is known.
inline std::string provenance_label(const std::string& from_input, const std::string& licence_from_input,
                                    const ProvenanceOptions& user) {
  const std::string provenance = user.provenance.empty() ? from_input : user.provenance;
  const std::string licence = user.licence.empty() ? licence_from_input : user.licence;
  if (licence.empty()) return provenance;
  return provenance.empty() ? "licence: " + licence : provenance + "; licence: " + licence;
}

}  // namespace epsim

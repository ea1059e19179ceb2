#include "sim/sweep/sweep_json_file.hpp"

#include <fstream>

#include "sim/core/input_error.hpp"

namespace epsim {

nlohmann::json SweepJsonFile::read(const char* format, int version) const {
  std::ifstream in(path_, std::ios::binary);
  if (!in) throw InputError(path_, "", "cannot open the " + kind_);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(in);
  } catch (const nlohmann::json::exception& e) {
    bad(std::string("not JSON: ") + e.what());
  }
  if (!j.is_object() || j.value("format", "") != format || j.value("version", 0) != version)
    bad("format or version");
  return j;
}

void SweepJsonFile::bad(const std::string& what) const {
  throw InputError(path_, "", "not a " + kind_ + " of this epsim (" + what +
                                  "); it was changed by hand or written by another version: " + remedy_);
}

}  // namespace epsim

// The InputError of a fit that its points cannot feed: placed at one point's "file:line:col".
#pragma once

#include <string>

#include "sim/core/input_error.hpp"

namespace epsim {

/// Throws InputError(file, "line:col", message) for a point at `where` ("file:line:col") of `file`.
[[noreturn]] inline void throw_at_point(const std::string& file, const std::string& where, const std::string& message) {
  const std::string place =
      where.size() > file.size() + 1 && where.compare(0, file.size(), file) == 0 ? where.substr(file.size() + 1) : "";
  throw InputError(file, place.empty() && where != file ? where : place, message);
}

}  // namespace epsim

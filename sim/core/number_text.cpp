#include "sim/core/number_text.hpp"

#include <cstdio>

namespace epsim {

std::string g9(double v) {
  char buf[40];  // (the longest, "-1.23456789e-308", is 16 characters)
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

}  // namespace epsim

#include "sim/core/number_text.hpp"

#include <cstdio>

namespace epsim {

std::string g9(double v) {
  char buf[40];  // (the longest, "-1.23456789e-308", is 16 characters)
  std::snprintf(buf, sizeof buf, "%.9g", v);
  return buf;
}

std::string signed_percent(double share) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%+.3f%%", 100 * share);
  const std::string text = buf;
  return text == "-0.000%" ? "+0.000%" : text;
}

}  // namespace epsim

#include "hw/calibration/extrapolated_intercept.hpp"

#include <cstdio>

namespace epsim {

std::string extrapolated_intercept(double fixed_us, double smallest, double largest, double fastest_us) {
  if (!(smallest > 0) || !(largest >= smallest) || !(fastest_us > 0)) return "";
  const double span = largest / smallest;
  const double share = fixed_us / fastest_us;
  if (!(span < kInterceptSpan) || !(share > kInterceptShare)) return "";
  char text[200];
  std::snprintf(text, sizeof text,
                "extrapolated to zero bytes from sizes spanning %.3g x, and %.0f%% of the fastest point's %.4g us: "
                "read it as the line's intercept, not a measured kernel overhead",
                span, 100 * share, fastest_us);
  return text;
}

}  // namespace epsim

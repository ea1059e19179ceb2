#include "hw/host/copy_sm_probe.hpp"

#include <cstdio>
#include <sstream>

namespace epsim::hw {

CopySmVerdict judge_copy_sm_probe(const CopySmProbeTimes& t) {
  if (!(t.alone_us > 0) || !(t.left_us >= 4.0 * t.alone_us)) return CopySmVerdict::inconclusive;
  if (t.beside_us < 0.5 * t.left_us && t.beside_us <= 3.0 * t.alone_us) return CopySmVerdict::no_sms;
  if (t.beside_us >= 0.9 * t.left_us) return CopySmVerdict::needs_sms;
  return CopySmVerdict::unclear;
}

const char* to_string(CopySmVerdict v) {
  switch (v) {
    case CopySmVerdict::no_sms: return "ran beside it, no SM used";
    case CopySmVerdict::needs_sms: return "waited for the SMs, the copy is a kernel";
    case CopySmVerdict::unclear: return "slowed but not held back: unclear";
    case CopySmVerdict::inconclusive: return "inconclusive: the holder did not outlast the copy 4 times over";
  }
  return "?";
}

std::optional<bool> copy_on_sms_of(CopySmVerdict v) {
  if (v == CopySmVerdict::needs_sms) return true;
  if (v == CopySmVerdict::no_sms) return false;
  return std::nullopt;
}

namespace {

std::string one_decimal(double x) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f", x);
  return buf;
}

}  // namespace

std::string copy_sm_probe_comment(const std::string& kind, double bytes, const CopySmProbeTimes& t, int trials) {
  std::ostringstream o;
  o << "SM probe (" << kind << ", " << static_cast<long long>(bytes) << " B): " << one_decimal(t.beside_us)
    << " us beside a kernel holding every SM for " << one_decimal(t.left_us) << " us more (alone "
    << one_decimal(t.alone_us) << " us): " << to_string(judge_copy_sm_probe(t)) << "; medians of " << trials;
  return o.str();
}

}  // namespace epsim::hw

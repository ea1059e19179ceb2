// Simulated time. Every timestamp and duration in epsim is an integer count of picoseconds, so that
// event ordering is exact and runs are reproducible bit for bit; conversions to and from the units
// people write in configuration files (microseconds, GB/s) happen only at the edges.
//
// Every conversion from a real number to picoseconds is checked against kMaxTime_ps, the horizon of
// one simulation: a value beyond it (or NaN) throws TimeOverflow instead of overflowing the integer
// (undefined behaviour) or scheduling an event that never comes. Such values come only from absurd
// inputs (a bandwidth of a few bytes per second, a GPU of 1e-3 TFLOP/s fed millions of tokens); the
// replay turns TimeOverflow into an InputError naming the hardware file.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace epsim {

using Time_ps = std::int64_t;

constexpr Time_ps kPsPerNs = 1'000;
constexpr Time_ps kPsPerUs = 1'000'000;

/// The latest time (and the longest duration) a simulation may reach: 10^18 ps, about 11.6 days of
/// simulated time. It leaves a factor of 9 below the int64 limit, so that the sum of two times within
/// the horizon never overflows either.
constexpr Time_ps kMaxTime_ps = 1'000'000'000'000'000'000;

/// A duration or timestamp beyond kMaxTime_ps, or not a number.
class TimeOverflow : public std::overflow_error {
 public:
  explicit TimeOverflow(const std::string& what) : std::overflow_error(what) {}
};

/// "3.2e+07" for messages.
inline std::string short_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

/// `ps` rounded up to a whole picosecond; throws TimeOverflow unless it is in [-kMaxTime_ps,
/// kMaxTime_ps]. `what` names the quantity in the message ("GEMM time", "transfer of 1e+20 bytes").
inline Time_ps checked_ceil_ps(double ps, const char* what) {
  if (!(std::fabs(ps) <= static_cast<double>(kMaxTime_ps)))
    throw TimeOverflow(std::string(what) + " of " + short_number(ps * 1e-12) +
                       " s is beyond the simulation horizon of 1e+06 s (1e18 ps)");
  // Truncated, then raised when that fell below: std::ceil, for every value the check lets
  // through (all below 2^63 in magnitude), without a call into the maths library, which the
  // baseline x86-64 target makes of it (a wide layer rounds a flow's end several times).
  const Time_ps truncated = static_cast<Time_ps>(ps);
  return truncated + (static_cast<double>(truncated) < ps ? 1 : 0);
}

/// Rounds to the nearest picosecond; throws TimeOverflow beyond the horizon.
inline Time_ps us_to_ps(double us) {
  const double ps = us * static_cast<double>(kPsPerUs);
  if (!(std::fabs(ps) <= static_cast<double>(kMaxTime_ps)))
    throw TimeOverflow("a duration of " + short_number(us) + " us is beyond the simulation horizon of 1e+12 us");
  return static_cast<Time_ps>(std::llround(ps));
}
inline double ps_to_us(Time_ps ps) { return static_cast<double>(ps) / kPsPerUs; }

/// 1 GB/s = 1e9 bytes per 1e12 ps = 1e-3 bytes per picosecond.
inline double GBps_to_bytes_per_ps(double bw_GBps) { return bw_GBps * 1e-3; }

/// Time to move `bytes` at `bw_GBps`, rounded up so that a transfer never finishes early. Throws
/// TimeOverflow when it is beyond the horizon (a zero bandwidth included).
inline Time_ps transfer_time_ps(double bytes, double bw_GBps) {
  return checked_ceil_ps(bytes / GBps_to_bytes_per_ps(bw_GBps), "a transfer time");
}

}  // namespace epsim

// Simulated time. Every timestamp and duration in epsim is an integer count of picoseconds, so that
// event ordering is exact and runs are reproducible bit for bit; conversions to and from the units
// people write in configuration files (microseconds, GB/s) happen only at the edges.
#pragma once

#include <cmath>
#include <cstdint>

namespace epsim {

using Time_ps = std::int64_t;

constexpr Time_ps kPsPerNs = 1'000;
constexpr Time_ps kPsPerUs = 1'000'000;

/// Rounds to the nearest picosecond.
inline Time_ps us_to_ps(double us) { return static_cast<Time_ps>(std::llround(us * kPsPerUs)); }
inline double ps_to_us(Time_ps ps) { return static_cast<double>(ps) / kPsPerUs; }

/// 1 GB/s = 1e9 bytes per 1e12 ps = 1e-3 bytes per picosecond.
inline double GBps_to_bytes_per_ps(double bw_GBps) { return bw_GBps * 1e-3; }

/// Time to move `bytes` at `bw_GBps`, rounded up so that a transfer never finishes early.
inline Time_ps transfer_time_ps(double bytes, double bw_GBps) {
  return static_cast<Time_ps>(std::ceil(bytes / GBps_to_bytes_per_ps(bw_GBps)));
}

}  // namespace epsim

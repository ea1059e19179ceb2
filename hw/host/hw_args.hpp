// Option parsing for epsim-hw (no CUDA here, so it is unit-tested on any machine). Which options each
// command takes, its help and the dispatch are in hw_commands.hpp.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace epsim::hw {

struct HwArgs {
  std::string command;                 ///< "bench" or "run"
  std::vector<std::string> positional;  ///< bench: {kind}; run: {plans file}
  std::map<std::string, std::string> options;  ///< "--key value" and "-o FILE" (as "o")
  std::set<std::string> flags;                 ///< "--key" switches listed in `switches`
  std::string command_line;                    ///< as typed, for the measurement file's header

  bool has(const std::string& key) const { return options.count(key) > 0; }
  std::string text(const std::string& key, const std::string& fallback) const;
  std::int64_t integer(const std::string& key, std::int64_t fallback, std::int64_t lo, std::int64_t hi) const;
  /// A decimal number ("120", "0.5", "1e3") in [lo, hi]; NaN and infinities are refused.
  double number(const std::string& key, double fallback, double lo, double hi) const;
  /// Comma-separated list of integers, each in [lo, hi]; ranges "A:B" (inclusive, powers of two
  /// between A and B when written "A:B:pow2").
  std::vector<std::int64_t> integers(const std::string& key, const std::vector<std::int64_t>& fallback,
                                     std::int64_t lo, std::int64_t hi) const;
};

/// Throws std::invalid_argument with one line on an unknown option (not in `allowed` nor `switches`;
/// names without dashes, "o" is -o/--output), a missing value or a value given to a switch.
HwArgs parse_hw_args(const std::vector<std::string>& argv, const std::set<std::string>& allowed,
                     const std::set<std::string>& switches = {});

/// Byte sizes "4096,1M,1G" (K/M/G are powers of 1024), each > 0.
std::vector<std::int64_t> parse_sizes(const std::string& text);

/// Median of `values` (mean of the two middle ones for an even count); throws on empty input.
double median(std::vector<double> values);

}  // namespace epsim::hw

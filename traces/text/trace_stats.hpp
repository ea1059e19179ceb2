// `epsim trace stats FILE [--ep N] [--placement contiguous|interleaved]`: the header, one line per
// record (tokens, hottest expert / mean expert load, and with --ep the max / mean GPU load under
// static EP, see expert_load.hpp), then the totals and the median / min / max of each ratio over the
// records (the median of an even number of values is the mean of the middle two). Ratios are
// printed with 4 decimals, so the output is the same on every machine.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "traces/text/expert_load.hpp"

namespace epsim {

struct StatsOptions {
  std::uint32_t ep = 0;  ///< 0 = no GPU figures
  ExpertLayout layout = ExpertLayout::contiguous;
};

struct RatioSummary {
  double median = 0, min = 0, max = 0;
};
/// Over the values (empty -> zeros).
RatioSummary summarize(std::vector<double> values);

/// Throws InputError on a bad trace or an --ep outside 1..num_experts.
void write_trace_stats(const std::string& path, const StatsOptions& options, std::ostream& out);

}  // namespace epsim

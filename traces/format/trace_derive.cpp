#include "traces/format/trace_derive.hpp"

#include <algorithm>
#include <numeric>
#include <vector>

#include "sim/core/input_error.hpp"
#include "traces/format/rank_remap.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/format/trace_writer.hpp"

namespace epsim {
namespace {

std::uint32_t target(std::uint32_t wanted, std::uint32_t current) { return wanted == 0 ? current : wanted; }

/// Counts of one rank's row re-expressed for `to_experts` (a whole multiple or divisor of the row's size).
std::vector<std::uint64_t> reshape_experts(const std::vector<std::uint64_t>& row, std::uint32_t to_experts) {
  const std::size_t from = row.size();
  std::vector<std::uint64_t> out(to_experts, 0);
  if (to_experts >= from) {
    const std::size_t m = to_experts / from;
    for (std::size_t e = 0; e < from; ++e)
      for (std::size_t j = 0; j < m; ++j) out[e * m + j] = row[e] / m + (j < row[e] % m ? 1 : 0);
  } else {
    const std::size_t m = from / to_experts;
    for (std::size_t e = 0; e < from; ++e) out[e / m] += row[e];
  }
  return out;
}

/// `row` (summing to n K) re-expressed with `total` = n K' assignments, shares kept, every count <= cap.
std::vector<std::uint64_t> rescale_row(const std::vector<std::uint64_t>& row, std::uint64_t total, std::uint64_t cap) {
  const std::size_t e_count = row.size();
  std::vector<double> ideal(e_count, 0.0);
  const double sum = static_cast<double>(std::accumulate(row.begin(), row.end(), std::uint64_t{0}));
  if (sum <= 0 || total == 0) return std::vector<std::uint64_t>(e_count, 0);
  // Water-filling: experts whose share would pass the cap take the cap; the rest share what is left.
  std::vector<bool> capped(e_count, false);
  for (bool changed = true; changed;) {
    changed = false;
    double free_total = static_cast<double>(total), free_weight = 0;
    for (std::size_t e = 0; e < e_count; ++e) {
      if (capped[e]) free_total -= static_cast<double>(cap);
      else free_weight += static_cast<double>(row[e]);
    }
    for (std::size_t e = 0; e < e_count; ++e) {
      ideal[e] = capped[e] ? static_cast<double>(cap)
                           : (free_weight > 0 ? free_total * static_cast<double>(row[e]) / free_weight : 0.0);
      if (!capped[e] && ideal[e] > static_cast<double>(cap)) {
        capped[e] = true;
        changed = true;
      }
    }
  }
  // Largest remainder to whole counts: floors first, then one each by descending remainder (ties to
  // the lower expert), never past the cap.
  std::vector<std::uint64_t> out(e_count, 0);
  std::uint64_t assigned = 0;
  for (std::size_t e = 0; e < e_count; ++e) {
    out[e] = std::min(cap, static_cast<std::uint64_t>(ideal[e]));
    assigned += out[e];
  }
  std::vector<std::size_t> order(e_count);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return ideal[a] - static_cast<double>(out[a]) > ideal[b] - static_cast<double>(out[b]);
  });
  for (std::size_t i = 0; assigned < total && i < order.size(); ++i) {
    const std::size_t e = order[i];
    if (out[e] < cap && row[e] > 0) {
      ++out[e];
      ++assigned;
    }
  }
  // Rounding can leave a few assignments when the open experts were all at the cap: any open expert.
  for (std::size_t e = 0; assigned < total && e < e_count; ++e)
    while (assigned < total && out[e] < cap) {
      ++out[e];
      ++assigned;
    }
  return out;
}

}  // namespace

TraceHeader derive_header(const TraceHeader& header, const DeriveOptions& o, const std::string& trace_path) {
  const std::uint32_t experts = target(o.experts, header.num_experts);
  const std::uint32_t top_k = target(o.top_k, header.top_k);
  const std::uint32_t ranks = target(o.ranks, header.num_ranks);
  const std::string place = "derive";
  if (experts % header.num_experts != 0 && header.num_experts % experts != 0)
    throw InputError(trace_path, place,
                     "--experts " + std::to_string(experts) + " is neither a multiple nor a divisor of the trace's " +
                         std::to_string(header.num_experts) + " experts");
  if (top_k > experts)
    throw InputError(trace_path, place,
                     "--top-k " + std::to_string(top_k) + " exceeds the " + std::to_string(experts) + " experts");
  TraceHeader out = header;
  std::string rule;
  if (experts != header.num_experts) {
    rule += (experts > header.num_experts ? " experts split " : " experts merged ") + std::to_string(header.num_experts) +
            " -> " + std::to_string(experts) + ";";
    out.has_token_ids = false;
  }
  if (top_k != header.top_k) {
    rule += " top-k " + std::to_string(header.top_k) + " -> " + std::to_string(top_k) + " (shares kept, capped at a rank's tokens);";
    out.has_token_ids = false;
  }
  out.num_experts = experts;
  out.top_k = top_k;
  if (ranks != header.num_ranks) {
    out = remap_header(out, ranks, trace_path);
    rule += " ranks " + std::to_string(header.num_ranks) + " -> " + std::to_string(ranks) + ";";
  }
  if (!rule.empty()) out.provenance = header.provenance + "; derived by epsim trace derive:" + rule;
  return out;
}

TraceRecord derive_record(const TraceRecord& record, const TraceHeader& header, const DeriveOptions& o,
                          const std::string& trace_path) {
  const std::uint32_t experts = target(o.experts, header.num_experts);
  const std::uint32_t top_k = target(o.top_k, header.top_k);
  const std::uint32_t ranks = target(o.ranks, header.num_ranks);
  TraceRecord out = record;
  TraceHeader mid = header;
  if (experts != header.num_experts || top_k != header.top_k) {
    out.counts.assign(static_cast<std::size_t>(header.num_ranks) * experts, 0);
    out.token_src_rank.clear();
    out.token_experts.clear();
    for (std::uint32_t s = 0; s < header.num_ranks; ++s) {
      std::vector<std::uint64_t> row(header.num_experts);
      for (std::uint32_t e = 0; e < header.num_experts; ++e) row[e] = record.count(s, e, header.num_experts);
      const std::uint64_t tokens = std::accumulate(row.begin(), row.end(), std::uint64_t{0}) / header.top_k;
      std::vector<std::uint64_t> shaped = reshape_experts(row, experts);
      if (top_k != header.top_k) shaped = rescale_row(shaped, tokens * top_k, tokens);
      for (std::uint32_t e = 0; e < experts; ++e)
        out.counts[static_cast<std::size_t>(s) * experts + e] = static_cast<std::uint32_t>(shaped[e]);
    }
    mid.num_experts = experts;
    mid.top_k = top_k;
    mid.has_token_ids = false;
  }
  if (ranks != header.num_ranks) out = remap_ranks(out, mid, ranks, trace_path);
  return out;
}

void derive_trace(const std::string& path, const DeriveOptions& options, const std::string& out_path, bool overwrite) {
  TraceReader reader(path);
  const TraceHeader in = reader.header();
  const TraceHeader header = derive_header(in, options, path);
  TraceWriter writer(out_path, header, overwrite);
  TraceRecord record;
  while (reader.next(record)) writer.write(derive_record(record, in, options, path));
  writer.close();
}

}  // namespace epsim

#include "traces/format/rank_remap.hpp"

#include <string>
#include <vector>

#include "sim/core/input_error.hpp"
#include "traces/format/rank_slices.hpp"

namespace epsim {

bool ranks_remappable(std::uint32_t from_ranks, std::uint32_t to_ranks) {
  if (from_ranks == 0 || to_ranks == 0) return false;
  return from_ranks % to_ranks == 0 || to_ranks % from_ranks == 0;
}

namespace {

void require_remappable(std::uint32_t from, std::uint32_t to, const std::string& trace_path) {
  if (!ranks_remappable(from, to))
    throw InputError(trace_path.empty() ? "rank remap" : trace_path, trace_path.empty() ? "" : "header",
                     "cannot remap a trace with " + std::to_string(from) + " source ranks to " + std::to_string(to) +
                         " ranks: the target must be a multiple or a divisor of " + std::to_string(from));
}

}  // namespace

TraceHeader remap_header(const TraceHeader& header, std::uint32_t to_ranks, const std::string& trace_path) {
  require_remappable(header.num_ranks, to_ranks, trace_path);
  TraceHeader out = header;
  out.num_ranks = to_ranks;
  if (to_ranks != header.num_ranks) {
    std::string rule =
        to_ranks < header.num_ranks
            ? "merged " + std::to_string(header.num_ranks) + " source ranks into " + std::to_string(to_ranks) +
                  " (rank s -> s / " + std::to_string(header.num_ranks / to_ranks) + ")"
            : "split " + std::to_string(header.num_ranks) + " source ranks into " + std::to_string(to_ranks) +
                  " (each rank into " + std::to_string(to_ranks / header.num_ranks) +
                  (header.has_token_ids ? " contiguous slices of its tokens)"
                                        : " even shares of every count, remainders to the lowest)");
    out.rank_assignment += (out.rank_assignment.empty() ? "" : "; then ") + rule;
  }
  return out;
}

TraceRecord remap_ranks(const TraceRecord& record, const TraceHeader& header, std::uint32_t to_ranks,
                        const std::string& trace_path) {
  const std::uint32_t from = header.num_ranks;
  require_remappable(from, to_ranks, trace_path);
  if (to_ranks == from) return record;
  const std::uint32_t experts = header.num_experts;
  TraceRecord out;
  out.step = record.step;
  out.micro_batch = record.micro_batch;
  out.layer = record.layer;
  out.counts.assign(static_cast<std::size_t>(to_ranks) * experts, 0);
  out.token_experts = record.token_experts;

  if (to_ranks < from) {  // merge
    const std::uint32_t f = from / to_ranks;
    for (std::uint32_t s = 0; s < from; ++s)
      for (std::uint32_t e = 0; e < experts; ++e)
        out.counts[static_cast<std::size_t>(s / f) * experts + e] +=
            record.counts[static_cast<std::size_t>(s) * experts + e];
    out.token_src_rank.resize(record.token_src_rank.size());
    for (std::size_t t = 0; t < record.token_src_rank.size(); ++t) out.token_src_rank[t] = record.token_src_rank[t] / f;
    return out;
  }

  const std::uint32_t f = to_ranks / from;  // split
  if (!header.has_token_ids) {
    for (std::uint32_t s = 0; s < from; ++s)
      for (std::uint32_t e = 0; e < experts; ++e) {
        const std::uint32_t c = record.counts[static_cast<std::size_t>(s) * experts + e];
        for (std::uint32_t j = 0; j < f; ++j)
          out.counts[static_cast<std::size_t>(s * f + j) * experts + e] = c / f + (j < c % f ? 1 : 0);
      }
    return out;
  }
  std::vector<std::uint64_t> tokens_of(from, 0), seen(from, 0);
  for (std::uint32_t s : record.token_src_rank) ++tokens_of[s];
  const std::uint32_t k = header.top_k;
  out.token_src_rank.resize(record.token_src_rank.size());
  for (std::size_t t = 0; t < record.token_src_rank.size(); ++t) {
    const std::uint32_t s = record.token_src_rank[t];
    const std::uint32_t r = s * f + contiguous_slice_rank(seen[s]++, tokens_of[s], f);
    out.token_src_rank[t] = r;
    for (std::uint32_t j = 0; j < k; ++j)
      ++out.counts[static_cast<std::size_t>(r) * experts + record.token_experts[t * k + j]];
  }
  return out;
}

}  // namespace epsim

#include "traces/text/trace_show.hpp"

#include <algorithm>
#include <string>

#include "traces/format/trace_check.hpp"
#include "traces/format/trace_reader.hpp"
#include "traces/text/header_text.hpp"

namespace epsim {

namespace {

std::string padded(std::uint64_t v, std::size_t width) {
  std::string s = std::to_string(v);
  return std::string(width > s.size() ? width - s.size() : 0, ' ') + s;
}

void write_record(const TraceRecord& r, const TraceHeader& h, std::uint64_t index, const ShowOptions& o,
                  std::ostream& out) {
  const std::uint64_t tokens = record_num_tokens(r, h);
  out << "\nrecord " << index << ": step " << r.step << ", micro-batch " << r.micro_batch << ", layer " << r.layer
      << " (id " << h.layer_ids[r.layer] << "), tokens " << tokens << "\n";
  out << "counts (row = source rank, column = expert 0.." << h.num_experts - 1 << "):\n";
  std::uint32_t top = 0;
  for (std::uint32_t c : r.counts) top = std::max(top, c);
  const std::size_t width = std::to_string(top).size();
  const std::size_t rank_width = std::to_string(h.num_ranks - 1).size();
  for (std::uint32_t s = 0; s < h.num_ranks; ++s) {
    out << "  rank " << padded(s, rank_width) << ":";
    for (std::uint32_t e = 0; e < h.num_experts; ++e) out << " " << padded(r.count(s, e, h.num_experts), width);
    out << "\n";
  }
  if (!o.tokens) return;
  if (!h.has_token_ids) {
    out << "tokens: none recorded (counts-only trace)\n";
    return;
  }
  const std::uint64_t shown = std::min<std::uint64_t>(tokens, o.tokens_shown);
  out << "tokens (first " << shown << " of " << tokens << "; experts in stored order):\n";
  for (std::uint64_t t = 0; t < shown; ++t) {
    out << "  token " << t << ": rank " << r.token_src_rank[t] << ", experts";
    for (std::uint32_t j = 0; j < h.top_k; ++j) out << " " << r.token_experts[t * h.top_k + j];
    out << "\n";
  }
}

}  // namespace

void write_trace_show(const std::string& path, const ShowOptions& options, std::ostream& out) {
  TraceReader reader(path);
  const TraceHeader& h = reader.header();
  write_header_text(path, h, out);
  TraceRecord record;
  std::uint64_t index = 0;
  while (reader.next(record)) {
    if (index < options.records) write_record(record, h, index, options, out);
    ++index;
  }
  out << "\nrecords: " << index << " (" << std::min(index, options.records) << " shown)\n";
}

}  // namespace epsim

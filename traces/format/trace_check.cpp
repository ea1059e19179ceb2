#include "traces/format/trace_check.hpp"

#include <algorithm>
#include <tuple>

#include "traces/format/trace_layout.hpp"

namespace epsim {

namespace L = trace_layout;

std::string check_trace_header(const TraceHeader& h) {
  if (h.version != L::kVersion)
    return "unsupported format version " + std::to_string(h.version) + " (this epsim writes and reads version 1)";
  if (h.num_ranks < 1 || h.num_ranks > L::kMaxRanks)
    return "num_ranks " + std::to_string(h.num_ranks) + " is outside 1.." + std::to_string(L::kMaxRanks);
  if (h.num_experts < 1 || h.num_experts > L::kMaxExperts)
    return "num_experts " + std::to_string(h.num_experts) + " is outside 1.." + std::to_string(L::kMaxExperts);
  if (static_cast<std::uint64_t>(h.num_ranks) * h.num_experts > L::kMaxMatrixCells)
    return "num_ranks * num_experts = " + std::to_string(static_cast<std::uint64_t>(h.num_ranks) * h.num_experts) +
           " exceeds the format's limit of " + std::to_string(L::kMaxMatrixCells);
  if (h.top_k < 1 || h.top_k > h.num_experts || h.top_k > L::kMaxTopK)
    return "top_k " + std::to_string(h.top_k) +
           " must be between 1 and min(num_experts = " + std::to_string(h.num_experts) + ", " +
           std::to_string(L::kMaxTopK) + ")";
  if (h.num_layers < 1 || h.num_layers > L::kMaxLayers)
    return "num_layers " + std::to_string(h.num_layers) + " is outside 1.." + std::to_string(L::kMaxLayers);
  if (h.layer_ids.size() != h.num_layers)
    return "layer_ids has " + std::to_string(h.layer_ids.size()) + " entries but num_layers is " +
           std::to_string(h.num_layers);
  std::vector<std::uint32_t> ids = h.layer_ids;
  std::sort(ids.begin(), ids.end());
  auto dup = std::adjacent_find(ids.begin(), ids.end());
  if (dup != ids.end()) return "layer id " + std::to_string(*dup) + " appears twice in layer_ids";
  for (const std::string* s : {&h.source_format, &h.provenance, &h.rank_assignment})
    if (s->size() > L::kMaxStringBytes)
      return "a header string is " + std::to_string(s->size()) + " bytes long, more than the limit of " +
             std::to_string(L::kMaxStringBytes);
  return {};
}

std::uint64_t record_assignments(const TraceRecord& record) {
  std::uint64_t total = 0;
  for (std::uint32_t c : record.counts) total += c;
  return total;
}

std::uint64_t record_num_tokens(const TraceRecord& record, const TraceHeader& header) {
  if (header.has_token_ids) return record.token_src_rank.size();
  return header.top_k == 0 ? 0 : record_assignments(record) / header.top_k;
}

std::string record_key_text(const TraceRecord& r) {
  return "(step " + std::to_string(r.step) + ", micro-batch " + std::to_string(r.micro_batch) + ", layer " +
         std::to_string(r.layer) + ")";
}

bool record_key_less(const TraceRecord& a, const TraceRecord& b) {
  return std::tie(a.step, a.micro_batch, a.layer) < std::tie(b.step, b.micro_batch, b.layer);
}

std::string check_trace_record(const TraceRecord& r, const TraceHeader& h, std::uint64_t num_tokens,
                               std::vector<std::uint32_t>& scratch) {
  if (r.layer >= h.num_layers)
    return "layer index " + std::to_string(r.layer) + " is not below num_layers " + std::to_string(h.num_layers);
  const std::size_t cells = static_cast<std::size_t>(h.num_ranks) * h.num_experts;
  if (r.counts.size() != cells)
    return "count matrix has " + std::to_string(r.counts.size()) +
           " entries, expected num_ranks * num_experts = " + std::to_string(cells);
  if (h.has_token_ids && num_tokens > L::kMaxRecordTokens)
    return "the record has " + std::to_string(num_tokens) + " tokens with token ids, more than the format's limit of " +
           std::to_string(L::kMaxRecordTokens);
  const std::uint64_t bytes = L::kRecordFixedBytes + 4ull * cells + L::kChecksumBytes +
                              (h.has_token_ids ? num_tokens * (4ull + 2ull * h.top_k) : 0);
  if (bytes > L::kMaxRecordBytes)
    return "a record of " + std::to_string(bytes) + " bytes exceeds the format's limit of " +
           std::to_string(L::kMaxRecordBytes) + " bytes";
  const std::uint64_t assignments = record_assignments(r);
  if (!h.has_token_ids) {
    if (!r.token_src_rank.empty() || !r.token_experts.empty())
      return "record carries token arrays but the header says the trace has no token ids";
    if (assignments != num_tokens * h.top_k)
      return "counts sum to " + std::to_string(assignments) +
             ", expected num_tokens * top_k = " + std::to_string(num_tokens) + " * " + std::to_string(h.top_k);
    return {};
  }
  if (r.token_src_rank.size() != num_tokens)
    return "token_src_rank has " + std::to_string(r.token_src_rank.size()) + " entries, expected " +
           std::to_string(num_tokens) + " tokens";
  if (r.token_experts.size() != num_tokens * h.top_k)
    return "token_experts has " + std::to_string(r.token_experts.size()) +
           " entries, expected tokens * top_k = " + std::to_string(num_tokens * h.top_k);
  scratch.assign(cells, 0);
  for (std::size_t t = 0; t < num_tokens; ++t) {
    const std::uint32_t s = r.token_src_rank[t];
    if (s >= h.num_ranks)
      return "token " + std::to_string(t) + " has source rank " + std::to_string(s) + ", not below num_ranks " +
             std::to_string(h.num_ranks);
    const std::uint16_t* ids = &r.token_experts[t * h.top_k];
    for (std::uint32_t j = 0; j < h.top_k; ++j) {
      if (ids[j] >= h.num_experts)
        return "token " + std::to_string(t) + " routes to expert " + std::to_string(ids[j]) +
               ", not below num_experts " + std::to_string(h.num_experts);
      for (std::uint32_t i = 0; i < j; ++i)
        if (ids[i] == ids[j])
          return "token " + std::to_string(t) + " names expert " + std::to_string(ids[j]) + " twice in its top-k";
      ++scratch[static_cast<std::size_t>(s) * h.num_experts + ids[j]];
    }
  }
  for (std::uint32_t s = 0; s < h.num_ranks; ++s) {
    std::uint64_t row = 0, expected = 0;
    for (std::uint32_t e = 0; e < h.num_experts; ++e) {
      row += r.counts[static_cast<std::size_t>(s) * h.num_experts + e];
      expected += scratch[static_cast<std::size_t>(s) * h.num_experts + e];
    }
    if (row != expected)
      return "counts of source rank " + std::to_string(s) + " sum to " + std::to_string(row) +
             ", but its tokens * top_k = " + std::to_string(expected);
    for (std::uint32_t e = 0; e < h.num_experts; ++e) {
      const std::size_t i = static_cast<std::size_t>(s) * h.num_experts + e;
      if (r.counts[i] != scratch[i])
        return "count[" + std::to_string(s) + "][" + std::to_string(e) + "] = " + std::to_string(r.counts[i]) +
               " but the token arrays route " + std::to_string(scratch[i]) + " tokens there";
    }
  }
  return {};
}

}  // namespace epsim

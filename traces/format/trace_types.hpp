// What a gating trace holds, in memory. A trace is a header plus a stream of records, one per
// (step, micro-batch, MoE layer); each record has the count matrix c[s][e] (tokens that source rank s
// routes to expert e, counting every one of a token's top-k assignments) and, optionally, each token's
// source rank and top-k expert ids.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epsim {

struct TraceHeader {
  std::uint32_t version = 1;
  std::uint32_t num_ranks = 0;    ///< source ranks (EP ranks the tokens come from)
  std::uint32_t num_experts = 0;  ///< routed experts per layer
  std::uint32_t top_k = 0;
  std::uint32_t num_layers = 0;   ///< distinct MoE layers; record.layer indexes layer_ids
  std::vector<std::uint32_t> layer_ids;  ///< the model's own numbering of those layers
  bool has_token_ids = false;     ///< records carry per-token source rank and top-k ids
  std::string source_format;      ///< "synthetic", "flame-moe-csv", "olmoe-counts", "topk-jsonl"
  std::string provenance;         ///< free text: where the routing came from, licence, command
  std::string rank_assignment;    ///< how tokens got their source rank when the recording had none
};

struct TraceRecord {
  std::uint32_t step = 0;
  std::uint32_t micro_batch = 0;
  std::uint32_t layer = 0;  ///< index into TraceHeader::layer_ids
  /// Row-major num_ranks x num_experts.
  std::vector<std::uint32_t> counts;
  /// Present only when the header says has_token_ids: token_src_rank[t] and
  /// token_experts[t * top_k + j] for t < number of tokens.
  std::vector<std::uint32_t> token_src_rank;
  std::vector<std::uint16_t> token_experts;

  std::uint32_t count(std::uint32_t rank, std::uint32_t expert, std::uint32_t num_experts) const {
    return counts[static_cast<std::size_t>(rank) * num_experts + expert];
  }
  std::size_t num_tokens() const { return token_src_rank.size(); }
};

}  // namespace epsim

// Importer of the generic per-token top-k JSON-lines format (docs/trace-format.md, "epsim-topk-jsonl"):
// `epsim trace import topk-jsonl FILE [--ranks R] -o OUT`.
//
// Line 1 is a header object {"format":"epsim-topk-jsonl","version":1,"num_experts":E,"top_k":K,
// "num_ranks":R (optional),"layer_ids":[...] (optional),"provenance":"..." (optional)}; every further
// non-blank line is one token {"step":S (default 0),"micro_batch":M (default 0),"layer":ID,
// "experts":[K distinct ids],"src_rank":r (optional)}; other keys are ignored. "layer" is the model's
// layer id (one of layer_ids when given, else layer_ids = the sorted distinct ids of the file). The
// tokens of one (step, micro_batch, layer) are contiguous and these groups come in increasing order.
// src_rank is on every token or on none; without it, token t of a group of n goes to rank
// floor(t * R / n) with R from --ranks or num_ranks. The file is read twice (layer ids, then
// records); one group is in memory at a time.
#pragma once

#include <cstdint>
#include <string>

#include "traces/import/provenance_label.hpp"

namespace epsim {

struct TopkJsonlOptions {
  std::uint32_t ranks = 0;    ///< 0 = not given
  std::uint32_t experts = 0;  ///< for a file without header (else 0, or equal to the header's)
  std::uint32_t top_k = 0;    ///< likewise
  std::string field_step = "step", field_micro_batch = "micro_batch", field_layer = "layer",
              field_experts = "experts", field_rank = "src_rank";
  ProvenanceOptions labels;
};

/// Throws InputError naming the file and line.
void import_topk_jsonl(const std::string& jsonl_path, const TopkJsonlOptions& options, const std::string& out_path,
                       bool overwrite);
/// `ranks` = 0 when --ranks was not given; every other option at its default.
void import_topk_jsonl(const std::string& jsonl_path, std::uint32_t ranks, const std::string& out_path, bool overwrite);

}  // namespace epsim

// Importer of aggregated per-layer expert loads, the statistics serving and training frameworks keep
// for load balancing (docs/trace-format.md, section 3.5): DeepSeek EPLB's `weight` matrix (layers x
// logical experts), vLLM EPLB's `expert_load_pass` / `expert_load_window`, SGLang's stat-mode
// `logical_count` (forward passes x layers x experts), Megatron's per-expert token counts of every MoE
// layer. `epsim trace import expert-load FILE --ranks R --top-k K -o OUT`.
//
// FILE is JSON (a bare array, or an object holding it under --key or one of the usual names) or text
// (one layer per line, numbers separated by commas or white space; '#' comments; one header line of
// names allowed). A 2-D array [layer][expert] gives one record per layer (step 0); a 3-D array
// [pass][layer][expert] gives step p for pass p (a pass of all zeros, an unused slot of a circular
// buffer, is skipped). A physical_to_logical_map [layer][physical] beside the loads folds replicas
// into their logical expert. Counts are exact: integer rows are kept as they are (their sum must be
// a multiple of top_k), fractional rows are rounded by the largest-remainder rule, and the loads,
// which have no source rank, are spread over R ranks exactly (count_rounding.hpp); nothing is sampled.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/import/provenance_label.hpp"

namespace epsim {

struct ExpertLoadOptions {
  std::uint32_t ranks = 0;
  std::uint32_t top_k = 0;
  std::string key;                       ///< the JSON object's key holding the loads; "" = the usual names
  std::vector<std::uint32_t> layer_ids;  ///< empty = 0 .. L-1
  std::string source;                    ///< the framework named in the trace's source_format ("" = expert-load)
  ProvenanceOptions labels;
};

/// Throws InputError naming the file and the place (line, key path or array index).
void import_expert_load(const std::string& path, const ExpertLoadOptions& options, const std::string& out_path,
                        bool overwrite);

}  // namespace epsim

// Importer of the counts-level JSON-lines format "epsim-counts-jsonl" version 1 (docs/trace-format.md,
// section 3.4), the format of epsim's PyTorch recorder: exact token counts per (step, micro_batch,
// layer, source rank, expert). `epsim trace import counts-jsonl FILE... -o OUT`.
//
// Line 1 of every file is a header {"format":"epsim-counts-jsonl","version":1,"num_experts":E,
// "top_k":K,"num_ranks":R,"layer_ids":[...],"rank":r (optional),"provenance":"..." (required),
// "licence":"..." (optional)}; every further line is {"step":s,"micro_batch":m,"layer":L,"rank":r,
// "counts":[E non-negative integers summing to a multiple of K]}. Lines may come in any order and be
// spread over several files (per-rank files of one run), whose headers must agree on E, K, R and
// layer_ids; together the files hold each (step, micro_batch, layer, rank) exactly once and all R
// ranks of every (step, micro_batch, layer) present.
//
// A first pass checks every line and notes whether each file's lines come in (step, micro_batch,
// layer) order, as the recorder writes them. Such files are then merged as streams (one pending line
// per file and one record in memory: constant memory); files in any other order go through an index
// of 48 bytes per line (key, file, line number, byte offset, sum), sorted, and the lines of one record
// are read again at their offsets. Either way the counts of the whole run are never held.
#pragma once

#include <string>
#include <vector>

#include "traces/import/provenance_label.hpp"

namespace epsim {

/// Throws InputError naming the file and line of the first defect.
void import_counts_jsonl(const std::vector<std::string>& files, const ProvenanceOptions& labels,
                         const std::string& out_path, bool overwrite);

}  // namespace epsim

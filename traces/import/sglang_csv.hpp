// Importer of the per-rank CSV files of SGLang's expert-distribution recorder as SGLang 0.4.x dumps them
// (python/sglang/srt/managers/expert_distribution.py, `dump_record`: one file per rank,
// expert_distribution_rank{R}_timestamp{T}.csv, header `layer_id,expert_id,count`, one row per
// (layer, expert) the rank's tokens chose, experts never chosen left out).
// `epsim trace import sglang-csv FILE... --experts E --top-k K -o OUT`.
//
// Each file is one source rank: its rank is the number after "rank" in its name when every file's
// name has one (they must then be 0..R-1, each once), else its position on the command line. The
// layers are the distinct layer_id values of all files, sorted; the trace has one record per layer
// (step 0, micro-batch 0) with c[rank][expert] = the count of that rank's file, 0 where absent. The
// counts are exact; each rank's counts of a layer must sum to a multiple of K.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "traces/import/provenance_label.hpp"

namespace epsim {

struct SglangCsvOptions {
  std::uint32_t experts = 0;
  std::uint32_t top_k = 0;
  ProvenanceOptions labels;
};

/// Throws InputError naming the file and line.
void import_sglang_csv(const std::vector<std::string>& files, const SglangCsvOptions& options,
                       const std::string& out_path, bool overwrite);

}  // namespace epsim

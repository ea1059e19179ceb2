// Importer of the FLAME-MoE per-token routing CSVs (FLAME-MoE-Traces, CMU-FLAME, Apache-2.0; format in
// traces-raw/flame-moe-290m/SOURCE.md): `epsim trace import flame-csv DIR --ranks R -o OUT`.
//
// DIR is one batch directory, either
//  - an encoder batch: subfolders Layer_N, each with one .csv: a single micro-batch (0); or
//  - a decoder batch: subfolders 1st, 2nd, ... each with Layer_N subfolders: micro-batch = ordinal - 1.
// Layers sorted by N give layer_ids (every micro-batch must have the same layers). Every CSV row is a
// token; its top-k are the non-zero expert columns, stored in descending router-score order (ties by
// expert id); k must be the same for every row of every file. Step is 0. The recording has no source
// ranks: token t of an n-token CSV goes to rank floor(t * R / n) (contiguous equal slices), and the
// header's rank_assignment says so. Token ids are kept (has_token_ids = true).
#pragma once

#include <cstdint>
#include <string>

namespace epsim {

/// Throws InputError naming the directory, or the CSV file and line, on any problem.
void import_flame_csv(const std::string& batch_dir, std::uint32_t ranks, const std::string& out_path, bool overwrite);

}  // namespace epsim

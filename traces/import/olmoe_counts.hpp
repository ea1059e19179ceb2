// Importer of per-layer expert counts used as a popularity profile, in the JSON form of the OLMoE
// routing analysis (allenai/OLMoE; traces-raw/olmoe-routing-analysis/SOURCE.md) or any file of the same
// shape: `epsim trace import olmoe-counts FILE --ranks R --tokens-per-rank T --micro-batches M --seed S -o OUT`.
// Keys: "counts" (one row of num_experts non-negative integer or fractional counts per layer, used as
// sampling weights as they are), "num_experts" (else the length of the rows), "top_k_counted" or
// "top_k", "layers" or "layer_ids" (else 0..L-1); optional labels "model", "derived_from",
// "provenance", "licence" go into the trace's provenance, and --provenance / --licence replace them.
//
// The counts are aggregates over ~209k tokens, not a time series, so micro-batches are SAMPLED: for
// each micro-batch m < M and each stored layer, every one of the R*T tokens draws top_k distinct
// experts (top_k = the file's top_k_counted) with probability proportional to the layer's counts,
// sequentially without replacement (TopkSampler). Token t belongs to source rank floor(t / T)
// (contiguous equal slices; every rank gets T tokens). Step is 0. Counts only by default; token ids
// with `token_ids`. The random stream of record (m, layer index l) is Xoshiro256** seeded with
// mix_seed(S, {5, 0, m, l}), so the bytes depend only on the file, the options and the seed.
#pragma once

#include <cstdint>
#include <string>

#include "traces/import/provenance_label.hpp"

namespace epsim {

struct OlmoeImportOptions {
  std::uint32_t ranks = 8;
  std::uint32_t tokens_per_rank = 4096;
  std::uint32_t micro_batches = 1;
  std::uint64_t seed = 1;
  bool token_ids = false;
  ProvenanceOptions labels;  ///< the user's labels, replacing the file's
};

/// Throws InputError naming the JSON file (line and column for syntax errors, the key for others).
void import_olmoe_counts(const std::string& counts_json, const OlmoeImportOptions& options, const std::string& out_path,
                         bool overwrite);

}  // namespace epsim

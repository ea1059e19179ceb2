// Importer of the OLMoE routing-analysis per-layer expert counts (allenai/OLMoE, Apache-2.0; format
// in traces-raw/olmoe-routing-analysis/SOURCE.md) as a popularity profile:
// `epsim trace import olmoe-counts FILE --ranks R --tokens-per-rank T --micro-batches M --seed S -o OUT`.
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

namespace epsim {

struct OlmoeImportOptions {
  std::uint32_t ranks = 8;
  std::uint32_t tokens_per_rank = 4096;
  std::uint32_t micro_batches = 1;
  std::uint64_t seed = 1;
  bool token_ids = false;
};

/// Throws InputError naming the JSON file (line and column for syntax errors, the key for others).
void import_olmoe_counts(const std::string& counts_json, const OlmoeImportOptions& options, const std::string& out_path,
                         bool overwrite);

}  // namespace epsim

// The documented rule that gives a source rank to tokens whose recording has none: contiguous equal
// slices in token order. Token t of an n-token (micro-batch, layer) goes to rank floor(t * R / n), so
// every rank gets floor(n/R) or ceil(n/R) tokens and ranks hold consecutive tokens.
#pragma once

#include <cstdint>
#include <string>

namespace epsim {

/// floor(t * ranks / n) for t < n (exact integer arithmetic).
inline std::uint32_t contiguous_slice_rank(std::uint64_t t, std::uint64_t n, std::uint32_t ranks) {
  return static_cast<std::uint32_t>((t * ranks) / n);
}

/// The sentence importers store in TraceHeader::rank_assignment for this rule.
inline std::string contiguous_slices_text(std::uint32_t ranks) {
  return "contiguous equal slices in token order: token t of the n tokens of a (step, micro-batch, layer) "
         "record goes to source rank floor(t * R / n), R = " +
         std::to_string(ranks);
}

}  // namespace epsim

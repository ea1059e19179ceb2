// `epsim trace slice FILE [--steps A:B] [--micro-batches A:B] [--layers ID,ID,...] -o OUT`: the records
// of a trace whose step and micro-batch fall in half-open ranges [A, B) (either bound may be left out)
// and whose layer is one of the given ids (the model's numbering), streamed. The output keeps the
// selected layers in the input's order, so record.layer is renumbered; steps and micro-batches keep
// their numbers. The provenance records the selection.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epsim {

struct IndexRange {
  std::uint64_t begin = 0;
  std::uint64_t end = UINT64_MAX;  ///< exclusive
  bool contains(std::uint64_t v) const { return v >= begin && v < end; }
};

struct SliceOptions {
  IndexRange steps, micro_batches;
  std::vector<std::uint32_t> layer_ids;  ///< empty = every layer
};

/// "A:B", "A:", ":B" or "A" (= A:A+1) into a range; false when the text is not one of these.
bool parse_index_range(const std::string& text, IndexRange& out);

/// Throws InputError (a layer id the trace lacks, an empty selection of layers, a bad trace).
void slice_trace(const std::string& path, const SliceOptions& options, const std::string& out_path, bool overwrite);

}  // namespace epsim

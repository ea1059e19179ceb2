// `epsim trace merge A B... --by ranks|steps -o OUT`: several traces of one model into one, streamed
// (one record per input in memory).
//  - by ranks: the traces hold the same records (same (step, micro_batch, layer) sequence) for
//    different source ranks, as per-rank recordings do; the output has R = R_A + R_B + ... ranks, the
//    ranks of the i-th input numbered after those of the inputs before it, and each record's count
//    matrix is the inputs' matrices stacked (token ids too, when every input has them).
//  - by steps: the traces are consecutive stretches of one run with the same ranks; the records of
//    each input follow those of the one before it, its steps renumbered to start one after the last
//    step written (step' = last + 1 + step - first step of the input).
// Every input must have the same num_experts, top_k and layer_ids.
#pragma once

#include <string>
#include <vector>

namespace epsim {

enum class MergeBy { ranks, steps };

/// Throws InputError naming the input and record that does not fit.
void merge_traces(const std::vector<std::string>& inputs, MergeBy by, const std::string& out_path, bool overwrite);

}  // namespace epsim

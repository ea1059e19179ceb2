// Where each expert lives under static expert parallelism. Contiguous blocks (expert e on GPU
// e / (E/N)) are what FastMoE and Megatron do; interleaved (expert e on GPU e mod N) is LAER-MoE's
// default. Which experts share a GPU decides the token straggler, so the choice is an input.
#pragma once

#include "sim/hardware/experiment_spec.hpp"

namespace epsim {

/// Home GPU of `expert`. Requires num_experts % num_gpus == 0.
int home_gpu(int expert, int num_experts, int num_gpus, Placement placement);

const char* to_string(Placement placement);

}  // namespace epsim

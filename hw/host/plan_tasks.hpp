// The per-GPU part of a Plan, as the single-GPU hw runner executes it (`epsim-hw run`): its grouped
// GEMMs in plan order with their token counts, and the Copy Engine copies it sends, in a fixed order.
// Pure CPU logic, unit-tested without a GPU.
//
// What a GPU runs, per pass, in the simulator's order (sim/replay/layer_run.hpp):
//   forward:  copy_engine  the CE copies it sends: weight transfers (src_gpu == G, carrier copy_engine)
//                          and the second leg of two-phase token routes (via_gpu == G, carrier
//                          copy_engine, instance elsewhere; tokens * hidden * dtype bytes each way, the
//                          return leg of the combine is not a forward copy of G and is left out).
//                          Weights that leave at the layer's start (Transfer::start before_dispatch,
//                          prefetch) go first on the engine, then weights that wait for the planner
//                          (after_dispatch), then tokens;
//             compute      one grouped GEMM per GemmGroup of G, in gemm_order.
//   backward: compute      first each backward_first group's data-gradient GEMM and weight-gradient
//                          GEMM, then per other group the data-gradient GEMM (same order), then per
//                          other group the weight-gradient GEMM, each the same shapes as the forward
//                          GEMM;
//             copy_engine  gradient transfers with src_gpu == G on the copy engine (after the
//                          instance's weight-gradient GEMM, start after_dispatch or after_wgrad alike),
//                          and the input gradients of two-phase routes whose instance lives on G
//                          (after its data-gradient GEMM), in the order those GEMMs end.
// Forward outputs of routes whose instance lives on G leave after the instance's forward GEMM.
// EP-backend traffic (all-to-all kernels, the weights synchronised before the dispatch or restored
// before the gradient dispatch, prefetches, gradient reduces) is not run: a single GPU has no peers.
// For the same reason nothing arrives from another GPU and no planner runs, so the forward GEMMs keep
// plan order: a GemmGroup's on_arrival (which only moves a group ahead once its inputs from other GPUs
// are in) and after_planner (which waits for the node's planner) change nothing here, and the
// weights that wait for the planner leave at the start, behind the ones that do not.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/replay/timeline.hpp"

namespace epsim::hw {

struct GemmTask {
  Pass pass = Pass::forward;
  std::string name;                  ///< "gemm fwd g0", "gemm dgrad g0", "gemm wgrad g0"
  int group = 0;                     ///< its index in the plan's gemm_order[gpu]
  std::vector<int> instances;        ///< plan instance indices
  std::vector<std::int64_t> tokens;  ///< tokens per instance (same order); zeros are kept
};

struct CopyTask {
  Pass pass = Pass::forward;
  std::string name;  ///< the simulator's: "weights e3", "tokens", "outputs", "input grads", "grads e3"
  std::int64_t bytes = 0;
  int dst_gpu = 0;  ///< where the bytes would go; the single-GPU runner copies locally
  /// Index into GpuTasks::gemms of the GEMM whose end the copy waits for, -1 for none: outputs wait
  /// for their forward group, input gradients for their data-gradient GEMM, weight gradients for
  /// their weight-gradient GEMM; weights and outgoing tokens leave at the start.
  int after_gemm = -1;
};

struct GpuTasks {
  int gpu = 0;
  std::uint32_t step = 0, micro_batch = 0, layer = 0;
  std::vector<GemmTask> gemms;  ///< forward tasks first, then backward, each in execution order
  /// Forward then backward; within a pass ordered by after_gemm (forward copies at the start: early
  /// weights, weights after the planner, tokens).
  std::vector<CopyTask> copies;
};

/// Bytes of one token's activations: hidden * dtype_bytes.
std::int64_t token_bytes(int hidden, int dtype_bytes);

/// The tasks of `gpu` in `plan`; throws std::invalid_argument if gpu is outside [0, num_gpus).
GpuTasks extract_gpu_tasks(const Plan& plan, int gpu, int hidden, int dtype_bytes);

/// The tasks of `gpu` in each plan of a plans.jsonl file (extract_gpu_tasks), in file order. Plans are
/// read one at a time through for_each_plan (sim/validate/plans_file.hpp), the one plan reader, so
/// that the runner gets only plans that passed every check `epsim validate` makes without the model,
/// and holds one GPU's tasks, not every plan. `limit` > 0 stops after that many plans.
std::vector<GpuTasks> load_gpu_tasks(const std::string& path, std::size_t limit, int gpu, int hidden,
                                     int dtype_bytes);

}  // namespace epsim::hw

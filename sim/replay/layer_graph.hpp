// A Plan as the replay's tasks: one GemmTask per grouped GEMM with everything its launch waits for,
// and the Copy Engine token legs into it. Built once per layer; LayerRun (layer_run.hpp) executes it.
#pragma once

#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/replay/exchange_payload.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

/// One grouped GEMM of the Plan and the inputs its forward kernel waits for.
struct GemmTask {
  int gpu = 0;
  int group = 0;  ///< its index in the plan's gemm_order[gpu]
  std::vector<int> instances;  ///< the plan's instances it computes
  Time_ps work_ps = 0;
  double hbm_fraction = 0;  ///< HBM bandwidth share at full speed (slows under Copy Engine traffic)
  int input_stage = -1;     ///< last dispatch stage carrying its EP tokens; -1: none
  /// Its weights come on the EP backend: in the collective after the dispatch, in the one before it,
  /// or prefetched beside it (Transfer::start).
  bool ep_weights = false;
  bool synced_weights = false;
  bool prefetched_weights = false;
  int ce_weights = 0;        ///< Copy Engine weight copies into its instances (any start)
  bool on_arrival = false;   ///< GemmGroup::on_arrival
  bool after_planner = false;  ///< GemmGroup::after_planner
  bool backward_first = false;  ///< GemmGroup::backward_first
  /// Its backward waits for EP weights restored before the gradient dispatch (backward transfers with
  /// start before_dispatch).
  bool restored_weights = false;
  std::vector<int> reduces;  ///< the gradient reduces (LayerGraph::reduces) its weight gradient releases
  std::vector<int> stages;   ///< stages of its direct EP routes (their combine waits for it)
  std::vector<int> ce_legs;  ///< Copy Engine token copies into it
};

/// Tokens moved by Copy Engine from `from` to `to` for one task (aggregated). Each copy moves them in
/// the number format of its phase (tokens: dispatch, outputs: combine, and the gradients' too).
struct CeLeg {
  int from = 0;
  int to = 0;
  int task = 0;
  bool after_dispatch = false;  ///< `from` received them by EP first (two-phase route)
  double tokens = 0;
};

/// One expert's backward EP transfers with start after_wgrad: a collective on each GPU's
/// gradient-reduce stream. GPU g joins it once `wgrads_before[g]` weight-gradient GEMMs (the tasks
/// holding an instance of the expert there) have ended.
struct GradientReduce {
  int expert = 0;
  ExchangePayload payload;                 ///< its pairs, listed (a reduce is one column of n x n)
  std::vector<int> wgrads_before;          ///< per GPU
};

struct LayerGraph {
  std::vector<GemmTask> tasks;
  std::vector<std::vector<int>> tasks_of;  ///< per GPU, task ids in plan order
  std::vector<CeLeg> ce_legs;
  std::vector<int> task_of_instance;       ///< per plan instance
  std::vector<bool> has_on_arrival;        ///< per GPU: some task of it is on_arrival
  std::vector<bool> has_after_planner;     ///< per GPU: some task of it is after_planner
  std::vector<GradientReduce> reduces;     ///< by expert, ascending; only those that move bytes
};

/// The tasks of `plan` (valid: validate_plan found nothing) on `context`'s GPUs, with `stages`
/// exchange stages.
LayerGraph build_layer_graph(const SimContext& context, const Plan& plan, int stages);

/// Bytes of `plan`'s EP-backend transfers of `pass` that leave at `start`, [src][dst] (a GPU's
/// transfers to itself move nothing); empty when there are none.
std::vector<std::vector<double>> ep_transfer_bytes(const Plan& plan, int num_gpus, PassKind pass, TransferStart start);

}  // namespace epsim

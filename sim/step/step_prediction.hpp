// The step-level prediction of a run (docs/step.md): what one step costs end to end, where its time
// goes, and what imbalance in the MoE layers adds to it.
#pragma once

#include "sim/hardware/experiment_spec.hpp"

namespace epsim {

struct StepPrediction {
  StepSpec step;
  int layers = 0, dense_layers = 0, moe_layers = 0;
  std::size_t records = 0;         ///< replayed MoE-layer records the MoE part is the mean of
  double tokens_per_gpu = 0;       ///< tokens (decode: sequences) one rank runs through a step, mean
  double step_us = 0;              ///< with the experiment's balancer
  double balanced_step_us = 0;     ///< the same with every MoE layer under the oracle
  double non_moe_us = 0;           ///< attention, router, norms, dense layers, head
  double moe_compute_us = 0;       ///< the slowest GPU's MoE compute, summed over layers and passes
  double moe_layer_us = 0;         ///< one MoE layer with its non-MoE work, mean over records
  double balanced_moe_layer_us = 0;
  double dense_layer_us = 0;       ///< one leading dense layer
  double head_us = 0;              ///< the output head

  /// What communication and waiting add beyond the computation: the rest of the step.
  double moe_exposed_comm_us() const { return step_us - non_moe_us - moe_compute_us; }
  double imbalance_cost_us() const { return step_us - balanced_step_us; }
  double tokens_per_s_per_gpu() const { return step_us > 0 ? tokens_per_gpu / (step_us * 1e-6) : 0; }
  double balanced_tokens_per_s_per_gpu() const {
    return balanced_step_us > 0 ? tokens_per_gpu / (balanced_step_us * 1e-6) : 0;
  }
};

}  // namespace epsim

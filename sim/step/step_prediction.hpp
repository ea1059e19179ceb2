// The step-level prediction of a run (docs/step.md): what one step costs end to end, where its time
// goes, and how far its MoE layers are from the oracle's bound.
#pragma once

#include "sim/hardware/experiment_spec.hpp"

namespace epsim {

struct StepPrediction {
  StepSpec step;
  int layers = 0, dense_layers = 0, moe_layers = 0;
  std::size_t records = 0;         ///< replayed MoE-layer records the MoE part is the mean of
  double tokens_per_gpu = 0;       ///< tokens (decode: sequences) one rank runs through a step, mean
  double step_us = 0;              ///< with the experiment's balancer
  double bound_step_us = 0;        ///< a floor: every MoE layer at the oracle's bound (docs/step.md)
  double non_moe_us = 0;           ///< attention, router, norms, dense layers, head
  double moe_compute_us = 0;       ///< the slowest GPU's MoE compute, summed over layers and passes
  double moe_layer_us = 0;         ///< one MoE layer with its non-MoE work, mean over records
  double bound_moe_layer_us = 0;
  double dense_layer_us = 0;       ///< one leading dense layer
  double head_us = 0;              ///< the output head

  /// What communication and waiting add beyond the computation: the rest of the step.
  double moe_exposed_comm_us() const { return step_us - non_moe_us - moe_compute_us; }
  /// What imbalance, the balancer's costs and the traffic it did not avoid add over the bound.
  double gap_to_bound_us() const { return step_us - bound_step_us; }
  double tokens_per_s_per_gpu() const { return step_us > 0 ? tokens_per_gpu / (step_us * 1e-6) : 0; }
  double bound_tokens_per_s_per_gpu() const {
    return bound_step_us > 0 ? tokens_per_gpu / (bound_step_us * 1e-6) : 0;
  }
};

}  // namespace epsim

// The balancer interface: one (step, micro-batch, layer) of routing counts in, one Plan out. A
// balancer may keep state between calls (history, placements made ahead of time); the replay feeds
// it records in trace order. It never looks at timing: that is the engine's job.
#pragma once

#include "sim/hardware/experiment_spec.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/plan/plan.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

/// What every balancer may know besides the counts.
struct BalancerContext {
  int num_gpus = 0;       ///< the EP degree: GPUs 0..num_gpus-1 each hold num_experts/num_gpus experts
  int gpus_per_node = 0;  ///< NVLink domain size
  Placement placement = Placement::contiguous;
  const ModelSpec* model = nullptr;
  const HardwareSpec* hardware = nullptr;
};

/// An empty Plan for `record` made by `balancer` on `num_gpus` GPUs: its identity set and one (empty)
/// GEMM list per GPU, ready for the balancer to fill.
inline Plan start_plan(const char* balancer, const TraceRecord& record, int num_gpus) {
  Plan plan;
  plan.balancer = balancer;
  plan.step = record.step;
  plan.micro_batch = record.micro_batch;
  plan.layer = record.layer;
  plan.num_gpus = num_gpus;
  plan.gemm_order.resize(static_cast<std::size_t>(num_gpus));
  return plan;
}

class Balancer {
 public:
  virtual ~Balancer() = default;
  /// `record.counts` is num_gpus x model.num_experts (the replay remaps trace ranks beforehand).
  virtual Plan plan(const TraceRecord& record, const BalancerContext& context) = 0;
  /// Whether the plan just made is one of this balancer's steady state (its history windows full, its
  /// first re-balance made) rather than a warm-up plan. Summaries report warm-up plans apart from the
  /// rest, and n/a when none is steady. Default: every plan is.
  virtual bool last_plan_steady() const { return true; }
};

}  // namespace epsim

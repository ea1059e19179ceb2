// FEPLB (arXiv 2604.19654): two-phase dispatch. Phase 1 is static EP unchanged: every token goes over
// the EP backend to its expert's home GPU. Each GPU then computes its static experts while a CPU
// scheduler per node decides where its few dynamic experts (each GPU's most loaded ones in this
// micro-batch) are computed; phase 2 carries a moved expert's tokens and a copy of its weights to a
// less loaded GPU of the same node on the Copy Engine (no SMs), its outputs come back the same way, and
// in the backward its weight gradients return to the home GPU, which sums them into its own.
// Undisclosed details (which experts are dynamic, granularity, gain threshold, slots, scheduler time,
// gradient precision) are parameters; see docs/balancers.md (FEPLB) and feplb_scheduler.hpp.
#pragma once

#include <memory>

#include "sim/balancers/balancer.hpp"
#include "sim/balancers/feplb_scheduler.hpp"
#include "sim/config/config_map.hpp"
#include "sim/hardware/dtype.hpp"

namespace epsim {

/// Host time of one node's planner for the GLM-5-like case (8 GPUs, 128 experts, 2 dynamic per GPU):
/// reduce the count matrix to the node's expert loads, then schedule. Median of
/// BM_FeplbNodePlanner/8 in tests/bench/feplb_planner_bench.cpp (2.1 us CPU), rounded up to whole
/// microseconds. A constant, not a run-time measurement, so that every run of a plan is reproducible.
constexpr double kFeplbDefaultPlannerTimeUs = 3.0;

struct FeplbParams {
  FeplbSchedulerParams scheduler;
  double planner_time_us = kFeplbDefaultPlannerTimeUs;  ///< host time of one node's planner
  /// Number format of the weight gradients a receiver returns to the home GPU. FP32: GLM-5's training
  /// scripts accumulate and reduce gradients in FP32 (THUDM/slime, --accumulate-allreduce-grads-in-fp32).
  Dtype gradient_dtype = Dtype::fp32;
};

/// Bytes of one expert's weight gradients in `dtype`: its parameters times the element size.
std::int64_t feplb_gradient_bytes(const ModelSpec& model, Dtype dtype);

class Feplb : public Balancer {
 public:
  explicit Feplb(FeplbParams params) : params_(params), scheduler_(params.scheduler) {}
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  FeplbParams params_;
  FeplbScheduler scheduler_;
};

/// Reads dynamic_experts_per_gpu, dynamic_slots_per_gpu, granularity, min_gain, planner_time_us and
/// gradient_dtype (all optional); the caller's finish() rejects any other key.
std::unique_ptr<Balancer> make_feplb(ConfigMap& params);

}  // namespace epsim

// FEPLB (arXiv 2604.19654): two-phase dispatch. Phase 1 is static EP unchanged: every token goes over
// the EP backend to its expert's home GPU. Then a CPU scheduler per node, running on the host while
// the GPUs compute their static experts, moves tokens of each GPU's few most loaded ("dynamic")
// experts to less loaded GPUs of the same node; phase 2 carries those tokens and the dynamic experts'
// weights there on the Copy Engine (no SMs), and the weight gradients come back the same way in the
// backward pass. Undisclosed details (scheduler, dynamic experts and slots per GPU, scheduler time)
// are parameters; see docs/balancers.md (FEPLB) and feplb_scheduler.hpp.
#pragma once

#include <memory>

#include "sim/balancers/balancer.hpp"
#include "sim/balancers/feplb_scheduler.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

/// Host time of one node's planner for the GLM-5-like case (8 GPUs, 128 experts, 2 dynamic per GPU):
/// reduce the count matrix to the node's expert loads, then schedule. Median of
/// BM_FeplbNodePlanner/8 in tests/bench/feplb_planner_bench.cpp (2.1 us CPU), rounded up to whole
/// microseconds. A constant, not a run-time measurement, so that every run of a plan is reproducible.
constexpr double kFeplbDefaultPlannerTimeUs = 3.0;

struct FeplbParams {
  FeplbSchedulerParams scheduler;
  double planner_time_us = kFeplbDefaultPlannerTimeUs;  ///< host time of one node's planner
};

class Feplb : public Balancer {
 public:
  explicit Feplb(FeplbParams params) : params_(params), scheduler_(params.scheduler) {}
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  FeplbParams params_;
  FeplbScheduler scheduler_;
};

/// Reads dynamic_experts_per_gpu, dynamic_slots_per_gpu and planner_time_us (all optional); the
/// caller's finish() rejects any other key.
std::unique_ptr<Balancer> make_feplb(ConfigMap& params);

}  // namespace epsim

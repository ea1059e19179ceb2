// DeepSeek EPLB (`deepseek-ai/EPLB`) as deployed: replicas placed ahead of time from the history of
// expert loads, re-balanced periodically. For each MoE layer the balancer keeps the expert loads of
// the layer's last `window_steps` trace steps; at the first record of every `rebalance_every_steps`-th
// step it runs rebalance_experts (eplb_algorithm.hpp) on their sum and the new placement takes effect
// in that record (vLLM counts its EPLB window and interval in engine steps the same way). A schedule
// in records instead (`period`, `window`) serves traces whose time runs along the micro-batch index.
// Until the first re-balance the layer runs the static placement (home experts only, the redundant
// slots empty). The placement has P = E + N * redundant_experts_per_gpu physical slots, P / N per GPU.
// Tokens are split evenly over an expert's replicas, per source rank. When the placement changes, the
// weights of every copy that was not on its GPU before come from the expert's home GPU on the EP
// backend before the dispatch of that record (the replicas are synchronised before they serve);
// otherwise nothing moves besides tokens. The planner runs on the host, asynchronously:
// planner_time_us (default 0) is charged only on the records where a new placement takes effect.
// See docs/balancers.md (DeepSeek EPLB).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

enum class EplbPolicy {
  auto_select,   ///< EPLB's own rule: hierarchical when num_groups > 1 and num_groups % nodes == 0
  hierarchical,  ///< groups packed onto nodes, replicas stay in their node
  global,        ///< hierarchical with one group and one node
};

/// What the re-balance period and the history window count.
enum class EplbSchedule {
  steps,    ///< trace steps (a training step, or a serving engine step): as deployed
  records,  ///< records of the layer (micro-batches): for traces whose time is the micro-batch index
};

/// vLLM's EPLBConfig defaults (window_size 1000 and step_interval 3000 engine steps).
constexpr int kEplbDefaultWindowSteps = 1000;
constexpr int kEplbDefaultRebalanceSteps = 3000;

struct DeepseekEplbParams {
  int redundant_experts_per_gpu = 1;  ///< redundant slots per GPU: P = E + N * this
  int num_groups = 1;                 ///< expert groups (DeepSeek-V3's group-limited routing); must divide E
  EplbPolicy policy = EplbPolicy::auto_select;
  EplbSchedule schedule = EplbSchedule::steps;
  int window = kEplbDefaultWindowSteps;     ///< steps (or records) of the layer's history summed into the estimate
  int period = kEplbDefaultRebalanceSteps;  ///< re-balance every `period` steps (or records) of the layer
  double planner_time_us = 0.0;  ///< host time charged on re-plan records (0: asynchronous, off the path)
};

class DeepseekEplb : public Balancer {
 public:
  explicit DeepseekEplb(DeepseekEplbParams params);
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

  /// The first step (or record, with the records schedule) of each layer, counted from 0, that runs a
  /// placement made from a full window of history: the first re-balance at or after `window`,
  /// period * max(1, ceil(window / period)). Everything before it is warm-up: the static placement,
  /// or one made from a shorter history.
  int warmup_periods() const;
  /// The same in records of each layer: warmup_periods() with the records schedule; with the steps
  /// schedule, warmup_periods() x the records a layer had in one step (its micro-batches), as seen in
  /// the replay so far (the most of any layer's steps; 1 before any record). Exact once the trace's
  /// first step has been replayed, when every step has the same micro-batches.
  int warmup_records() const;
  /// Whether the plan made last ran a placement made from a full window of history.
  bool last_plan_steady() const override { return last_plan_steady_; }

 private:
  struct LayerState {
    std::vector<std::vector<std::int64_t>> history;  ///< expert loads of the last `window` periods, oldest first
    std::vector<std::int64_t> current;               ///< expert loads of the step (or record) under way
    std::int64_t periods_seen = 0;                   ///< steps (or records) begun, the current one included
    std::uint32_t step = 0;                          ///< the trace step of the layer's last record
    int records_in_step = 0;                         ///< records of the layer in the current step
    std::vector<int> phy2log;  ///< current placement, P slots; empty while static
    bool steady = false;       ///< the placement was made from a full window
  };
  DeepseekEplbParams params_;
  std::map<std::uint32_t, LayerState> layers_;
  int records_per_step_ = 1;  ///< the most records one layer had in one step so far
  bool last_plan_steady_ = false;
};

/// Reads redundant_experts_per_gpu, num_groups, policy, rebalance_every_steps and window_steps (the
/// steps schedule) or period and window (the records schedule, both default 8), planner_time_us (all
/// optional); keys of both schedules together are an InputError.
std::unique_ptr<Balancer> make_deepseek_eplb(ConfigMap& params);

}  // namespace epsim

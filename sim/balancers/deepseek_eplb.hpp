// DeepSeek EPLB (`deepseek-ai/EPLB`) as a training balancer: replicas placed ahead of time from the
// history of expert loads. For each MoE layer the balancer keeps the expert loads of the layer's last
// `window` records; every `period` records of that layer it runs rebalance_experts (eplb_algorithm.hpp)
// on their sum and the new placement takes effect in that record. Until the first re-plan the layer
// runs the static placement (home experts only, the redundant slots empty). The placement has
// P = E + N * redundant_experts_per_gpu physical slots, P / N per GPU. Tokens are split evenly over an
// expert's replicas, per source rank. When the placement changes, the weights of every instance that
// was not on its GPU before come from the expert's home GPU on the EP backend in that record (forward
// transfers); otherwise nothing moves besides tokens. The planner runs on the host, asynchronously:
// planner_time_us (default 0) is charged only on the records where a new placement takes effect.
// See docs/balancers-eplb-laer.md.
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

struct DeepseekEplbParams {
  int redundant_experts_per_gpu = 1;  ///< redundant slots per GPU: P = E + N * this
  int num_groups = 1;                 ///< expert groups (DeepSeek-V3's group-limited routing); must divide E
  EplbPolicy policy = EplbPolicy::auto_select;
  int window = 8;                ///< records of the layer's history summed into the load estimate
  int period = 8;                ///< re-plan every `period` records of the same layer
  double planner_time_us = 0.0;  ///< host time charged on re-plan records (0: asynchronous, off the path)
};

class DeepseekEplb : public Balancer {
 public:
  explicit DeepseekEplb(DeepseekEplbParams params);
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;

 private:
  struct LayerState {
    std::vector<std::vector<std::int64_t>> history;  ///< expert loads of the last `window` records, oldest first
    std::int64_t records_seen = 0;
    std::vector<int> phy2log;  ///< current placement, P slots; empty while static
  };
  DeepseekEplbParams params_;
  std::map<std::uint32_t, LayerState> layers_;
};

/// Reads redundant_experts_per_gpu, num_groups, policy, window, period, planner_time_us (all optional).
std::unique_ptr<Balancer> make_deepseek_eplb(ConfigMap& params);

}  // namespace epsim

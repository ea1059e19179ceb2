// LAER-MoE (ASPLOS'26, arXiv 2602.11686; `PKU-DAIR/Hetu-Galvatron`, branch laer-moe): Fully Sharded
// Expert Parallel (FSEP). Every expert's weights are sharded N ways over all GPUs; each GPU restores,
// by an all-to-all gather of shards prefetched at the layer's start, the `capacity_per_gpu` expert
// copies the current layout gives it, and their gradients go back by reduce-scatter after the
// backward, in every layer of every micro-batch. A CPU planner, asynchronous, picks the layout from the
// layer's recent history (the port below of `csrc/greedy_balancer.cpp:
// greedy_load_balancing_heuristic_complete`): replica-count candidates (even, precise), a greedy
// placement of each, a cost model 4 x sum of communication + 3 x max compute, cheapest wins. Tokens go
// to the replicas in the source's own node, split evenly (by multiplicity); only when the node has
// none, evenly over the remote ones. See docs/balancers-eplb-laer.md.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

/// The planner's cost model (greedy_balancer.cpp: generate_smart_routing_and_calculate_time).
struct LaerCostModel {
  double token_bytes = 0;       ///< M_token: bytes of one token's hidden state
  double comp_s_per_token = 0;  ///< v_comp: forward expert compute per token, seconds
  double intra_GBps = 216.269;  ///< V_intra (configs/network_config.json)
  double inter_GBps = 88.9539;  ///< V_inter
  bool checkpoint = false;      ///< true: 4 x max compute (the source's default), false: 3 x
};

/// copies[e][g]: copies of expert e restored on GPU g (the source allows more than one).
using LaerLayout = std::vector<std::vector<int>>;

/// allocate_expert_replicas_precise: replica counts summing to at most devices * capacity. With room
/// for one copy per node of every expert, every expert starts with `nodes` copies and grows in
/// multiples of `nodes`; otherwise it starts with one and grows by one. Hottest load/replicas first,
/// ties to the lowest expert index.
std::vector<int> laer_precise_replicas(const std::vector<double>& loads, int devices, int capacity, int nodes);

/// get_greedy_placement: replicas by load/replicas descending (stable: ties by expert index), each to
/// a GPU with a free slot, preferring GPUs of the nodes with the fewest copies of the expert, then the
/// least-loaded GPU (lowest index among equals). Throws std::runtime_error when capacity runs out.
LaerLayout laer_greedy_placement(const std::vector<int>& replicas, const std::vector<double>& loads, int devices,
                                 int gpus_per_node, int capacity);

/// The modelled time of `layout` for the history `tokens[s][e]` (seconds): tokens routed by the
/// node-local even split, comm_s = sum over destinations of bytes / bw(s, d) (1e9 GB/s to itself),
/// comp_g = tokens * v_comp, T = 4 * sum_s comm_s + (3 + checkpoint) * max_g comp_g.
double laer_layout_cost(const std::vector<std::vector<double>>& tokens, const LaerLayout& layout, int gpus_per_node,
                        const LaerCostModel& cost);

/// The whole planner: candidates even (when devices * capacity is a multiple of E) then precise, each
/// placed greedily and costed; the first cheapest wins.
LaerLayout laer_plan_layout(const std::vector<std::vector<double>>& tokens, int capacity, int gpus_per_node,
                            const LaerCostModel& cost);

/// How the FSEP shard gathers and gradient reduce-scatters are charged.
enum class LaerTraffic {
  always,   ///< FSEP as LAER runs it: every copy gathered and every copy's gradients reduce-scattered,
            ///< in every record
  changes,  ///< a what-if with resident copies: gathers only for copies new on their GPU, reduce-scatter
            ///< only for replicated experts
};

/// The default capacity: 2 E / N (at least 1), the smallest multiple of E / N for which the
/// planner's two candidates (even, precise) both exist, so that its cost model chooses between them.
int laer_default_capacity(int num_experts, int num_gpus);

struct LaerMoeParams {
  int capacity_per_gpu = 0;  ///< C_e, expert copies a GPU restores; 0: laer_default_capacity (2 E / N)
  int window = 5;            ///< records of the layer summed into E[device][expert] (history_capacity = 5)
  int period = 1;            ///< re-plan every `period` records of the same layer
  LaerTraffic traffic = LaerTraffic::always;
  int grad_bytes_per_param = 0;  ///< gradient reduce-scatter bytes per parameter (YAML gradient_dtype); 0: dtype_bytes
  bool checkpoint = false;       ///< the cost model's (3 + ckpt) factor
  double comp_us_per_token = 0;  ///< v_comp; 0: expert FLOPs per token / the GPU's bf16 peak
  double intra_GBps = 0;         ///< V_intra; 0: the hardware's NVLink port bandwidth
  double inter_GBps = 0;         ///< V_inter; 0: the hardware's IB NIC bandwidth
  double planner_time_us = 0;    ///< host time charged on re-plan records (0: asynchronous)
};

class LaerMoe : public Balancer {
 public:
  explicit LaerMoe(LaerMoeParams params);
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;
  /// Steady once the layout in use was planned from a full window of the layer's history.
  bool last_plan_steady() const override { return last_plan_steady_; }

 private:
  struct LayerState {
    std::deque<std::vector<std::uint32_t>> history;  ///< N x E counts of the last `window` records, flattened
    std::vector<std::int64_t> history_sum;           ///< their element-wise sum
    std::int64_t records_seen = 0;
    std::vector<int> layout;  ///< current layout, copies of e on g at [e * N + g]; empty while static
    bool layout_from_full_window = false;
  };
  LaerMoeParams params_;
  bool last_plan_steady_ = false;
  std::map<std::uint32_t, LayerState> layers_;
  /// Working space reused by every plan() (sized on first use), so that planning allocates little
  /// besides the Plan itself.
  std::vector<double> tokens_;        ///< the window's counts, expert by expert: [e * N + s]
  std::vector<int> layout_before_;    ///< the layout replaced by this record's re-plan
  std::vector<int> instance_of_;      ///< [e * N + g]: the plan's instance of e on g, or -1
  std::vector<int> holder_first_, holder_gpu_;  ///< the GPUs holding each expert (plan()'s scratch)
  std::vector<int> holder_next_;  ///< per expert, its first holder in the node being listed
  std::vector<int> gpu_first_, gpu_next_;  ///< per GPU, its first instance and its next to number
  std::vector<int> target_first_, target_gpu_, target_copies_;
  std::vector<std::int64_t> weight_shard_, grad_shard_;
};

/// Reads capacity_per_gpu, window, period, traffic, gradient_dtype, checkpoint,
/// comp_us_per_token, intra_GBps, inter_GBps and planner_time_us (all optional).
std::unique_ptr<Balancer> make_laer_moe(ConfigMap& params);

}  // namespace epsim

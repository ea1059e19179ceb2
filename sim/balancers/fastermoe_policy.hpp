// FasterMoE's shadow policy (PPoPP'22; laekov/fastmoe v1 fmoe/fastermoe/shadow_policy.py,
// global_policy): a greedy trade of weight traffic against the busiest load. With loads sorted
// B_(1) >= B_(2) >= ..., and a = 3 * t_comp + 4 * t_feat (three GEMM passes, forward plus two
// backward, and four all-to-alls, per token):
//   lat_0 = a * B_(1);   lat_k = a * B_(k+1) + k * t_model   (B beyond the list = 0)
// the k-th heaviest is shadowed (its weights sent to every GPU) while lat_k < lat_(k-1); the loop stops
// at the first non-improvement. It runs on every forward pass on the exact counts.
//
// Two readings of "load", both kept because they disagree:
//   paper: per-expert loads l_e = sum_s c[s][e], the paper's intent;
//   code:  what v1 ships: the gathered [N, E] count matrix summed over the expert axis, i.e. per-SENDER
//          totals B_s = sum_e c[s][e], then used as if indexed by expert (index s shadows expert s).
//          With equal per-rank batch sizes every B_s is equal and nothing is ever shadowed. v1's loop
//          also never reaches the last entry (`if i + 1 == numel: break`), which we reproduce.
//   prototype: the worker-level policy of the PPoPP'22 artifact (thu-pacman/FasterMoE
//          fmoe/transformer.py, _gen_policy, on with FMOE_ENABLE_DYNREP=1), which the paper's
//          experiments ran: it shadows whole workers (all experts homed on a GPU) in descending order of
//          their loads; after shadowing a worker its tokens are computed by their senders, and the new
//          busiest load is recomputed exactly (see prototype_shadow_workers).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/balancers/balancer.hpp"

namespace epsim {

enum class ShadowPolicy { paper, code, prototype, none };

const char* to_string(ShadowPolicy policy);

/// The policy's latency model, per token or per expert, in picoseconds.
struct ShadowCosts {
  double comp_ps_per_token = 0;    ///< t_comp: one token's forward FLOPs through one expert, achieved rate
  double feat_ps_per_token = 0;    ///< t_feat: one token's hidden state over the network
  double model_ps_per_expert = 0;  ///< t_model: one expert's weights over the network
};

/// The network bandwidth the policy assumes, GB/s after protocol efficiency: the InfiniBand NIC when
/// the EP group spans more than one node (num_gpus > gpus_per_node), else the NVLink port.
double shadow_net_bw_GBps(const BalancerContext& context);

/// t_comp, t_feat and t_model re-derived from the hardware and model instead of v1's V100 / 50 Gb/s /
/// fp32 defaults. t_comp uses the GEMM efficiency at the padded mean expert load of this record.
ShadowCosts shadow_costs(const TraceRecord& record, const BalancerContext& context);

/// The greedy loop over `loads` (indexed by whatever the caller means): the indices shadowed, heaviest
/// first, at most `max_shadows`. Ties sort by ascending index; a tie at B_(k) = B_(k+1) stops the loop
/// before either entry is shadowed anyway, so no result depends on the tie order.
std::vector<int> greedy_shadow(const std::vector<std::int64_t>& loads, const ShadowCosts& costs,
                               std::size_t max_shadows);

/// The prototype's worker-level loop. `load[w]`: tokens GPU w computes without shadows; `returned[w][s]`:
/// tokens sender s has for the experts homed on w (s = w included); `experts_per_worker`: E / N.
/// With a = 3 t_comp + 4 t_feat and t_shadow = 2 * experts_per_worker * t_model (a worker's weights
/// broadcast and its gradients reduced), workers sorted by load (ties: ascending index):
///   lat_base = a * max_w load[w]
///   for i = 0, 1, ...: shadow the i-th worker: its load -> 0, every sender s += returned[w_i][s];
///       lat_i = 3 t_comp * max(load) + (i + 1) * t_shadow   (no token term, as in the artifact)
///       keep the lowest lat_i; stop at the first lat_i above it (an equal one goes on)
///   the workers w_0 .. w_(i-1) are shadowed if lat_base > the lowest lat, where i is where the loop
///   stopped (the last index when it never stopped: the last worker is then never shadowed).
/// The artifact multiplies its FLOPs by the element size too (12 alpha d^2 s / bw_mm); epsim's t_comp is
/// FLOPs over the achieved rate. Returns the shadowed workers, ascending.
std::vector<int> prototype_shadow_workers(const std::vector<std::int64_t>& load,
                                          const std::vector<std::vector<std::int64_t>>& returned,
                                          const ShadowCosts& costs, int experts_per_worker);

/// The expert ids `policy` shadows for this record, ascending. Empty for one GPU (no network to save).
std::vector<int> shadowed_experts(ShadowPolicy policy, const TraceRecord& record,
                                  const BalancerContext& context);

}  // namespace epsim

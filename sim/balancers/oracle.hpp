// The oracle: a lower bound on the layer time that no plan for the same work on the same hardware can
// beat in epsim's engine, whatever its balancer. It is computed, not simulated: no plan reaches it in
// general, and it is what every balancer's layer time is measured against (gap_to_bound_us).
//
// The bound, per pass (forward; backward), with the passes adding up because the backward starts
// once the whole forward has ended:
//
//   T_pass >= max( C_pass, max_s OUT_s / out_s, max_s IN_s / in_s )
//
// Compute, C_pass. Each GPU runs its kernels one after another at no more than full speed, so a pass
// lasts at least the busiest GPU's kernel time, and at least the mean GPU's:
//   C = max( max_g S_g, (sum_g S_g + X) / n ),
// S_g the shared-expert kernels of rank g's own tokens (fixed by the trace: 1 kernel forward, 2
// backward), X a floor on all routed-expert GEMM kernels together (1 GEMM per token forward, 2
// backward). A grouped GEMM takes launch + max(compute, memory) >= either term, and a sum of maxima is
// at least the maximum of the sums: X >= max(A * c_min, (E_used * W + A * a) / HBM), with A the
// layer's (token, expert) assignments, c_min the compute time of one row at the best efficiency of the
// curve (padding only adds rows), E_used the experts with at least one token (each streams its weights
// W at least once), a the activation bytes one row reads and writes.
//
// Traffic, OUT_s and IN_s. An assignment of rank s can stay on s only if an instance of its expert lives
// on s, and HBM holds at most `slots` distinct experts per GPU (the capacity check every plan passes), so
// at least R_s = (s's assignments) - (its `slots` largest counts) leave s. One token copy serves at most
// top_k of them (one per assignment under token_copies per_expert), so s sends at least R_s / copies
// token copies in the dispatch (tokens) and receives as many in the combine (outputs), each in its
// phase's number format; the backward does the same with gradients. All of them cross s's NVLink port
// or its NIC (the EP backend and the Copy Engine alike), whose line rates out_s and in_s bound the time
// (wire bytes never fall below the payload).
//
// What the bound leaves out, each of which only adds time to a real plan: latencies and kernel launch
// costs, the EP kernels' SM limits and fixed costs, planner time, weight and gradient moves, the
// dependency of compute on the dispatch, HBM contention. docs/balancers.md "The oracle" states it with
// the proof; tests/sim/oracle_bound_test.cpp checks it against every balancer on random traces.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/time.hpp"

#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim {

/// One pass's bound and its terms, all in picoseconds (fractional: the bound is rounded once, down).
struct PassBound {
  double compute_ps = 0;   ///< C_pass
  double egress_ps = 0;    ///< max over GPUs of OUT_s / out_s
  double ingress_ps = 0;   ///< max over GPUs of IN_s / in_s
  int egress_gpu = 0, ingress_gpu = 0;
  double total_ps() const;
  /// "compute", "egress" or "ingress": the term that sets the pass's bound.
  const char* binding() const;
};

struct LayerBound {
  PassBound forward, backward;  ///< backward all zero when the layer is not simulated backward
  int slots = 0;                ///< distinct experts per GPU that HBM holds (capped at the model's experts)
  Time_ps layer_ps() const;     ///< forward + backward, rounded down
};

/// The bound for `record` (counts num_gpus x model.num_experts, as replayed) on `num_gpus` GPUs of
/// `hw`, `local_tokens[g]` the tokens rank g feeds the layer, `top_k` the trace's assignments per token.
LayerBound oracle_bound(const TraceRecord& record, const HardwareSpec& hw, const ModelSpec& model, int num_gpus,
                        const std::vector<std::int64_t>& local_tokens, int top_k, bool backward);

/// Distinct routed experts a GPU's HBM holds beside the shared experts, for every MoE layer, as
/// hbm_overflow counts them (capped at the model's experts; 0 when not even one fits).
int hbm_expert_slots(const HardwareSpec& hw, const ModelSpec& model);

}  // namespace epsim

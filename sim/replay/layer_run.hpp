// Executes one Plan on a SimContext as a task graph, forward then (optionally) backward:
//
//   forward:  [planner] -> dispatch all-to-all-v (+ CE token copies, + weight transfers)
//             -> per GPU: shared-expert GEMM, then its grouped GEMMs in plan order, each once its
//                tokens and weights are there -> combine all-to-all-v (+ CE copies back)
//   backward: gradient dispatch (the reverse of combine) -> per GPU: data-gradient GEMMs, then
//             weight-gradient GEMMs -> gradient combine (the reverse of dispatch) as soon as the
//             data gradients are done, overlapping the weight-gradient GEMMs; gradients of moved
//             weights go back to their owner after their weight-gradient GEMM.
//
// Dependencies are per GPU, never global barriers: a GPU that received its tokens starts computing
// while others still wait, which is exactly how stragglers show.
#pragma once

#include <memory>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/replay/all_to_all.hpp"
#include "sim/replay/layer_result.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

class LayerRun {
 public:
  /// `local_tokens[g]`: tokens rank g feeds into the layer (its shared experts compute them).
  LayerRun(SimContext& context, const Plan& plan, const std::vector<std::int64_t>& local_tokens, bool backward);
  /// Runs the event loop to completion and returns the totals (the timeline stays in the context).
  LayerResult run();

 private:
  struct CeRoute {
    int src;
    int dst;
    double bytes;
  };

  void start_forward();
  void launch_forward();
  void try_submit_forward(int gpu);
  void forward_gemms_done(int gpu);
  void forward_part_done();
  void start_backward();
  void try_submit_backward(int gpu);
  void backward_part_done();
  void shared_expert_kernels(Pass pass, int kernels_per_gpu);
  std::vector<std::vector<double>> ep_bytes(bool reverse) const;

  SimContext& ctx_;
  const Plan& plan_;
  const std::vector<std::int64_t>& local_tokens_;
  bool backward_;
  int n_;

  std::vector<std::vector<Time_ps>> group_work_ps_;  ///< per GPU, per group: full-SM GEMM time
  std::vector<CeRoute> ce_routes_;                   ///< token copies by Copy Engine, per (src, dst)
  std::vector<int> ce_in_[2];                        ///< per pass, per GPU: CE token copies still arriving
  std::vector<int> weights_pending_;                 ///< per instance
  std::vector<bool> tokens_in_;                      ///< per GPU: its all-to-all kernel finished
  std::vector<std::size_t> cursor_;                  ///< per GPU: next group to submit
  std::vector<std::size_t> groups_left_;

  std::unique_ptr<AllToAllV> dispatch_, combine_, grad_dispatch_, grad_combine_;
  int forward_parts_left_ = 0;
  int backward_parts_left_ = 0;
  Time_ps forward_end_ps_ = 0;
  Time_ps backward_start_ps_ = 0;
  Time_ps backward_end_ps_ = 0;
  LayerResult result_;
};

}  // namespace epsim

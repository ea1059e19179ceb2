// Executes one Plan on a SimContext as a task graph, forward then (optionally) backward.
//
// Every GPU has two in-order streams, as in the frameworks being modelled:
//   communication stream: dispatch stages 0..K-1, [EP weight transfers], combine stages 0..K-1
//                         backward: gradient-dispatch stages, gradient-combine stages, [EP gradients]
//   compute stream:       [planner kernel], shared-expert GEMM, then the Plan's grouped GEMMs in order
//                         backward: shared expert, each group's data-gradient GEMM, then each group's
//                         weight-gradient GEMM
// An operation starts when it reaches the head of its stream and its inputs are there:
//   - a GEMM group needs the dispatch stage its EP tokens came in, its Copy Engine token copies and its
//     weights;
//   - combine stage k on a GPU needs the groups that computed its stage-k tokens and the outputs
//     returned to it by Copy Engine;
//   - Copy Engine token moves (two-phase routes) leave the intermediate GPU once its dispatch is done
//     and its node's planner has finished; outputs go back the same way after the group's GEMM.
// The planner runs before the dispatch (the layer waits), or after it on each node's host CPU once the
// counts arrived by a device-to-host copy, overlapping the GEMMs (PlannerStart::after_dispatch).
// Dependencies are per GPU, never global barriers: a GPU that has its tokens computes while others
// still wait, which is exactly how stragglers show.
#pragma once

#include <memory>
#include <vector>

#include "sim/plan/plan.hpp"
#include "sim/replay/all_to_all.hpp"
#include "sim/replay/exchange_fanout.hpp"
#include "sim/replay/layer_result.hpp"
#include "sim/replay/sim_context.hpp"

namespace epsim {

class LayerRun {
 public:
  /// `local_tokens[g]`: tokens rank g feeds into the layer (its shared experts compute them).
  /// `fanout`: the distinct tokens each EP leg of `plan` carries (the copies the backend moves).
  LayerRun(SimContext& context, const Plan& plan, const ExchangeFanout& fanout,
           const std::vector<std::int64_t>& local_tokens, bool backward);
  /// Runs the event loop to completion and returns the totals and the timeline.
  LayerResult run();

 private:
  /// One grouped GEMM of the Plan.
  struct Group {
    int gpu = 0;
    Time_ps work_ps = 0;
    double hbm_fraction = 0;  ///< HBM bandwidth share at full speed (slows under Copy Engine traffic)
    int input_stage = -1;     ///< last dispatch stage carrying its EP tokens; -1: none
    bool ep_weights = false;  ///< some instance waits for weights on the EP backend
    std::vector<int> stages;  ///< stages of its direct EP routes (their combine waits for it)
    std::vector<int> ce_legs; ///< Copy Engine token copies into it
  };
  /// Tokens moved by Copy Engine from `from` to `to` for one group (aggregated). Each copy moves them
  /// in the number format of its phase (tokens: dispatch, outputs: combine, and the gradients' too).
  struct CeLeg {
    int from = 0;
    int to = 0;
    int group = 0;
    bool after_dispatch = false;  ///< `from` received them by EP first (two-phase route)
    double tokens = 0;
  };
  /// What an operation on the communication stream is, which decides what it waits for and what its
  /// end unblocks.
  enum class OpKind { dispatch, weights, combine, gradients };
  /// An operation on every GPU's communication stream (each GPU runs its own part).
  struct CommOp {
    std::unique_ptr<AllToAllV> collective;
    OpKind kind = OpKind::dispatch;
    int stage = 0;
  };
  /// What one pass (forward or backward) is waiting for.
  struct PassState {
    std::vector<CommOp> ops;
    std::vector<std::size_t> comm_cursor;   ///< per GPU: next op
    std::vector<bool> comm_busy;            ///< per GPU: its part of ops[comm_cursor] is running
    std::vector<bool> pumping;              ///< per GPU: pump_comm is on the stack
    std::vector<bool> pump_again;           ///< per GPU: a part ended inside pump_comm's start()
    std::vector<std::vector<bool>> stage_in;  ///< [gpu][stage]: dispatch stage done there
    std::vector<std::vector<int>> combine_block;  ///< [gpu][stage]: inputs the combine still needs
    std::vector<int> ce_pending;            ///< per group: token copies still arriving
    std::vector<std::size_t> compute_cursor;  ///< per GPU: next kernel to submit
    std::vector<bool> weights_in;           ///< per GPU: EP weight collective done there
    std::vector<bool> leg_started;          ///< per Copy Engine leg
    int open = 0;                           ///< things that must finish before the pass ends
  };

  void build_groups();  ///< groups, their inputs, and the Copy Engine legs into them
  void init_nodes();
  /// Payload of exchange stage `stage`, `bytes_per_token` per token copy; reverse: back to the sources.
  ExchangePayload stage_bytes(int stage, bool reverse, double bytes_per_token) const;
  /// Bytes of a Copy Engine leg in `phase`.
  double leg_bytes(const CeLeg& leg, TokenPhase phase) const;
  std::vector<std::vector<double>> transfer_bytes(PassKind pass) const;
  void add_comm_ops(PassState& pass, Pass which);
  void pump_comm(Pass which, int gpu);
  void comm_part_done(Pass which, int gpu, std::size_t op);
  void close(Pass which);

  void start_forward();
  void launch_forward();
  void planner_done(int node);
  void maybe_start_ce_legs(Pass which, int from);
  void dispatch_complete(Pass which, int gpu);
  void pump_forward_compute(int gpu);
  void forward_group_done(int group);
  void start_backward();
  void pump_backward_compute(int gpu);
  void backward_dgrad_done(int group);
  void backward_wgrad_done(int group);
  void shared_expert_kernels(Pass pass, int kernels_per_gpu);
  PassState& state(Pass which) { return which == Pass::forward ? fwd_ : bwd_; }

  SimContext& ctx_;
  const Plan& plan_;
  const ExchangeFanout& fanout_;
  const std::vector<std::int64_t>& local_tokens_;
  bool backward_;
  int n_;
  int stages_;

  std::vector<Group> groups_;
  std::vector<std::vector<int>> groups_of_;  ///< per GPU, group ids in plan order
  std::vector<CeLeg> ce_legs_;
  std::vector<int> ce_weights_pending_;      ///< per instance: Copy Engine weight copies still arriving
  std::vector<bool> planner_ready_;          ///< per node
  std::vector<int> node_dispatch_left_;      ///< per node: GPUs whose dispatch is not done yet
  std::vector<int> wgrads_left_;             ///< per GPU

  PassState fwd_, bwd_;
  Time_ps forward_end_ps_ = 0;
  Time_ps backward_start_ps_ = 0;
  Time_ps backward_end_ps_ = 0;
  LayerResult result_;
};

}  // namespace epsim

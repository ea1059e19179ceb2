// Executes one Plan on a SimContext as a task graph (layer_graph.hpp), forward then (optionally)
// backward.
//
// Every GPU has two in-order streams, as in the frameworks being modelled, and a third for prefetches:
//   communication stream: [EP weights synchronised before the dispatch], dispatch stages 0..K-1,
//                         [EP weight transfers], combine stages 0..K-1
//                         backward: [EP weights restored before the gradient dispatch],
//                         gradient-dispatch stages, gradient-combine stages, [EP gradients]
//   gradient-reduce stream (backward): one collective per expert with after_wgrad EP gradients, in
//                         expert order, each GPU's part once the weight-gradient GEMMs of its
//                         instances of that expert are done
//   prefetch stream:      [EP weight prefetch], issued at the layer's start beside the dispatch (its
//                         own kernel and SMs, sharing the links with it)
//   compute stream:       [planner kernel], shared-expert GEMM, then the Plan's grouped GEMMs in order
//                         backward: shared expert, each backward_first group's data- and weight-
//                         gradient GEMM, then each other group's data-gradient GEMM, then their
//                         weight-gradient GEMMs, all in the order the forward ran the groups; a group
//                         whose weights are restored before the gradient dispatch waits for them
// An operation starts when it reaches the head of its stream and its inputs are there:
//   - a GEMM group needs the dispatch stage its EP tokens came in, its Copy Engine token copies and its
//     weights (whichever collective or copy brings them), and, marked after_planner, its node's planner;
//   - combine stage k on a GPU needs the groups that computed its stage-k tokens and the outputs
//     returned to it by Copy Engine;
//   - Copy Engine token moves (two-phase routes) leave the intermediate GPU once its dispatch is done
//     and its node's planner has finished; outputs go back the same way after the group's GEMM;
//   - Copy Engine weights leave at the layer's start (before_dispatch, prefetch: ahead of everything
//     else on that engine) or once the node's planner is done (after_dispatch).
// On a GPU with on_arrival groups the compute stream picks its next group at each kernel boundary: the
// first on_arrival group (in plan order) whose inputs are all in, else the first group in plan order
// that is not on_arrival, once its inputs are in. An on_arrival group never holds up the others while
// it waits, and no group preempts a running kernel. Elsewhere groups are queued in plan order as soon
// as their inputs are in. The backward keeps the forward's actual order, so a GPU runs the data and
// weight gradients of moved work where its forward ran it.
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
#include "sim/replay/layer_graph.hpp"
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
  /// What an operation on the communication stream is, which decides what it waits for and what its
  /// end unblocks.
  enum class OpKind { weights_sync, dispatch, weights, combine, gradients };
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
    std::vector<int> ce_pending;            ///< per task: token copies still arriving
    std::vector<std::size_t> compute_cursor;  ///< per GPU: next kernel to submit (in-order GPUs)
    std::vector<bool> weights_in;           ///< per GPU: EP weight collective after the dispatch done
    std::vector<bool> synced_in;            ///< per GPU: EP weight collective before the dispatch done
    std::vector<bool> leg_started;          ///< per Copy Engine leg
    int open = 0;                           ///< things that must finish before the pass ends
  };

  /// Coupled sharing: the GPUs whose ports are busiest have their links follow (SimContext).
  void couple_busiest();
  void init_nodes();
  /// The shape of exchange stage `stage`'s token copies (reverse: back to the sources) on `engine`,
  /// in tokens: built on first use and kept, since the backward's exchanges move the forward's pairs.
  std::shared_ptr<const ExchangeShape> stage_shape(int stage, bool reverse, CommEngine engine);
  /// Stage `stage`'s legs as stage_shape's payload: in matrices, or listed (a stage of few pairs).
  void fill_stage(int stage, bool reverse, ExchangePayload& payload) const;
  void list_stage(int stage, bool reverse, ExchangePayload& payload) const;
  /// Bytes of a Copy Engine leg in `phase`.
  double leg_bytes(const CeLeg& leg, TokenPhase phase) const;
  void add_comm_ops(PassState& pass, Pass which);
  void pump_comm(Pass which, int gpu);
  void comm_part_done(Pass which, int gpu, std::size_t op);
  void close(Pass which);

  void start_forward();
  void launch_forward();
  /// The forward's Copy Engine weight copies that leave at the layer's start (before_dispatch,
  /// prefetch), in plan order; the others (after_dispatch) are listed by their source's node for
  /// send_planned_ce_weights, which sends a node's once its planner is done.
  void send_start_ce_weights();
  void send_planned_ce_weights(int node);
  void send_ce_weight(const Transfer& t);
  /// The EP weight prefetch's collective, if the plan has one (built before the forward's exchanges,
  /// started with them).
  void make_prefetch();
  void start_prefetch();
  void planner_done(int node);
  void maybe_start_ce_legs(Pass which, int from);
  void dispatch_complete(Pass which, int gpu);
  bool forward_inputs_in(int task) const;
  void pump_forward_compute(int gpu);
  /// The task a GPU with on_arrival groups runs next (-1: none can start now).
  int next_on_arrival_pick(int gpu) const;
  void launch_forward_task(int task);
  void forward_task_done(int task);
  void start_backward();
  void pump_backward_compute(int gpu);
  void backward_dgrad_done(int task);
  void backward_wgrad_done(int task);
  /// Starts the GPU's next gradient reduce once its weight gradients are in (its own stream, in order).
  void pump_reduce(int gpu);
  void reduce_part_done(int gpu);
  void shared_expert_kernels(Pass pass, int kernels_per_gpu);
  PassState& state(Pass which) { return which == Pass::forward ? fwd_ : bwd_; }

  SimContext& ctx_;
  const Plan& plan_;
  const ExchangeFanout& fanout_;
  const std::vector<std::int64_t>& local_tokens_;
  bool backward_;
  int n_;
  int stages_;

  LayerGraph graph_;
  std::vector<int> ce_weights_pending_;      ///< per task: Copy Engine weight copies still arriving
  std::vector<bool> planner_ready_;          ///< per node
  std::vector<int> node_dispatch_left_;      ///< per node: GPUs whose dispatch is not done yet
  std::vector<int> wgrads_left_;             ///< per GPU
  /// Per plan instance, its backward Copy Engine gradient copies as indices into the plan's transfers:
  /// ce_grads_[ce_grad_offsets_[i] .. ce_grad_offsets_[i + 1]), in plan order. Looked up among all
  /// the transfers at each weight-gradient GEMM's end, they were a sixth of FasterMoE's EP 1,024 layer.
  std::vector<int> ce_grad_offsets_, ce_grads_;
  /// Per node, the forward's after_dispatch Copy Engine weight copies from its GPUs, in plan order:
  /// planned_ce_[planned_ce_offsets_[m] .. planned_ce_offsets_[m + 1]).
  std::vector<int> planned_ce_offsets_, planned_ce_;
  std::unique_ptr<AllToAllV> prefetch_;      ///< the EP weight prefetch, if the plan has one
  std::vector<bool> prefetch_in_;            ///< per GPU: its part of the prefetch done
  std::vector<bool> task_started_;           ///< per task: its forward kernel was submitted
  std::vector<bool> compute_busy_;           ///< per GPU with on_arrival groups: a kernel is running
  std::vector<std::vector<int>> fwd_order_;  ///< per GPU: tasks in the order the forward ran them
  /// One backward GEMM: a task's data gradient (dgrad) or weight gradient.
  struct BackwardKernel {
    int task = 0;
    bool dgrad = true;
  };
  std::vector<std::vector<BackwardKernel>> bwd_kernels_;  ///< per GPU, in execution order
  std::vector<std::unique_ptr<AllToAllV>> reduces_;     ///< graph_.reduces as collectives
  std::vector<std::vector<int>> reduce_wait_;            ///< [reduce][gpu]: weight gradients it still waits for
  std::vector<std::size_t> reduce_cursor_;               ///< per GPU: next reduce on its stream
  std::vector<bool> reduce_busy_;                        ///< per GPU: its part of reduce_cursor_ is running
  std::vector<bool> reduce_pumping_;                     ///< per GPU: pump_reduce is on the stack
  std::vector<bool> reduce_again_;                       ///< per GPU: a part ended inside pump_reduce's start()

  PassState fwd_, bwd_;
  /// One exchange's dense payload, refilled for each: a shape reads it only while it is built, and at
  /// wide EP a fresh n x n matrix for each of the layer's exchanges was tens of MB of pages for the
  /// kernel to clear.
  ExchangePayload stage_payload_;
  /// stage_shape's, by 2 x stage + reverse (null: not built yet).
  std::vector<std::shared_ptr<const ExchangeShape>> stage_shapes_;
  Time_ps forward_end_ps_ = 0;
  Time_ps backward_start_ps_ = 0;
  Time_ps backward_end_ps_ = 0;
  LayerResult result_;
};

}  // namespace epsim

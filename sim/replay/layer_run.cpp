#include "sim/replay/layer_run.hpp"

#include <algorithm>

namespace epsim {

LayerRun::LayerRun(SimContext& context, const Plan& plan, const ExchangeFanout& fanout,
                   const std::vector<std::int64_t>& local_tokens, bool backward)
    : ctx_(context),
      plan_(plan),
      fanout_(fanout),
      local_tokens_(local_tokens),
      backward_(backward),
      n_(context.num_gpus()),
      stages_(std::max(1, plan.exchange_stages)),
      graph_(build_layer_graph(context, plan, stages_)) {
  for (const GemmTask& task : graph_.tasks) ce_weights_pending_.push_back(task.ce_weights);
  init_nodes();
  couple_busiest();
  result_.routed_gemm_fwd_ps.assign(n_, 0);
  result_.gemm_finish_fwd_ps.assign(n_, 0);
}

namespace {

bool any_bytes(const std::vector<std::vector<double>>& bytes) {
  return std::any_of(bytes.begin(), bytes.end(), [](const std::vector<double>& row) {
    return std::any_of(row.begin(), row.end(), [](double b) { return b > 0; });
  });
}

}  // namespace

// ---- per-stage byte matrices -------------------------------------------------------------------

void LayerRun::init_nodes() {
  planner_ready_.assign(ctx_.topology().num_nodes(), true);
  node_dispatch_left_.assign(ctx_.topology().num_nodes(), 0);
  for (int g = 0; g < n_; ++g) ++node_dispatch_left_[ctx_.topology().node_of(g)];
}

void LayerRun::couple_busiest() {
  if (ctx_.network().sharing().mode != FlowNetwork::SharingMode::coupled) return;
  // How long each GPU's ports are busy over the layer, roughly: the bytes it sends and receives over
  // NVLink and over its NIC, each over that port's bandwidth. Token legs count in every phase; a
  // per-node copy crosses the fabric into the source's rail peer in the destination node, which
  // forwards it over NVLink. Weights and gradients count where they go, on the EP backend by its
  // route (an inter-node message under rail_forward crosses the rail peer's NIC and NVLink too).
  // The GPUs that receive the most weight-sync bytes follow besides.
  const Topology& topo = ctx_.topology();
  const HardwareSpec& hw = ctx_.hardware();
  const double nvlink_GBps = hw.nvlink.port_bw_GBps;
  const double nic_GBps = hw.infiniband.nic_bw_GBps;
  std::vector<double> busy(static_cast<std::size_t>(n_), 0.0);
  std::vector<double> synced(static_cast<std::size_t>(n_), 0.0);
  const auto add = [&](int gpu, double bytes, bool internode) {
    const double GBps = internode ? nic_GBps : nvlink_GBps;
    if (GBps > 0) busy[static_cast<std::size_t>(gpu)] += bytes / GBps;
  };
  const auto pair = [&](int src, int dst, double bytes, bool forwarded) {
    const bool internode = !topo.same_node(src, dst);
    const int peer = internode && forwarded ? topo.forwarding_gpu(src, dst) : -1;
    if (peer >= 0) {  // the RDMA hop is the node leg's; here the forward inside dst's node
      if (peer != dst) {
        add(peer, bytes, false);
        add(dst, bytes, false);
      }
      return;
    }
    add(src, bytes, internode);
    add(dst, bytes, internode);
  };
  // A message of the EP backend on its route (Topology::ep_route): across nodes under rail_forward,
  // src's NIC into its rail peer in dst's node, then the peer's NVLink into dst. Counted at src and
  // dst alone, the rail peers that carry a balancer's weight copies looked idle, and did not follow:
  // DeepSeek EPLB's replanned EP 512 layer, whose every GPU receives expert copies before its
  // dispatch, was +0.77% against exact at a tenth following, and is +0.10% so counted.
  const auto ep_message = [&](int src, int dst, double bytes) {
    const int peer = topo.forwarding_gpu(src, dst);
    if (peer >= 0) {  // the RDMA hop, then (pair) the forward inside dst's node
      add(src, bytes, true);
      add(peer, bytes, true);
    }
    pair(src, dst, bytes, true);
  };
  double per_token = 0;
  for (const TokenPhase phase : {TokenPhase::dispatch, TokenPhase::combine, TokenPhase::grad_dispatch, TokenPhase::grad_combine})
    if (phase == TokenPhase::dispatch || phase == TokenPhase::combine || backward_) per_token += ctx_.token_bytes(phase);
  const bool per_node = fanout_.copies() == TokenCopies::per_node;
  for (int stage = 0; stage < stages_; ++stage) {
    for (const LegTokens& leg : fanout_.gpu_legs(stage)) {
      if (per_node) pair(leg.src, leg.dst, leg.tokens * per_token, true);
      else ep_message(leg.src, leg.dst, leg.tokens * per_token);
    }
    for (const LegTokens& leg : fanout_.node_legs(stage)) {
      const int peer = topo.forwarding_gpu(leg.src, leg.dst * topo.gpus_per_node());
      if (peer < 0) continue;
      add(leg.src, leg.tokens * per_token, true);
      add(peer, leg.tokens * per_token, true);
    }
  }
  for (const Transfer& t : plan_.transfers) {
    if (t.src_gpu == t.dst_gpu || t.bytes <= 0 || (t.pass == PassKind::backward && !backward_)) continue;
    if (t.carrier == Carrier::ep_backend) ep_message(t.src_gpu, t.dst_gpu, static_cast<double>(t.bytes));
    else pair(t.src_gpu, t.dst_gpu, static_cast<double>(t.bytes), false);
    // A weight sync before a dispatch shares its receiver's links with token flows that their
    // senders' SM limits hold back: the receiver's side must follow them to leave the sync its
    // share (UltraEP at EP 512, uniform: +3% with the busiest tenth alone, exact with as many of the
    // syncs' receivers besides).
    if (t.carrier == Carrier::ep_backend && t.start == TransferStart::before_dispatch)
      synced[static_cast<std::size_t>(t.dst_gpu)] += static_cast<double>(t.bytes);
  }
  ctx_.couple_busiest(busy, synced);
}

double LayerRun::leg_bytes(const CeLeg& leg, TokenPhase phase) const {
  return leg.tokens * ctx_.token_bytes(phase);
}

std::shared_ptr<const ExchangeShape> LayerRun::stage_shape(int stage, bool reverse, CommEngine engine) {
  const std::size_t key = 2 * static_cast<std::size_t>(stage) + (reverse ? 1 : 0);
  if (stage_shapes_.size() <= key) stage_shapes_.resize(key + 1);
  std::shared_ptr<const ExchangeShape>& kept = stage_shapes_[key];
  if (kept != nullptr && kept->engine() == engine) return kept;
  ExchangePayload& payload = stage_payload_;
  payload.to_sources = reverse;
  const std::vector<LegTokens>& legs = fanout_.gpu_legs(stage);
  // A stage of few pairs is listed: FasterMoE's pipelined stages each move one group's pairs, and an
  // n x n matrix for each was 8 MB to fill and a million pairs to walk at EP 1,024.
  if (legs.size() * 8 < static_cast<std::size_t>(n_) * static_cast<std::size_t>(n_)) {
    list_stage(stage, reverse, payload);
  } else {
    payload.pairs.clear();
    payload.node_pairs.clear();
    fill_stage(stage, reverse, payload);
  }
  kept = std::make_shared<const ExchangeShape>(ctx_.topology(), payload, engine);
  return kept;
}

void LayerRun::fill_stage(int stage, bool reverse, ExchangePayload& payload) const {
  payload.gpu_bytes.resize(static_cast<std::size_t>(n_));
  for (std::vector<double>& row : payload.gpu_bytes) row.assign(static_cast<std::size_t>(n_), 0.0);
  // Each stage reads only its own legs, so that many stages do not multiply the work. One leg per
  // (source, target): each entry is its leg's tokens, which the exchanges scale to bytes.
  for (const LegTokens& leg : fanout_.gpu_legs(stage)) {
    if (reverse) payload.gpu_bytes[leg.dst][leg.src] += leg.tokens;
    else payload.gpu_bytes[leg.src][leg.dst] += leg.tokens;
  }
  if (fanout_.copies() == TokenCopies::per_node) {
    payload.node_bytes.resize(static_cast<std::size_t>(n_));
    for (std::vector<double>& row : payload.node_bytes) row.assign(static_cast<std::size_t>(ctx_.topology().num_nodes()), 0.0);
    for (const LegTokens& leg : fanout_.node_legs(stage)) payload.node_bytes[leg.src][leg.dst] += leg.tokens;
  } else {
    payload.node_bytes.clear();
  }
}

void LayerRun::list_stage(int stage, bool reverse, ExchangePayload& payload) const {
  payload.gpu_bytes.clear();
  payload.node_bytes.clear();
  payload.pairs.clear();
  payload.node_pairs.clear();
  payload.per_node = fanout_.copies() == TokenCopies::per_node;
  const auto append = &ExchangePayload::append;
  // The legs come in (source, target) order; a combine's pairs are (target, source), so its legs
  // are placed target by target, each target's in the legs' order, which keeps their sources' order.
  const std::vector<LegTokens>& legs = fanout_.gpu_legs(stage);
  payload.pairs.reserve(legs.size());
  if (!reverse) {
    for (const LegTokens& leg : legs) append(payload.pairs, leg.src, leg.dst, leg.tokens);
  } else {
    std::vector<std::size_t> starts(static_cast<std::size_t>(n_) + 1, 0);
    for (const LegTokens& leg : legs) ++starts[static_cast<std::size_t>(leg.dst) + 1];
    for (std::size_t g = 0; g < static_cast<std::size_t>(n_); ++g) starts[g + 1] += starts[g];
    std::vector<const LegTokens*> placed(legs.size());
    for (const LegTokens& leg : legs) placed[starts[static_cast<std::size_t>(leg.dst)]++] = &leg;
    for (const LegTokens* leg : placed) append(payload.pairs, leg->dst, leg->src, leg->tokens);
  }
  if (payload.per_node)
    for (const LegTokens& leg : fanout_.node_legs(stage)) append(payload.node_pairs, leg.src, leg.dst, leg.tokens);
}

// ---- communication streams ---------------------------------------------------------------------

void LayerRun::add_comm_ops(PassState& p, Pass which) {
  const bool fwd = which == Pass::forward;
  // Token exchanges run with their phase's kernel; weights and gradients on the EP backend's kernel
  // with no fixed cost of their own.
  // An exchange of `bytes`, or of a token shape at `bytes_per_token`.
  auto add = [&](OpKind kind, int stage, const std::string& name, const ExchangePayload* bytes,
                 std::shared_ptr<const ExchangeShape> shape, double bytes_per_token, CommKernel kernel) {
    const std::size_t index = p.ops.size();
    CommOp op;
    op.kind = kind;
    op.stage = stage;
    auto done = [this, which, index](int g) { comm_part_done(which, g, index); };
    op.collective = bytes != nullptr
                        ? std::make_unique<AllToAllV>(ctx_, name, which, *bytes, done, kernel)
                        : std::make_unique<AllToAllV>(ctx_, name, which, std::move(shape), bytes_per_token, done, kernel);
    if (kind == OpKind::weights || kind == OpKind::weights_sync) {
      result_.weight_bytes += op.collective->total_bytes();
    } else if (kind == OpKind::gradients) {
      result_.gradient_bytes += op.collective->total_bytes();
    } else {
      result_.ep_token_bytes += op.collective->total_bytes() - op.collective->copy_engine_bytes();
      result_.ce_token_bytes += op.collective->copy_engine_bytes();
      result_.internode_token_bytes += op.collective->internode_bytes();
    }
    p.ops.push_back(std::move(op));
  };
  const TokenPhase to_experts = fwd ? TokenPhase::dispatch : TokenPhase::grad_dispatch;
  const TokenPhase back = fwd ? TokenPhase::combine : TokenPhase::grad_combine;
  auto staged = [&](const char* name, int k) {
    return stages_ > 1 ? std::string(name) + " s" + std::to_string(k) : std::string(name);
  };
  p.ops.reserve(2 * static_cast<std::size_t>(stages_) + 2);
  // Weights synchronised before the dispatch (replicas updated first, or restored before the expert
  // backward): the dispatch waits for them.
  auto synced =
      ep_transfer_bytes(plan_, n_, fwd ? PassKind::forward : PassKind::backward, TransferStart::before_dispatch);
  if (any_bytes(synced)) {
    const ExchangePayload payload(std::move(synced));
    add(OpKind::weights_sync, 0, "weights sync", &payload, nullptr, 0, CommKernel{});
  }
  // Token exchanges: the forward's shapes, scaled to each phase's bytes per token.
  const auto tokens = [&](int k, bool reverse, TokenPhase phase) {
    const CommKernel kernel = ctx_.comm_kernel(phase);
    return std::make_pair(stage_shape(k, reverse, kernel.engine), kernel);
  };
  for (int k = 0; k < stages_; ++k) {
    auto [shape, kernel] = tokens(k, false, to_experts);
    add(OpKind::dispatch, k, staged(fwd ? "dispatch" : "grad dispatch", k), nullptr, std::move(shape),
        ctx_.token_bytes(to_experts), kernel);
  }
  // after_dispatch transfers: forward weights after the dispatch, backward gradients after the
  // gradient combine (after_wgrad ones run on the gradient-reduce streams instead).
  const ExchangePayload moved(
      ep_transfer_bytes(plan_, n_, fwd ? PassKind::forward : PassKind::backward, TransferStart::after_dispatch));
  const bool any_moved = any_bytes(moved.gpu_bytes);
  if (fwd && any_moved) add(OpKind::weights, 0, "weights", &moved, nullptr, 0, CommKernel{});
  for (int k = 0; k < stages_; ++k) {
    auto [shape, kernel] = tokens(k, true, back);
    add(OpKind::combine, k, staged(fwd ? "combine" : "grad combine", k), nullptr, std::move(shape),
        ctx_.token_bytes(back), kernel);
  }
  if (!fwd && any_moved) add(OpKind::gradients, 0, "gradients", &moved, nullptr, 0, CommKernel{});

  // The pass's messages and kernels land on the timeline as they end: room for them is made once, not
  // by doubling (each doubling copies every event so far, and a wide layer records millions).
  std::size_t events = 3 * graph_.tasks.size() + 2 * graph_.ce_legs.size() + 4 * static_cast<std::size_t>(n_);
  std::size_t widest = 0;  // the most transfers one exchange puts in flight
  for (const CommOp& op : p.ops) {
    events += op.collective->timeline_events();
    widest = std::max(widest, op.collective->timeline_events());
  }
  // A forward's prefetch runs beside its dispatch: its messages besides, its flows in flight with
  // theirs (LAER-MoE's parameter all-gather: two million transfers at EP 1,024, and the room grown
  // by doubling instead was a fifth of that layer's time in the kernel's clearing of pages).
  if (fwd && prefetch_ != nullptr) {
    events += prefetch_->timeline_events();
    widest += prefetch_->timeline_events();
  }
  // The backward's exchanges mirror the forward's: room for both at once, so that the backward does not
  // move the forward's events to a larger block.
  ctx_.reserve_timeline(fwd && backward_ ? 2 * events : events);
  ctx_.reserve_transfers(widest);

  p.comm_cursor.assign(n_, 0);
  p.comm_busy.assign(n_, false);
  p.pumping.assign(n_, false);
  p.pump_again.assign(n_, false);
  p.stage_in.assign(n_, std::vector<bool>(stages_, false));
  p.weights_in.assign(n_, false);
  p.synced_in.assign(n_, false);
  p.compute_cursor.assign(n_, 0);
  p.leg_started.assign(graph_.ce_legs.size(), false);
  p.ce_pending.assign(graph_.tasks.size(), 0);
  p.combine_block.assign(n_, std::vector<int>(stages_, 0));
  for (std::size_t id = 0; id < graph_.tasks.size(); ++id) {
    const GemmTask& task = graph_.tasks[id];
    p.ce_pending[id] = static_cast<int>(task.ce_legs.size());
    for (int k : task.stages) ++p.combine_block[task.gpu][k];
  }
  // Outputs that come back by Copy Engine must be there before the intermediate GPU combines.
  for (const CeLeg& leg : graph_.ce_legs)
    for (int k = 0; k < stages_; ++k) ++p.combine_block[leg.from][k];
}

void LayerRun::pump_comm(Pass which, int gpu) {
  PassState& p = state(which);
  // A part with nothing to move ends inside start(), and its end pumps this stream again. That last
  // step of comm_part_done is left to this loop (it sets pump_again) instead of nesting a call per
  // operation: a plan may have hundreds of thousands of empty stages.
  const bool outer = p.pumping[gpu];
  p.pumping[gpu] = true;
  do {
    p.pump_again[gpu] = false;
    if (p.comm_busy[gpu] || p.comm_cursor[gpu] >= p.ops.size()) break;
    const CommOp& op = p.ops[p.comm_cursor[gpu]];
    if (op.kind == OpKind::combine && p.combine_block[gpu][op.stage] > 0) break;
    if (op.kind == OpKind::gradients && wgrads_left_[gpu] > 0) break;
    p.comm_busy[gpu] = true;
    op.collective->start(gpu);
  } while (p.pump_again[gpu]);
  p.pumping[gpu] = outer;
}

void LayerRun::comm_part_done(Pass which, int gpu, std::size_t index) {
  PassState& p = state(which);
  p.comm_busy[gpu] = false;
  ++p.comm_cursor[gpu];
  const CommOp& op = p.ops[index];
  if (op.kind == OpKind::dispatch) {
    p.stage_in[gpu][op.stage] = true;
    if (op.stage == stages_ - 1) dispatch_complete(which, gpu);
  } else if (op.kind == OpKind::weights) {
    p.weights_in[gpu] = true;
  } else if (op.kind == OpKind::weights_sync) {
    p.synced_in[gpu] = true;
  }
  if (which == Pass::forward) pump_forward_compute(gpu);
  else pump_backward_compute(gpu);
  if (p.comm_cursor[gpu] == p.ops.size()) close(which);
  if (p.pumping[gpu]) p.pump_again[gpu] = true;  // ended inside start(): the pump loop goes on
  else pump_comm(which, gpu);
}

void LayerRun::dispatch_complete(Pass which, int gpu) {
  maybe_start_ce_legs(which, gpu);
  const PlannerCost& planner = plan_.planner;
  if (which != Pass::forward || planner.start != PlannerStart::after_dispatch || planner.site == PlannerSite::none)
    return;
  // The node's planner needs every GPU's counts: it starts once the node's dispatch is done and the
  // count matrix has crossed PCIe to the host.
  const int node = ctx_.topology().node_of(gpu);
  if (--node_dispatch_left_[node] > 0) return;
  const int first = node * ctx_.topology().gpus_per_node();
  ctx_.d2h_copy(first, static_cast<double>(planner.d2h_bytes), Pass::forward, "counts to host", [this, node, first] {
    ctx_.host_task(first, plan_.planner.duration_ps, Pass::forward, "planner", [this, node] { planner_done(node); });
  });
}

void LayerRun::close(Pass which) {
  PassState& p = state(which);
  if (--p.open > 0) return;
  if (which == Pass::forward) {
    forward_end_ps_ = ctx_.now_ps();
    if (backward_) start_backward();
  } else {
    backward_end_ps_ = ctx_.now_ps();
  }
}

// ---- forward -----------------------------------------------------------------------------------

void LayerRun::shared_expert_kernels(Pass pass, int kernels_per_gpu) {
  const ModelSpec& m = ctx_.model();
  if (m.shared_experts == 0) return;
  for (int g = 0; g < n_; ++g) {
    if (local_tokens_[g] == 0) continue;
    const std::vector<std::int64_t> rows(m.shared_experts, local_tokens_[g]);
    const Time_ps work = ctx_.gemm().grouped_time_ps(rows, m.shared_expert_ffn_size);
    const double hbm = ctx_.gemm().hbm_fraction(rows, m.shared_expert_ffn_size);
    // A GPU that picks its groups at kernel boundaries picks the first one when this kernel ends.
    const bool picks = pass == Pass::forward && graph_.has_on_arrival[g];
    if (picks) compute_busy_[g] = true;
    for (int k = 0; k < kernels_per_gpu; ++k)
      ctx_.kernel(g, work, pass, pass == Pass::forward ? "shared expert fwd" : "shared expert bwd",
                  [this, g, picks](Time_ps, Time_ps) {
                    if (!picks) return;
                    compute_busy_[g] = false;
                    pump_forward_compute(g);
                  },
                  hbm);
  }
}

void LayerRun::start_forward() {
  const PlannerCost& planner = plan_.planner;
  const bool blocking = planner.site != PlannerSite::none && planner.duration_ps > 0 &&
                        (planner.start == PlannerStart::before_dispatch || planner.site == PlannerSite::gpu);
  if (!blocking) {
    launch_forward();
    return;
  }
  // The layer cannot dispatch before the plan exists: every node's planner (or every GPU's planner
  // kernel) must finish first.
  const int parts = planner.site == PlannerSite::host_cpu ? ctx_.topology().num_nodes() : n_;
  auto left = std::make_shared<int>(parts);
  auto one_done = [this, left] {
    if (--*left == 0) launch_forward();
  };
  for (int p = 0; p < parts; ++p) {
    if (planner.site == PlannerSite::host_cpu)
      ctx_.host_task(p * ctx_.topology().gpus_per_node(), planner.duration_ps, Pass::forward, "planner", one_done);
    else
      ctx_.kernel(p, planner.duration_ps, Pass::forward, "planner", [one_done](Time_ps, Time_ps) { one_done(); });
  }
}

void LayerRun::launch_forward() {
  const PlannerCost& planner = plan_.planner;
  const bool overlapped = planner.site == PlannerSite::host_cpu && planner.start == PlannerStart::after_dispatch;
  std::fill(planner_ready_.begin(), planner_ready_.end(), !overlapped);
  make_prefetch();  // before the forward's exchanges, which make room for its messages and flows
  add_comm_ops(fwd_, Pass::forward);
  fwd_.open = n_ + static_cast<int>(graph_.tasks.size() + graph_.ce_legs.size());
  task_started_.assign(graph_.tasks.size(), false);
  compute_busy_.assign(n_, false);
  fwd_order_.assign(n_, {});
  shared_expert_kernels(Pass::forward, 1);
  // Weights that leave at the layer's start are the first copies on their Copy Engines.
  send_start_ce_weights();
  if (!overlapped)
    for (int node = 0; node < ctx_.topology().num_nodes(); ++node) planner_done(node);
  start_prefetch();
  for (int g = 0; g < n_; ++g) {
    pump_comm(Pass::forward, g);
    pump_forward_compute(g);
  }
}

void LayerRun::send_start_ce_weights() {
  // The copies that leave at the layer's start go now; the others are listed by their source's node,
  // for the planner's end there (a pass over every transfer at each of 128 nodes' ends was 4% of
  // LAER-MoE's EP 1,024 layer: two million all-gather transfers, no copy among them).
  const auto copied_weights = [](const Transfer& t) {
    return t.pass == PassKind::forward && t.carrier == Carrier::copy_engine && t.bytes > 0;
  };
  const Topology& topo = ctx_.topology();
  const std::size_t nodes = static_cast<std::size_t>(topo.num_nodes());
  planned_ce_offsets_.assign(nodes + 1, 0);
  for (const Transfer& t : plan_.transfers)
    if (copied_weights(t) && t.start == TransferStart::after_dispatch)
      ++planned_ce_offsets_[static_cast<std::size_t>(topo.node_of(t.src_gpu)) + 1];
  for (std::size_t m = 0; m < nodes; ++m) planned_ce_offsets_[m + 1] += planned_ce_offsets_[m];
  planned_ce_.resize(static_cast<std::size_t>(planned_ce_offsets_[nodes]));
  std::vector<int> fill(planned_ce_offsets_.begin(), planned_ce_offsets_.end() - 1);
  for (std::size_t i = 0; i < plan_.transfers.size(); ++i) {
    const Transfer& t = plan_.transfers[i];
    if (!copied_weights(t)) continue;
    if (t.start != TransferStart::after_dispatch) send_ce_weight(t);
    else planned_ce_[static_cast<std::size_t>(fill[static_cast<std::size_t>(topo.node_of(t.src_gpu))]++)] = static_cast<int>(i);
  }
}

void LayerRun::send_planned_ce_weights(int node) {
  const std::size_t m = static_cast<std::size_t>(node);
  for (int at = planned_ce_offsets_[m]; at < planned_ce_offsets_[m + 1]; ++at)
    send_ce_weight(plan_.transfers[static_cast<std::size_t>(planned_ce_[static_cast<std::size_t>(at)])]);
}

void LayerRun::send_ce_weight(const Transfer& t) {
  const int task = graph_.task_of_instance[t.instance];
  ctx_.ce_copy(t.src_gpu, t.dst_gpu, static_cast<double>(t.bytes), Pass::forward,
               "weights e" + std::to_string(plan_.instances[t.instance].expert), [this, task] {
                 --ce_weights_pending_[task];
                 pump_forward_compute(graph_.tasks[task].gpu);
               });
  result_.weight_bytes += static_cast<double>(t.bytes);
}

void LayerRun::make_prefetch() {
  const auto bytes = ep_transfer_bytes(plan_, n_, PassKind::forward, TransferStart::prefetch);
  if (!any_bytes(bytes)) return;
  prefetch_ = std::make_unique<AllToAllV>(ctx_, "weights prefetch", Pass::forward, bytes, [this](int g) {
    prefetch_in_[g] = true;
    pump_forward_compute(g);
    close(Pass::forward);
  });
}

void LayerRun::start_prefetch() {
  prefetch_in_.assign(n_, true);
  if (prefetch_ == nullptr) return;
  // Its own kernel on every GPU, beside the dispatch's: each GPU's part must end before the pass does.
  prefetch_in_.assign(n_, false);
  fwd_.open += n_;
  result_.weight_bytes += prefetch_->total_bytes();
  for (int g = 0; g < n_; ++g) prefetch_->start(g);
}

void LayerRun::planner_done(int node) {
  planner_ready_[node] = true;
  // Weights first: the Copy Engine is FIFO, and a dynamic GEMM needs both its weights and its tokens.
  send_planned_ce_weights(node);
  const int first = node * ctx_.topology().gpus_per_node();
  const int last = std::min(n_, first + ctx_.topology().gpus_per_node());
  for (int g = first; g < last; ++g) maybe_start_ce_legs(Pass::forward, g);
  for (int g = first; g < last; ++g)
    if (graph_.has_after_planner[g]) pump_forward_compute(g);
}

void LayerRun::maybe_start_ce_legs(Pass which, int from) {
  PassState& p = state(which);
  const bool dispatched = p.stage_in.empty() ? false : p.stage_in[from][stages_ - 1];
  if (which == Pass::forward && !planner_ready_[ctx_.topology().node_of(from)]) return;
  for (std::size_t l = 0; l < graph_.ce_legs.size(); ++l) {
    const CeLeg& leg = graph_.ce_legs[l];
    if (leg.from != from || p.leg_started[l] || (leg.after_dispatch && !dispatched)) continue;
    p.leg_started[l] = true;
    const bool fwd = which == Pass::forward;
    const double bytes = leg_bytes(leg, fwd ? TokenPhase::dispatch : TokenPhase::grad_dispatch);
    ctx_.ce_copy(leg.from, leg.to, bytes, which, fwd ? "tokens" : "output grads", [this, which, l] {
      const CeLeg& arrived = graph_.ce_legs[l];
      --state(which).ce_pending[arrived.task];
      if (which == Pass::forward) pump_forward_compute(arrived.to);
      else pump_backward_compute(arrived.to);
    });
    result_.ce_token_bytes += bytes;
  }
}

bool LayerRun::forward_inputs_in(int id) const {
  const GemmTask& task = graph_.tasks[id];
  const PassState& p = fwd_;
  const int gpu = task.gpu;
  if (task.input_stage >= 0 && !p.stage_in[gpu][task.input_stage]) return false;
  if (p.ce_pending[id] > 0 || ce_weights_pending_[id] > 0) return false;
  if ((task.ep_weights && !p.weights_in[gpu]) || (task.synced_weights && !p.synced_in[gpu]) ||
      (task.prefetched_weights && !prefetch_in_[gpu]))
    return false;
  return !task.after_planner || planner_ready_[ctx_.topology().node_of(gpu)];
}

void LayerRun::pump_forward_compute(int gpu) {
  PassState& p = fwd_;
  if (p.compute_cursor.empty()) return;  // not launched yet
  if (graph_.has_on_arrival[gpu]) {
    if (compute_busy_[gpu]) return;  // the choice is made at the next kernel boundary
    const int pick = next_on_arrival_pick(gpu);
    if (pick < 0) return;
    compute_busy_[gpu] = true;
    launch_forward_task(pick);
    return;
  }
  const std::vector<int>& tasks = graph_.tasks_of[gpu];
  while (p.compute_cursor[gpu] < tasks.size()) {
    const int id = tasks[p.compute_cursor[gpu]];
    if (!forward_inputs_in(id)) return;
    ++p.compute_cursor[gpu];
    launch_forward_task(id);
  }
}

int LayerRun::next_on_arrival_pick(int gpu) const {
  const std::vector<int>& tasks = graph_.tasks_of[gpu];
  for (int id : tasks)
    if (!task_started_[id] && graph_.tasks[id].on_arrival && forward_inputs_in(id)) return id;
  for (int id : tasks)
    if (!task_started_[id] && !graph_.tasks[id].on_arrival) return forward_inputs_in(id) ? id : -1;
  return -1;
}

void LayerRun::launch_forward_task(int id) {
  const GemmTask& task = graph_.tasks[id];
  task_started_[id] = true;
  fwd_order_[task.gpu].push_back(id);
  ctx_.kernel(
      task.gpu, task.work_ps, Pass::forward, "gemm fwd",
      [this, id](Time_ps start, Time_ps end) {
        const int gpu = graph_.tasks[id].gpu;
        result_.routed_gemm_fwd_ps[gpu] += end - start;
        result_.gemm_finish_fwd_ps[gpu] = end;
        if (graph_.has_on_arrival[gpu]) {  // a kernel boundary: the stream picks its next group
          compute_busy_[gpu] = false;
          pump_forward_compute(gpu);
        }
        forward_task_done(id);
      },
      task.hbm_fraction);
}

void LayerRun::forward_task_done(int id) {
  const GemmTask& task = graph_.tasks[id];
  for (int k : task.stages) --fwd_.combine_block[task.gpu][k];
  for (int l : task.ce_legs) {
    const CeLeg& leg = graph_.ce_legs[l];
    const double bytes = leg_bytes(leg, TokenPhase::combine);
    ctx_.ce_copy(leg.to, leg.from, bytes, Pass::forward, "outputs", [this, l] {
      const int from = graph_.ce_legs[l].from;
      for (int k = 0; k < stages_; ++k) --fwd_.combine_block[from][k];
      pump_comm(Pass::forward, from);
      close(Pass::forward);
    });
    result_.ce_token_bytes += bytes;
  }
  pump_comm(Pass::forward, task.gpu);
  close(Pass::forward);
}

// ---- backward ----------------------------------------------------------------------------------

void LayerRun::start_backward() {
  backward_start_ps_ = ctx_.now_ps();
  add_comm_ops(bwd_, Pass::backward);
  wgrads_left_.assign(n_, 0);
  for (const GemmTask& task : graph_.tasks) ++wgrads_left_[task.gpu];
  // Each instance's gradient copies, found once: a weight-gradient GEMM's end sends its instances'.
  const std::size_t instances = plan_.instances.size();
  ce_grad_offsets_.assign(instances + 1, 0);
  ce_grads_.clear();
  const auto ce_gradient = [](const Transfer& t) {
    return t.pass == PassKind::backward && t.carrier == Carrier::copy_engine && t.bytes > 0;
  };
  for (const Transfer& t : plan_.transfers)
    if (ce_gradient(t)) ++ce_grad_offsets_[static_cast<std::size_t>(t.instance) + 1];
  for (std::size_t i = 0; i < instances; ++i) ce_grad_offsets_[i + 1] += ce_grad_offsets_[i];
  ce_grads_.resize(static_cast<std::size_t>(ce_grad_offsets_[instances]));
  {
    std::vector<int> fill(ce_grad_offsets_.begin(), ce_grad_offsets_.end() - 1);
    for (std::size_t i = 0; i < plan_.transfers.size(); ++i)
      if (ce_gradient(plan_.transfers[i]))
        ce_grads_[static_cast<std::size_t>(fill[static_cast<std::size_t>(plan_.transfers[i].instance)]++)] = static_cast<int>(i);
  }
  const int ce_gradients = static_cast<int>(ce_grads_.size());
  // Every GPU's communication stream, every weight-gradient GEMM, every input-gradient copy back and
  // every gradient copy must finish before the pass does.
  bwd_.open = n_ + static_cast<int>(graph_.tasks.size() + graph_.ce_legs.size()) + ce_gradients;
  // The backward kernels of each GPU: backward_first groups' data and weight gradients, then the other
  // groups' data gradients, then their weight gradients, each in the forward's actual order.
  bwd_kernels_.assign(n_, {});
  for (int g = 0; g < n_; ++g) {
    std::vector<BackwardKernel>& kernels = bwd_kernels_[g];
    for (int id : fwd_order_[g])
      if (graph_.tasks[id].backward_first) kernels.insert(kernels.end(), {{id, true}, {id, false}});
    for (const bool dgrad : {true, false})
      for (int id : fwd_order_[g])
        if (!graph_.tasks[id].backward_first) kernels.push_back({id, dgrad});
  }
  // Gradient reduces: each GPU's part of every reduce must end before the pass does.
  reduce_cursor_.assign(n_, 0);
  reduce_busy_.assign(n_, false);
  reduce_pumping_.assign(n_, false);
  reduce_again_.assign(n_, false);
  reduce_wait_.clear();
  for (std::size_t r = 0; r < graph_.reduces.size(); ++r) {
    const GradientReduce& spec = graph_.reduces[r];
    reduce_wait_.push_back(spec.wgrads_before);
    reduces_.push_back(std::make_unique<AllToAllV>(
        ctx_, "grad reduce e" + std::to_string(spec.expert), Pass::backward, spec.payload,
        [this](int g) { reduce_part_done(g); }));
    result_.gradient_bytes += reduces_.back()->total_bytes();
    bwd_.open += n_;
  }
  shared_expert_kernels(Pass::backward, 2);  // data and weight gradient
  for (int g = 0; g < n_; ++g) {
    pump_comm(Pass::backward, g);
    pump_reduce(g);
    pump_backward_compute(g);
  }
}

void LayerRun::pump_reduce(int gpu) {
  // As pump_comm: a part with nothing to move ends inside start(), and this loop takes the next one.
  const bool outer = reduce_pumping_[gpu];
  reduce_pumping_[gpu] = true;
  do {
    reduce_again_[gpu] = false;
    const std::size_t r = reduce_cursor_[gpu];
    if (reduce_busy_[gpu] || r >= reduces_.size() || reduce_wait_[r][gpu] > 0) break;
    reduce_busy_[gpu] = true;
    reduces_[r]->start(gpu);
  } while (reduce_again_[gpu]);
  reduce_pumping_[gpu] = outer;
}

void LayerRun::reduce_part_done(int gpu) {
  reduce_busy_[gpu] = false;
  ++reduce_cursor_[gpu];
  close(Pass::backward);
  if (reduce_pumping_[gpu]) reduce_again_[gpu] = true;
  else pump_reduce(gpu);
}

void LayerRun::pump_backward_compute(int gpu) {
  PassState& p = bwd_;
  if (p.compute_cursor.empty()) return;
  const std::vector<BackwardKernel>& kernels = bwd_kernels_[gpu];
  while (p.compute_cursor[gpu] < kernels.size()) {
    const BackwardKernel next = kernels[p.compute_cursor[gpu]];
    const int id = next.task;
    const GemmTask& task = graph_.tasks[id];
    if (task.input_stage >= 0 && !p.stage_in[gpu][task.input_stage]) return;
    if (p.ce_pending[id] > 0) return;
    if (task.restored_weights && !p.synced_in[gpu]) return;
    ++p.compute_cursor[gpu];
    const bool dgrad = next.dgrad;
    ctx_.kernel(
        gpu, task.work_ps, Pass::backward, dgrad ? "gemm dgrad" : "gemm wgrad",
        [this, id, dgrad](Time_ps, Time_ps) {
          if (dgrad) backward_dgrad_done(id);
          else backward_wgrad_done(id);
        },
        task.hbm_fraction);
  }
}

void LayerRun::backward_dgrad_done(int id) {
  const GemmTask& task = graph_.tasks[id];
  for (int k : task.stages) --bwd_.combine_block[task.gpu][k];
  for (int l : task.ce_legs) {
    const CeLeg& leg = graph_.ce_legs[l];
    const double bytes = leg_bytes(leg, TokenPhase::grad_combine);
    ctx_.ce_copy(leg.to, leg.from, bytes, Pass::backward, "input grads", [this, l] {
      const int from = graph_.ce_legs[l].from;
      for (int k = 0; k < stages_; ++k) --bwd_.combine_block[from][k];
      pump_comm(Pass::backward, from);
      close(Pass::backward);
    });
    result_.ce_token_bytes += bytes;
  }
  pump_comm(Pass::backward, task.gpu);
}

void LayerRun::backward_wgrad_done(int id) {
  const GemmTask& task = graph_.tasks[id];
  for (int inst : task.instances) {
    const std::size_t i = static_cast<std::size_t>(inst);
    for (int at = ce_grad_offsets_[i]; at < ce_grad_offsets_[i + 1]; ++at) {
      const Transfer& t = plan_.transfers[static_cast<std::size_t>(ce_grads_[static_cast<std::size_t>(at)])];
      ctx_.ce_copy(t.src_gpu, t.dst_gpu, static_cast<double>(t.bytes), Pass::backward,
                   "grads e" + std::to_string(plan_.instances[inst].expert), [this] { close(Pass::backward); });
      result_.gradient_bytes += static_cast<double>(t.bytes);
    }
  }
  --wgrads_left_[task.gpu];
  for (int r : task.reduces) --reduce_wait_[static_cast<std::size_t>(r)][task.gpu];
  if (!task.reduces.empty()) pump_reduce(task.gpu);
  pump_comm(Pass::backward, task.gpu);
  close(Pass::backward);
}

// ---- totals ------------------------------------------------------------------------------------

LayerResult LayerRun::run() {
  start_forward();
  ctx_.queue().run();
  result_.forward_ps = forward_end_ps_;
  result_.backward_ps = backward_ ? backward_end_ps_ - backward_start_ps_ : 0;
  const Time_ps layer_ps = std::max<Time_ps>(1, result_.layer_ps());
  const Topology& topo = ctx_.topology();
  FlowNetwork& net = ctx_.network();
  auto util = [&](LinkId link) {
    return net.link_bytes(link) / (GBps_to_bytes_per_ps(net.link_capacity_GBps(link)) * static_cast<double>(layer_ps));
  };
  for (int g = 0; g < n_; ++g) {
    result_.compute_busy_ps.push_back(ctx_.sms(g).compute_busy_ps());
    result_.copy_engine_busy_ps.push_back(ctx_.copy_engine(g).busy_ps());
    result_.nvlink_out_util.push_back(util(topo.nvlink_out(g)));
    result_.nic_out_util.push_back(util(topo.nic_out(g)));
  }
  result_.forward_gemm_groups.assign(n_, {});
  for (int g = 0; g < n_; ++g)
    for (int id : fwd_order_[g]) result_.forward_gemm_groups[g].push_back(graph_.tasks[id].group);
  result_.timeline = std::move(ctx_.timeline());
  return std::move(result_);  // the timeline is millions of events at wide EP: moved, never copied
}

}  // namespace epsim

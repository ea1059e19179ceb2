#include "sim/replay/layer_run.hpp"

#include <algorithm>
#include <map>
#include <tuple>

namespace epsim {

LayerRun::LayerRun(SimContext& context, const Plan& plan, const ExchangeFanout& fanout,
                   const std::vector<std::int64_t>& local_tokens, bool backward)
    : ctx_(context),
      plan_(plan),
      fanout_(fanout),
      local_tokens_(local_tokens),
      backward_(backward),
      n_(context.num_gpus()),
      stages_(std::max(1, plan.exchange_stages)) {
  build_groups();
  init_nodes();
  result_.routed_gemm_fwd_ps.assign(n_, 0);
  result_.gemm_finish_fwd_ps.assign(n_, 0);
}

// ---- the plan as groups, legs and per-stage byte matrices ------------------------------------------

void LayerRun::build_groups() {
  const std::vector<std::int64_t> inst_tokens = plan_.tokens_per_instance();
  std::vector<int> group_of_instance(plan_.instances.size(), -1);
  groups_of_.assign(n_, {});
  for (int g = 0; g < n_; ++g) {
    for (const GemmGroup& gg : plan_.gemm_order[g]) {
      Group group;
      group.gpu = g;
      std::vector<std::int64_t> rows;
      for (int i : gg.instances) {
        rows.push_back(inst_tokens[i]);
        group_of_instance[i] = static_cast<int>(groups_.size());
      }
      group.work_ps = ctx_.gemm().grouped_time_ps(rows, ctx_.model().expert_ffn_size);
      group.hbm_fraction = ctx_.gemm().hbm_fraction(rows, ctx_.model().expert_ffn_size);
      groups_of_[g].push_back(static_cast<int>(groups_.size()));
      groups_.push_back(group);
    }
  }
  // A group waits for the exchange stages its tokens belong to (a GPU's own tokens are stage 0 of the
  // exchange, as the dispatch kernel tells the GPU what it received), and that stage's combine waits
  // for the group. Stage -1 tokens (computed where they are, outside the exchange) tie it to nothing;
  // tokens brought by Copy Engine tie it to their copies instead.
  // The last combine stage is issued after every expert GEMM of the GPU that took part in the
  // exchange, whatever stage its tokens came in (Copy Engine ones included), as frameworks issue the
  // combine after the expert computation on the stream.
  auto add_stage = [](Group& group, int stage) {
    if (std::find(group.stages.begin(), group.stages.end(), stage) == group.stages.end())
      group.stages.push_back(stage);
  };
  for (const TokenRoute& r : plan_.routes) {
    const int dst = plan_.instances[r.instance].gpu;
    if (r.tokens <= 0 || r.stage < 0) continue;
    Group& group = groups_[group_of_instance[r.instance]];
    add_stage(group, stages_ - 1);
    const bool by_copy_engine = r.carrier == Carrier::copy_engine && (r.via_gpu >= 0 ? r.via_gpu : r.src_rank) != dst;
    if (by_copy_engine) continue;
    group.input_stage = std::max(group.input_stage, r.stage);
    add_stage(group, r.stage);
  }
  ce_weights_pending_.assign(plan_.instances.size(), 0);
  for (const Transfer& t : plan_.transfers) {
    if (t.pass != PassKind::forward || t.bytes <= 0) continue;
    if (t.carrier == Carrier::ep_backend) groups_[group_of_instance[t.instance]].ep_weights = true;
    if (t.carrier == Carrier::copy_engine) ++ce_weights_pending_[t.instance];
  }
  // validate_plan guarantees every instance is in exactly one group, so group_of_instance is complete.
  ce_legs_.clear();
  std::map<std::tuple<int, int, int>, CeLeg> legs;  // (from, to, group): a fixed order
  for (const TokenRoute& r : plan_.routes) {
    const int dst = plan_.instances[r.instance].gpu;
    if (r.tokens <= 0 || r.carrier != Carrier::copy_engine) continue;
    const int from = r.via_gpu >= 0 ? r.via_gpu : r.src_rank;
    if (from == dst) continue;
    const int group = group_of_instance[r.instance];
    CeLeg& leg = legs[{from, dst, group}];
    leg.from = from;
    leg.to = dst;
    leg.group = group;
    leg.after_dispatch = r.via_gpu >= 0 && r.via_gpu != r.src_rank;
    leg.tokens += static_cast<double>(r.tokens);
  }
  for (auto& [key, leg] : legs) {
    groups_[leg.group].ce_legs.push_back(static_cast<int>(ce_legs_.size()));
    ce_legs_.push_back(leg);
  }
}

void LayerRun::init_nodes() {
  planner_ready_.assign(ctx_.topology().num_nodes(), true);
  node_dispatch_left_.assign(ctx_.topology().num_nodes(), 0);
  for (int g = 0; g < n_; ++g) ++node_dispatch_left_[ctx_.topology().node_of(g)];
}

double LayerRun::leg_bytes(const CeLeg& leg, TokenPhase phase) const {
  return leg.tokens * ctx_.token_bytes(phase);
}

ExchangePayload LayerRun::stage_bytes(int stage, bool reverse, double bytes_per_token) const {
  ExchangePayload payload;
  payload.to_sources = reverse;
  payload.gpu_bytes.assign(n_, std::vector<double>(n_, 0.0));
  // Each stage reads only its own legs, so that many stages do not multiply the work.
  for (const LegTokens& leg : fanout_.gpu_legs(stage)) {
    const double b = leg.tokens * bytes_per_token;
    if (reverse) payload.gpu_bytes[leg.dst][leg.src] += b;
    else payload.gpu_bytes[leg.src][leg.dst] += b;
  }
  if (fanout_.copies() == TokenCopies::per_node) {
    payload.node_bytes.assign(n_, std::vector<double>(ctx_.topology().num_nodes(), 0.0));
    for (const LegTokens& leg : fanout_.node_legs(stage)) payload.node_bytes[leg.src][leg.dst] += leg.tokens * bytes_per_token;
  }
  return payload;
}

std::vector<std::vector<double>> LayerRun::transfer_bytes(PassKind pass) const {
  std::vector<std::vector<double>> bytes(n_, std::vector<double>(n_, 0.0));
  for (const Transfer& t : plan_.transfers)
    if (t.pass == pass && t.carrier == Carrier::ep_backend && t.bytes > 0 && t.src_gpu != t.dst_gpu)
      bytes[t.src_gpu][t.dst_gpu] += static_cast<double>(t.bytes);
  return bytes;
}

// ---- communication streams ---------------------------------------------------------------------

void LayerRun::add_comm_ops(PassState& p, Pass which) {
  const bool fwd = which == Pass::forward;
  // Token exchanges run with their phase's kernel; weights and gradients on the EP backend's kernel
  // with no fixed cost of their own.
  auto add = [&](OpKind kind, int stage, const std::string& name, ExchangePayload bytes,
                 CommKernel kernel) {
    const std::size_t index = p.ops.size();
    CommOp op;
    op.kind = kind;
    op.stage = stage;
    op.collective = std::make_unique<AllToAllV>(
        ctx_, name, which, std::move(bytes), [this, which, index](int g) { comm_part_done(which, g, index); }, kernel);
    if (kind == OpKind::weights) {
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
  p.ops.reserve(2 * static_cast<std::size_t>(stages_) + 1);
  for (int k = 0; k < stages_; ++k)
    add(OpKind::dispatch, k, staged(fwd ? "dispatch" : "grad dispatch", k),
        stage_bytes(k, false, ctx_.token_bytes(to_experts)), ctx_.comm_kernel(to_experts));
  const auto moved = transfer_bytes(fwd ? PassKind::forward : PassKind::backward);
  const bool any_moved = std::any_of(moved.begin(), moved.end(), [](const std::vector<double>& row) {
    return std::any_of(row.begin(), row.end(), [](double b) { return b > 0; });
  });
  if (fwd && any_moved) add(OpKind::weights, 0, "weights", moved, CommKernel{});
  for (int k = 0; k < stages_; ++k)
    add(OpKind::combine, k, staged(fwd ? "combine" : "grad combine", k), stage_bytes(k, true, ctx_.token_bytes(back)),
        ctx_.comm_kernel(back));
  if (!fwd && any_moved) add(OpKind::gradients, 0, "gradients", moved, CommKernel{});

  p.comm_cursor.assign(n_, 0);
  p.comm_busy.assign(n_, false);
  p.pumping.assign(n_, false);
  p.pump_again.assign(n_, false);
  p.stage_in.assign(n_, std::vector<bool>(stages_, false));
  p.weights_in.assign(n_, false);
  p.compute_cursor.assign(n_, 0);
  p.leg_started.assign(ce_legs_.size(), false);
  p.ce_pending.assign(groups_.size(), 0);
  p.combine_block.assign(n_, std::vector<int>(stages_, 0));
  for (std::size_t id = 0; id < groups_.size(); ++id) {
    p.ce_pending[id] = static_cast<int>(groups_[id].ce_legs.size());
    for (int k : groups_[id].stages) ++p.combine_block[groups_[id].gpu][k];
  }
  // Outputs that come back by Copy Engine must be there before the intermediate GPU combines.
  for (const CeLeg& leg : ce_legs_)
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
    for (int k = 0; k < kernels_per_gpu; ++k)
      ctx_.kernel(g, work, pass, pass == Pass::forward ? "shared expert fwd" : "shared expert bwd",
                  [](Time_ps, Time_ps) {}, hbm);
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
  add_comm_ops(fwd_, Pass::forward);
  fwd_.open = n_ + static_cast<int>(groups_.size() + ce_legs_.size());
  shared_expert_kernels(Pass::forward, 1);
  if (!overlapped)
    for (int node = 0; node < ctx_.topology().num_nodes(); ++node) planner_done(node);
  for (int g = 0; g < n_; ++g) {
    pump_comm(Pass::forward, g);
    pump_forward_compute(g);
  }
}

void LayerRun::planner_done(int node) {
  planner_ready_[node] = true;
  // Weights first: the Copy Engine is FIFO, and a dynamic GEMM needs both its weights and its tokens.
  for (const Transfer& t : plan_.transfers) {
    if (t.pass != PassKind::forward || t.carrier != Carrier::copy_engine || t.bytes <= 0) continue;
    if (ctx_.topology().node_of(t.src_gpu) != node) continue;
    const int inst = t.instance;
    ctx_.ce_copy(t.src_gpu, t.dst_gpu, static_cast<double>(t.bytes), Pass::forward,
                 "weights e" + std::to_string(plan_.instances[inst].expert), [this, inst] {
                   --ce_weights_pending_[inst];
                   pump_forward_compute(plan_.instances[inst].gpu);
                 });
    result_.weight_bytes += static_cast<double>(t.bytes);
  }
  const int first = node * ctx_.topology().gpus_per_node();
  for (int g = first; g < std::min(n_, first + ctx_.topology().gpus_per_node()); ++g)
    maybe_start_ce_legs(Pass::forward, g);
}

void LayerRun::maybe_start_ce_legs(Pass which, int from) {
  PassState& p = state(which);
  const bool dispatched = p.stage_in.empty() ? false : p.stage_in[from][stages_ - 1];
  if (which == Pass::forward && !planner_ready_[ctx_.topology().node_of(from)]) return;
  for (std::size_t l = 0; l < ce_legs_.size(); ++l) {
    const CeLeg& leg = ce_legs_[l];
    if (leg.from != from || p.leg_started[l] || (leg.after_dispatch && !dispatched)) continue;
    p.leg_started[l] = true;
    const bool fwd = which == Pass::forward;
    const double bytes = leg_bytes(leg, fwd ? TokenPhase::dispatch : TokenPhase::grad_dispatch);
    ctx_.ce_copy(leg.from, leg.to, bytes, which, fwd ? "tokens" : "output grads", [this, which, l] {
      const CeLeg& arrived = ce_legs_[l];
      --state(which).ce_pending[arrived.group];
      if (which == Pass::forward) pump_forward_compute(arrived.to);
      else pump_backward_compute(arrived.to);
    });
    result_.ce_token_bytes += bytes;
  }
}

void LayerRun::pump_forward_compute(int gpu) {
  PassState& p = fwd_;
  if (p.compute_cursor.empty()) return;  // not launched yet
  while (p.compute_cursor[gpu] < groups_of_[gpu].size()) {
    const int id = groups_of_[gpu][p.compute_cursor[gpu]];
    const Group& group = groups_[id];
    if (group.input_stage >= 0 && !p.stage_in[gpu][group.input_stage]) return;
    if (p.ce_pending[id] > 0 || (group.ep_weights && !p.weights_in[gpu])) return;
    for (int i : plan_.gemm_order[gpu][p.compute_cursor[gpu]].instances)
      if (ce_weights_pending_[i] > 0) return;
    ++p.compute_cursor[gpu];
    ctx_.kernel(
        gpu, group.work_ps, Pass::forward, "gemm fwd",
        [this, id](Time_ps start, Time_ps end) {
          result_.routed_gemm_fwd_ps[groups_[id].gpu] += end - start;
          result_.gemm_finish_fwd_ps[groups_[id].gpu] = end;
          forward_group_done(id);
        },
        group.hbm_fraction);
  }
}

void LayerRun::forward_group_done(int id) {
  const Group& group = groups_[id];
  for (int k : group.stages) --fwd_.combine_block[group.gpu][k];
  for (int l : group.ce_legs) {
    const CeLeg& leg = ce_legs_[l];
    const double bytes = leg_bytes(leg, TokenPhase::combine);
    ctx_.ce_copy(leg.to, leg.from, bytes, Pass::forward, "outputs", [this, l] {
      const int from = ce_legs_[l].from;
      for (int k = 0; k < stages_; ++k) --fwd_.combine_block[from][k];
      pump_comm(Pass::forward, from);
      close(Pass::forward);
    });
    result_.ce_token_bytes += bytes;
  }
  pump_comm(Pass::forward, group.gpu);
  close(Pass::forward);
}

// ---- backward ----------------------------------------------------------------------------------

void LayerRun::start_backward() {
  backward_start_ps_ = ctx_.now_ps();
  add_comm_ops(bwd_, Pass::backward);
  wgrads_left_.assign(n_, 0);
  for (const Group& group : groups_) ++wgrads_left_[group.gpu];
  int ce_gradients = 0;
  for (const Transfer& t : plan_.transfers)
    if (t.pass == PassKind::backward && t.carrier == Carrier::copy_engine && t.bytes > 0) ++ce_gradients;
  // Every GPU's communication stream, every weight-gradient GEMM, every input-gradient copy back and
  // every gradient copy must finish before the pass does.
  bwd_.open = n_ + static_cast<int>(groups_.size() + ce_legs_.size()) + ce_gradients;
  shared_expert_kernels(Pass::backward, 2);  // data and weight gradient
  for (int g = 0; g < n_; ++g) {
    pump_comm(Pass::backward, g);
    pump_backward_compute(g);
  }
}

void LayerRun::pump_backward_compute(int gpu) {
  PassState& p = bwd_;
  if (p.compute_cursor.empty()) return;
  const std::size_t count = groups_of_[gpu].size();
  // Kernel k < count is group k's data gradient; k >= count is group k - count's weight gradient.
  while (p.compute_cursor[gpu] < 2 * count) {
    const std::size_t k = p.compute_cursor[gpu];
    const int id = groups_of_[gpu][k % count];
    const Group& group = groups_[id];
    if (group.input_stage >= 0 && !p.stage_in[gpu][group.input_stage]) return;
    if (p.ce_pending[id] > 0) return;
    ++p.compute_cursor[gpu];
    const bool dgrad = k < count;
    ctx_.kernel(
        gpu, group.work_ps, Pass::backward, dgrad ? "gemm dgrad" : "gemm wgrad",
        [this, id, dgrad](Time_ps, Time_ps) {
          if (dgrad) backward_dgrad_done(id);
          else backward_wgrad_done(id);
        },
        group.hbm_fraction);
  }
}

void LayerRun::backward_dgrad_done(int id) {
  const Group& group = groups_[id];
  for (int k : group.stages) --bwd_.combine_block[group.gpu][k];
  for (int l : group.ce_legs) {
    const CeLeg& leg = ce_legs_[l];
    const double bytes = leg_bytes(leg, TokenPhase::grad_combine);
    ctx_.ce_copy(leg.to, leg.from, bytes, Pass::backward, "input grads", [this, l] {
      const int from = ce_legs_[l].from;
      for (int k = 0; k < stages_; ++k) --bwd_.combine_block[from][k];
      pump_comm(Pass::backward, from);
      close(Pass::backward);
    });
    result_.ce_token_bytes += bytes;
  }
  pump_comm(Pass::backward, group.gpu);
}

void LayerRun::backward_wgrad_done(int id) {
  const Group& group = groups_[id];
  const int g = group.gpu;
  const std::size_t index =
      std::find(groups_of_[g].begin(), groups_of_[g].end(), id) - groups_of_[g].begin();
  for (int inst : plan_.gemm_order[g][index].instances) {
    for (const Transfer& t : plan_.transfers) {
      if (t.pass != PassKind::backward || t.instance != inst || t.carrier != Carrier::copy_engine || t.bytes <= 0)
        continue;
      ctx_.ce_copy(t.src_gpu, t.dst_gpu, static_cast<double>(t.bytes), Pass::backward,
                   "grads e" + std::to_string(plan_.instances[inst].expert), [this] { close(Pass::backward); });
      result_.gradient_bytes += static_cast<double>(t.bytes);
    }
  }
  --wgrads_left_[g];
  pump_comm(Pass::backward, g);
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
  result_.timeline = std::move(ctx_.timeline());
  return result_;
}

}  // namespace epsim

#include "sim/replay/layer_run.hpp"

#include <map>

namespace epsim {

LayerRun::LayerRun(SimContext& context, const Plan& plan, const std::vector<std::int64_t>& local_tokens,
                   bool backward)
    : ctx_(context), plan_(plan), local_tokens_(local_tokens), backward_(backward), n_(context.num_gpus()) {
  const std::vector<std::int64_t> inst_tokens = plan_.tokens_per_instance();
  group_work_ps_.resize(n_);
  for (int g = 0; g < n_; ++g) {
    for (const GemmGroup& group : plan_.gemm_order[g]) {
      std::vector<std::int64_t> rows;
      for (int i : group.instances) rows.push_back(inst_tokens[i]);
      group_work_ps_[g].push_back(ctx_.gemm().grouped_time_ps(rows, ctx_.model().expert_ffn_size));
    }
  }
  // Copy Engine token routes travel as one copy per (src, dst) pair, in a fixed order.
  std::map<std::pair<int, int>, double> ce_pairs;
  for (const TokenRoute& r : plan_.routes)
    if (r.carrier == Carrier::copy_engine && r.tokens > 0)
      ce_pairs[{r.src_rank, plan_.instances[r.instance].gpu}] +=
          static_cast<double>(r.tokens) * ctx_.model().token_bytes();
  for (const auto& [pair, bytes] : ce_pairs) ce_routes_.push_back({pair.first, pair.second, bytes});
  for (auto& v : ce_in_) v.assign(n_, 0);
  weights_pending_.assign(plan_.instances.size(), 0);
  result_.routed_gemm_fwd_ps.assign(n_, 0);
  result_.gemm_finish_fwd_ps.assign(n_, 0);
}

std::vector<std::vector<double>> LayerRun::ep_bytes(bool reverse) const {
  std::vector<std::vector<double>> bytes(n_, std::vector<double>(n_, 0.0));
  for (const TokenRoute& r : plan_.routes) {
    if (r.carrier != Carrier::ep_backend) continue;
    const int dst = plan_.instances[r.instance].gpu;
    const double b = static_cast<double>(r.tokens) * ctx_.model().token_bytes();
    if (reverse) bytes[dst][r.src_rank] += b;
    else bytes[r.src_rank][dst] += b;
  }
  return bytes;
}

void LayerRun::shared_expert_kernels(Pass pass, int kernels_per_gpu) {
  const ModelSpec& m = ctx_.model();
  if (m.shared_experts == 0) return;
  for (int g = 0; g < n_; ++g) {
    if (local_tokens_[g] == 0) continue;
    const std::vector<std::int64_t> rows(m.shared_experts, local_tokens_[g]);
    const Time_ps work = ctx_.gemm().grouped_time_ps(rows, m.shared_expert_ffn_size);
    for (int k = 0; k < kernels_per_gpu; ++k)
      ctx_.kernel(g, work, pass, pass == Pass::forward ? "shared expert fwd" : "shared expert bwd",
                  [](Time_ps, Time_ps) {});
  }
}

// ---- forward ---------------------------------------------------------------------------------

void LayerRun::start_forward() {
  const PlannerCost& planner = plan_.planner;
  if (planner.site == PlannerSite::none || planner.duration_ps == 0) {
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
  shared_expert_kernels(Pass::forward, 1);
  tokens_in_.assign(n_, false);
  cursor_.assign(n_, 0);
  groups_left_.resize(n_);
  for (int g = 0; g < n_; ++g) groups_left_[g] = plan_.gemm_order[g].size();

  forward_parts_left_ = n_;  // every rank's combine kernel
  for (const CeRoute& c : ce_routes_) {
    ++ce_in_[0][c.dst];
    ++forward_parts_left_;  // and every Copy Engine copy back
  }
  for (const Transfer& t : plan_.transfers)
    if (t.pass == PassKind::forward && t.carrier != Carrier::none && t.bytes > 0) ++weights_pending_[t.instance];

  dispatch_ = std::make_unique<AllToAllV>(ctx_, "dispatch", Pass::forward, ep_bytes(false), [this](int g) {
    tokens_in_[g] = true;
    try_submit_forward(g);
  });
  combine_ = std::make_unique<AllToAllV>(ctx_, "combine", Pass::forward, ep_bytes(true),
                                         [this](int) { forward_part_done(); });
  result_.ep_token_bytes += dispatch_->total_bytes() + combine_->total_bytes();

  for (const Transfer& t : plan_.transfers) {
    if (t.pass != PassKind::forward || t.carrier == Carrier::none || t.bytes <= 0) continue;
    const int inst = t.instance;
    auto arrived = [this, inst] {
      --weights_pending_[inst];
      try_submit_forward(plan_.instances[inst].gpu);
    };
    const std::string name = "weights e" + std::to_string(plan_.instances[inst].expert);
    if (t.carrier == Carrier::copy_engine) ctx_.ce_copy(t.src_gpu, t.dst_gpu, t.bytes, Pass::forward, name, arrived);
    else ctx_.ep_message(t.src_gpu, t.dst_gpu, t.bytes, Pass::forward, name, arrived);
    result_.weight_bytes += t.bytes;
  }
  for (const CeRoute& c : ce_routes_) {
    ctx_.ce_copy(c.src, c.dst, c.bytes, Pass::forward, "tokens", [this, dst = c.dst] {
      --ce_in_[0][dst];
      try_submit_forward(dst);
    });
    result_.ce_token_bytes += c.bytes;
  }
  for (int g = 0; g < n_; ++g) dispatch_->start(g);
}

void LayerRun::try_submit_forward(int gpu) {
  const auto& groups = plan_.gemm_order[gpu];
  if (!tokens_in_[gpu] || ce_in_[0][gpu] > 0) return;
  if (groups.empty() && groups_left_[gpu] == 0) {
    groups_left_[gpu] = static_cast<std::size_t>(-1);  // mark handled: nothing to compute here
    forward_gemms_done(gpu);
    return;
  }
  while (cursor_[gpu] < groups.size()) {
    const GemmGroup& group = groups[cursor_[gpu]];
    for (int i : group.instances)
      if (weights_pending_[i] > 0) return;
    const Time_ps work = group_work_ps_[gpu][cursor_[gpu]];
    ++cursor_[gpu];
    ctx_.kernel(gpu, work, Pass::forward, "gemm fwd", [this, gpu](Time_ps start, Time_ps end) {
      result_.routed_gemm_fwd_ps[gpu] += end - start;
      result_.gemm_finish_fwd_ps[gpu] = end;
      if (--groups_left_[gpu] == 0) forward_gemms_done(gpu);
    });
  }
}

void LayerRun::forward_gemms_done(int gpu) {
  combine_->start(gpu);
  for (const CeRoute& c : ce_routes_) {
    if (c.dst != gpu) continue;
    ctx_.ce_copy(c.dst, c.src, c.bytes, Pass::forward, "outputs", [this] { forward_part_done(); });
    result_.ce_token_bytes += c.bytes;
  }
}

void LayerRun::forward_part_done() {
  if (--forward_parts_left_ > 0) return;
  forward_end_ps_ = ctx_.now_ps();
  if (backward_) start_backward();
}

// ---- backward --------------------------------------------------------------------------------

void LayerRun::start_backward() {
  backward_start_ps_ = ctx_.now_ps();
  shared_expert_kernels(Pass::backward, 2);  // data and weight gradient
  tokens_in_.assign(n_, false);
  cursor_.assign(n_, 0);  // 0: waiting for gradients; 1: GEMMs submitted

  // Parts: every rank's gradient-combine kernel, every GPU's last weight-gradient GEMM, every CE copy
  // back, every gradient transfer.
  backward_parts_left_ = 2 * n_;
  for (const CeRoute& c : ce_routes_) {
    ++ce_in_[1][c.dst];
    ++backward_parts_left_;
  }
  for (const Transfer& t : plan_.transfers)
    if (t.pass == PassKind::backward && t.carrier != Carrier::none && t.bytes > 0) ++backward_parts_left_;

  grad_dispatch_ = std::make_unique<AllToAllV>(ctx_, "grad dispatch", Pass::backward, ep_bytes(false), [this](int g) {
    tokens_in_[g] = true;
    try_submit_backward(g);
  });
  grad_combine_ = std::make_unique<AllToAllV>(ctx_, "grad combine", Pass::backward, ep_bytes(true),
                                              [this](int) { backward_part_done(); });
  result_.ep_token_bytes += grad_dispatch_->total_bytes() + grad_combine_->total_bytes();
  for (const CeRoute& c : ce_routes_) {
    ctx_.ce_copy(c.src, c.dst, c.bytes, Pass::backward, "output grads", [this, dst = c.dst] {
      --ce_in_[1][dst];
      try_submit_backward(dst);
    });
    result_.ce_token_bytes += c.bytes;
  }
  for (int g = 0; g < n_; ++g) grad_dispatch_->start(g);
}

void LayerRun::try_submit_backward(int gpu) {
  if (!tokens_in_[gpu] || ce_in_[1][gpu] > 0 || cursor_[gpu] != 0) return;
  cursor_[gpu] = 1;
  const auto& groups = plan_.gemm_order[gpu];
  // Data gradients first: the gradient combine needs only them, so it overlaps the weight gradients.
  auto dgrads_left = std::make_shared<std::size_t>(groups.size());
  auto dgrads_done = [this, gpu] {
    grad_combine_->start(gpu);
    for (const CeRoute& c : ce_routes_) {
      if (c.dst != gpu) continue;
      ctx_.ce_copy(c.dst, c.src, c.bytes, Pass::backward, "input grads", [this] { backward_part_done(); });
      result_.ce_token_bytes += c.bytes;
    }
  };
  if (groups.empty()) {
    dgrads_done();
    backward_part_done();  // no weight-gradient GEMMs either
    return;
  }
  for (std::size_t k = 0; k < groups.size(); ++k)
    ctx_.kernel(gpu, group_work_ps_[gpu][k], Pass::backward, "gemm dgrad",
                [dgrads_left, dgrads_done](Time_ps, Time_ps) {
                  if (--*dgrads_left == 0) dgrads_done();
                });
  for (std::size_t k = 0; k < groups.size(); ++k) {
    const bool last = k + 1 == groups.size();
    ctx_.kernel(gpu, group_work_ps_[gpu][k], Pass::backward, "gemm wgrad", [this, gpu, k, last](Time_ps, Time_ps) {
      for (int inst : plan_.gemm_order[gpu][k].instances) {
        for (const Transfer& t : plan_.transfers) {
          if (t.pass != PassKind::backward || t.instance != inst || t.carrier == Carrier::none || t.bytes <= 0) continue;
          const std::string name = "grads e" + std::to_string(plan_.instances[inst].expert);
          if (t.carrier == Carrier::copy_engine)
            ctx_.ce_copy(t.src_gpu, t.dst_gpu, t.bytes, Pass::backward, name, [this] { backward_part_done(); });
          else
            ctx_.ep_message(t.src_gpu, t.dst_gpu, t.bytes, Pass::backward, name, [this] { backward_part_done(); });
          result_.gradient_bytes += t.bytes;
        }
      }
      if (last) backward_part_done();
    });
  }
}

void LayerRun::backward_part_done() {
  if (--backward_parts_left_ > 0) return;
  backward_end_ps_ = ctx_.now_ps();
}

// ---- totals ----------------------------------------------------------------------------------

LayerResult LayerRun::run() {
  start_forward();
  ctx_.queue().run();
  result_.forward_ps = forward_end_ps_;
  result_.backward_ps = backward_ ? backward_end_ps_ - backward_start_ps_ : 0;
  const Time_ps layer_ps = std::max<Time_ps>(1, result_.layer_ps());
  const Topology& topo = ctx_.topology();
  FlowNetwork& net = ctx_.network();
  for (int g = 0; g < n_; ++g) {
    result_.compute_busy_ps.push_back(ctx_.sms(g).compute_busy_ps());
    result_.copy_engine_busy_ps.push_back(ctx_.copy_engine(g).busy_ps());
    auto util = [&](LinkId link) {
      return net.link_bytes(link) / (GBps_to_bytes_per_ps(net.link_capacity_GBps(link)) * layer_ps);
    };
    result_.nvlink_out_util.push_back(util(topo.nvlink_out(g)));
    result_.nic_out_util.push_back(util(topo.nic_out(g)));
  }
  result_.timeline = std::move(ctx_.timeline());
  return result_;
}

}  // namespace epsim

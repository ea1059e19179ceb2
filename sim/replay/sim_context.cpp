#include "sim/replay/sim_context.hpp"

#include <cmath>

#include "sim/hardware/log2_curve.hpp"

namespace epsim {

namespace {



}  // namespace

double SimContext::token_bytes(TokenPhase phase) const {
  if (!model_.precision.set) return static_cast<double>(model_.token_bytes());
  const PrecisionSpec& p = model_.precision;
  switch (phase) {
    case TokenPhase::dispatch: return static_cast<double>(model_.token_bytes(p.dispatch));
    case TokenPhase::combine: return static_cast<double>(model_.token_bytes(p.combine));
    case TokenPhase::grad_dispatch: return static_cast<double>(model_.token_bytes(p.grad_dispatch));
    case TokenPhase::grad_combine: return static_cast<double>(model_.token_bytes(p.grad_combine));
  }
  return static_cast<double>(model_.token_bytes());
}

CommKernel SimContext::comm_kernel(TokenPhase phase) const {
  const EpBackendSpec& ep = hw_.ep_backend;
  const bool to_experts = phase == TokenPhase::dispatch || phase == TokenPhase::grad_dispatch;
  CommKernel kernel;
  kernel.engine = to_experts ? ep.dispatch_engine : ep.combine_engine;
  kernel.fixed_ps = us_to_ps(to_experts ? ep.dispatch_fixed_us : ep.combine_fixed_us);
  return kernel;
}

SimContext::SimContext(const HardwareSpec& hw, const ModelSpec& model, int num_gpus)
    : hw_(hw), model_(model), network_(queue_), topology_(hw, num_gpus, network_), gemm_(hw, model) {
  FlowNetwork::Sharing sharing;
  switch (sharing_for(hw.engine, num_gpus)) {
    case BandwidthSharing::automatic:  // sharing_for resolves it
    case BandwidthSharing::exact: sharing.mode = FlowNetwork::SharingMode::exact; break;
    case BandwidthSharing::epochs: sharing.mode = FlowNetwork::SharingMode::epochs; break;
    case BandwidthSharing::per_link: sharing.mode = FlowNetwork::SharingMode::per_link; break;
    case BandwidthSharing::local: sharing.mode = FlowNetwork::SharingMode::local; break;
    case BandwidthSharing::coupled: sharing.mode = FlowNetwork::SharingMode::coupled; break;
  }
  sharing.tolerance = hw.engine.epoch_tolerance;
  network_.set_sharing(sharing);
  for (int g = 0; g < num_gpus; ++g) {
    sms_.push_back(std::make_unique<SmPool>(queue_, hw.gpu.sms));
    copy_engines_.push_back(std::make_unique<CopyEngine>(queue_, network_, us_to_ps(hw.copy_engine.fixed_cost_us),
                                                         hw.copy_engine.bw_GBps));
  }
  for (int n = 0; n < topology_.num_nodes(); ++n) hosts_.push_back(std::make_unique<HostCpu>(queue_));
  active_copies_.assign(num_gpus, 0);
}

void SimContext::couple_busiest(const std::vector<double>& load, const std::vector<double>& synced) {
  if (network_.sharing().mode != FlowNetwork::SharingMode::coupled) return;
  const int n = num_gpus();
  const std::size_t count = std::max<std::size_t>(1, static_cast<std::size_t>(std::ceil(hw_.engine.coupled_gpus * n - 1e-9)));
  const auto at = [](const std::vector<double>& v, int g) { return static_cast<std::size_t>(g) < v.size() ? v[static_cast<std::size_t>(g)] : 0.0; };
  // The `count` GPUs first by `key`, ties to the lower GPU.
  const auto busiest = [&](std::vector<int>& gpus, const std::vector<double>& key) {
    const std::size_t k = std::min(count, gpus.size());
    std::partial_sort(gpus.begin(), gpus.begin() + static_cast<std::ptrdiff_t>(k), gpus.end(), [&](int a, int b) {
      return at(key, a) > at(key, b) || (at(key, a) == at(key, b) && a < b);
    });
    gpus.resize(k);
  };
  std::vector<int> syncs;
  for (int g = 0; g < n; ++g)
    if (at(synced, g) > 0) syncs.push_back(g);
  busiest(syncs, synced);
  // Then the others by load: every GPU not taken, syncs' receivers beyond the first k included.
  std::vector<char> taken(static_cast<std::size_t>(n), 0);
  for (const int g : syncs) taken[static_cast<std::size_t>(g)] = 1;
  std::vector<int> others;
  for (int g = 0; g < n; ++g)
    if (taken[static_cast<std::size_t>(g)] == 0) others.push_back(g);
  busiest(others, load);
  for (const std::vector<int>* set : {&syncs, &others})
    for (const int g : *set)
      for (const LinkId link : topology_.gpu_links(g)) network_.couple_group_of(link);
}

void SimContext::copies_touching(int gpu, int delta) {
  active_copies_[gpu] += delta;
  const double copy_GBps = hw_.copy_engine.bw_GBps * hw_.copy_engine.hbm_traffic_factor;
  sms_[gpu]->set_hbm_pressure(active_copies_[gpu] * copy_GBps / hw_.gpu.hbm_GBps);
}

double SimContext::message_efficiency(int src, int dst, double payload_bytes) const {
  const double fabric = topology_.same_node(src, dst) ? hw_.ep_backend.nvlink_efficiency
                                                       : hw_.ep_backend.ib_efficiency;
  return fabric * message_efficiency_at(hw_.ep_backend.message_efficiency, payload_bytes);
}

void SimContext::ep_message(int src, int dst, double payload_bytes, Pass pass, std::string name, Done done) {
  send_ep_message(src, dst, payload_bytes,
                  [this, src, dst, pass, payload_bytes, name = std::move(name), done = std::move(done)](
                      Time_ps start, Time_ps end) mutable {
                    record_message(src, dst, pass, std::move(name), payload_bytes, start, end);
                    done();
                  });
}

void SimContext::send_ep_message(int src, int dst, double payload_bytes, FlowNetwork::DoneCallback on_end,
                                 EndHints end_hints) {
  const double wire_bytes = payload_bytes / message_efficiency(src, dst, payload_bytes);
  topology_.ep_route(src, dst, route_);
  network_.start_flow(route_, wire_bytes, topology_.ep_latency_ps(src, dst), FlowNetwork::kNoRateCap,
                      std::move(on_end), end_hints);
}

void SimContext::record_message(int src, int dst, Pass pass, std::string name, double payload_bytes,
                                Time_ps start_ps, Time_ps end_ps) {
  // Filled in place: a wide layer records one of these per flow, and an event built and then
  // pushed moved its name twice (a call to copy even an empty one's few bytes, each time).
  TimelineEvent& e = timeline_.events.emplace_back();
  e.gpu = src;
  e.track = topology_.same_node(src, dst) ? Track::nvlink_out : Track::nic_out;
  e.pass = pass;
  e.name = std::move(name);
  e.start_ps = start_ps;
  e.end_ps = end_ps;
  e.bytes = payload_bytes;
}

void SimContext::ce_copy(int src, int dst, double bytes, Pass pass, std::string name, Done done) {
  copy_engines_[src]->enqueue(
      topology_.nvlink_route(src, dst), bytes,
      [this, src, dst, pass, name = std::move(name), bytes, done = std::move(done)](Time_ps start, Time_ps end) mutable {
        copies_touching(src, -1);
        copies_touching(dst, -1);
        timeline_.events.push_back({src, Track::copy_engine, pass, std::move(name), start, end, bytes});
        done();
      },
      [this, src, dst] {
        copies_touching(src, +1);
        copies_touching(dst, +1);
      });
}

void SimContext::kernel(int gpu, Time_ps work_ps, Pass pass, const std::string& name,
                        std::function<void(Time_ps, Time_ps)> done, double hbm_fraction) {
  sms_[gpu]->submit(
      work_ps,
      [this, gpu, pass, name, done](Time_ps start, Time_ps end) {
        timeline_.events.push_back({gpu, Track::compute, pass, name, start, end, 0});
        done(start, end);
      },
      hbm_fraction);
}

void SimContext::d2h_copy(int gpu, double bytes, Pass pass, const std::string& name, Done done) {
  const int node = topology_.node_of(gpu);
  network_.start_flow({topology_.pcie_d2h(gpu)}, bytes, us_to_ps(hw_.pcie.latency_us), FlowNetwork::kNoRateCap,
                      [this, node, pass, name, bytes, done](Time_ps start, Time_ps end) {
                        timeline_.events.push_back(
                            {node * topology_.gpus_per_node(), Track::host_cpu, pass, name, start, end, bytes});
                        done();
                      });
}

void SimContext::host_task(int gpu, Time_ps duration_ps, Pass pass, const std::string& name, Done done) {
  const int node = topology_.node_of(gpu);
  hosts_[node]->submit(duration_ps, [this, node, pass, name, done](Time_ps start, Time_ps end) {
    timeline_.events.push_back({node * topology_.gpus_per_node(), Track::host_cpu, pass, name, start, end, 0});
    done();
  });
}

void SimContext::record(int gpu, Track track, Pass pass, const std::string& name, Time_ps start_ps, double bytes) {
  timeline_.events.push_back({gpu, track, pass, name, start_ps, queue_.now_ps(), bytes});
}

}  // namespace epsim

// The resources of one simulated layer (event queue, links, SMs, Copy Engines, host CPUs) and the
// few operations the replay builds on: an EP-backend message, a Copy Engine copy, a kernel on the
// compute stream, a host task. Each records itself on the timeline when it ends (an EP message sent
// with send_ep_message is recorded by its caller, which holds what the record needs).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/engine/copy_engine.hpp"
#include "sim/engine/event_queue.hpp"
#include "sim/engine/flow_network.hpp"
#include "sim/engine/host_cpu.hpp"
#include "sim/engine/sm_pool.hpp"
#include "sim/hardware/gemm_cost.hpp"
#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/hardware/topology.hpp"
#include "sim/replay/timeline.hpp"

namespace epsim {

/// The token exchanges of a MoE layer. Each has its own number format (model.precision) and its own
/// kind of kernel (ep_backend.dispatch_* for the two that carry tokens or output gradients to the
/// experts, ep_backend.combine_* for the two that bring results back).
enum class TokenPhase { dispatch, combine, grad_dispatch, grad_combine };

/// How every rank's part of one all-to-all runs.
struct CommKernel {
  /// sms: one communication kernel per rank moves every message and holds comm_sms SMs. copy_engine:
  /// the intra-node messages are Copy Engine copies (no SMs); the inter-node ones stay on the kernel,
  /// which then runs (and holds its SMs) only on ranks that send or receive across nodes.
  CommEngine engine = CommEngine::sms;
  /// Paid by a rank's kernel after it takes its SMs and before its first byte moves.
  Time_ps fixed_ps = 0;
};

class SimContext {
 public:
  using Done = std::function<void()>;

  SimContext(const HardwareSpec& hw, const ModelSpec& model, int num_gpus);
  SimContext(const SimContext&) = delete;
  SimContext& operator=(const SimContext&) = delete;

  /// An EP-backend message of `payload_bytes` from `src` to `dst` (src != dst). Its wire bytes include
  /// the fabric's protocol efficiency and the message-size curve (IB's when the two GPUs are in
  /// different nodes, NVLink's otherwise). It crosses topology().ep_route(src, dst) as one flow: for
  /// GPUs in different nodes under rail_forward that is IB into topology().forwarding_gpu(src, dst),
  /// then NVLink on to dst, with IB latency plus NVLink latency, so each (src, dst) message is sent
  /// over IB on its own. A caller that models DeepEP's once-per-node send addresses the forwarding GPU
  /// (an IB-only message) and then sends one intra-node message from there to each destination rank.
  /// With SM-limited kernels (ep_backend.sm_GBps > 0) it also crosses src's ep_sms_out and dst's
  /// ep_sms_in links, which count its wire bytes.
  void ep_message(int src, int dst, double payload_bytes, Pass pass, std::string name, Done done);
  /// The same message, recorded by the caller: `on_end(start, end)` runs when it has arrived, and is
  /// to call record_message. A caller that keeps each message's fields anyway (AllToAllV's hops)
  /// sends this way, so that nothing is held here for the message (a wide layer sends millions, and
  /// each record of its own was one more cache miss at its end). `end_hints`: what `on_end` reads
  /// first (FlowNetwork::start_flow).
  void send_ep_message(int src, int dst, double payload_bytes, FlowNetwork::DoneCallback on_end,
                       EndHints end_hints = {});
  /// Records an EP message that ran from `start_ps` to `end_ps` (on src's NVLink or NIC track).
  void record_message(int src, int dst, Pass pass, std::string name, double payload_bytes, Time_ps start_ps,
                      Time_ps end_ps);
  /// A copy on `src`'s Copy Engine to `dst` in the same node. While it runs it adds HBM traffic on both
  /// GPUs (copy_engine.hbm_traffic_factor), which memory-bound kernels there feel.
  void ce_copy(int src, int dst, double bytes, Pass pass, std::string name, Done done);
  /// A kernel of `work_ps` (all SMs free) on `gpu`'s compute stream, needing `hbm_fraction` of HBM
  /// bandwidth at full speed.
  void kernel(int gpu, Time_ps work_ps, Pass pass, const std::string& name,
              std::function<void(Time_ps start_ps, Time_ps end_ps)> done, double hbm_fraction = 0.0);
  /// A device-to-host copy of `bytes` from `gpu` over PCIe (recorded on the node's host track).
  void d2h_copy(int gpu, double bytes, Pass pass, const std::string& name, Done done);
  /// A task of `duration_ps` on the host CPU of `gpu`'s node.
  void host_task(int gpu, Time_ps duration_ps, Pass pass, const std::string& name, Done done);
  /// Records an interval that no single engine resource reports (an EP kernel holding SMs).
  void record(int gpu, Track track, Pass pass, const std::string& name, Time_ps start_ps, double bytes = 0);

  /// Bytes one token moves in `phase`: model().token_bytes(the phase's dtype), FP8 scales included.
  /// A ModelSpec whose precision was left at PrecisionSpec's defaults (as tests build them in code)
  /// moves model().token_bytes() = hidden x dtype_bytes in every phase, as before phases had their own
  /// dtype; for dtype_bytes 2 that is the same figure.
  double token_bytes(TokenPhase phase) const;
  /// The kernel a token phase runs with, from hardware().ep_backend.
  CommKernel comm_kernel(TokenPhase phase) const;

  EventQueue& queue() { return queue_; }
  FlowNetwork& network() { return network_; }
  const Topology& topology() const { return topology_; }
  SmPool& sms(int gpu) { return *sms_[gpu]; }
  CopyEngine& copy_engine(int gpu) { return *copy_engines_[gpu]; }
  const GemmCost& gemm() const { return gemm_; }
  const HardwareSpec& hardware() const { return hw_; }
  const ModelSpec& model() const { return model_; }
  int num_gpus() const { return topology_.num_gpus(); }
  Time_ps now_ps() const { return queue_.now_ps(); }
  Timeline& timeline() { return timeline_; }
  /// Coupled sharing (engine.bandwidth_sharing: coupled): with k = hardware().engine.coupled_gpus of
  /// the GPUs (at least one), the links of the k GPUs that receive the most weight-sync bytes
  /// (`synced`, per GPU) follow, and those of the k busiest others by `load` (per GPU, any unit);
  /// ties go to the lower GPU. Before the first flow; nothing in other modes.
  void couple_busiest(const std::vector<double>& load, const std::vector<double>& synced);
  /// Makes room for `transfers` EP messages and flows in flight at once.
  void reserve_transfers(std::size_t transfers) { network_.reserve_flows(transfers); }
  /// Makes room for `more` timeline events beyond those recorded (a pass knows its count up front).
  void reserve_timeline(std::size_t more) {
    if (timeline_.events.size() + more > timeline_.events.capacity()) timeline_.events.reserve(timeline_.events.size() + more);
  }
  /// Whether exchange hops name themselves on the timeline (see simulate_layer); on by default.
  bool transfer_names() const { return transfer_names_; }
  void set_transfer_names(bool on) { transfer_names_ = on; }

 private:
  double message_efficiency(int src, int dst, double payload_bytes) const;
  void copies_touching(int gpu, int delta);

  const HardwareSpec& hw_;
  const ModelSpec& model_;
  EventQueue queue_;
  FlowNetwork network_;
  Topology topology_;
  GemmCost gemm_;
  std::vector<std::unique_ptr<SmPool>> sms_;
  std::vector<std::unique_ptr<CopyEngine>> copy_engines_;
  std::vector<std::unique_ptr<HostCpu>> hosts_;  ///< one per node
  std::vector<int> active_copies_;                 ///< per GPU: Copy Engine copies reading or writing its HBM
  Timeline timeline_;
  bool transfer_names_ = true;
  std::vector<LinkId> route_;               ///< scratch for ep_message's route
};

}  // namespace epsim

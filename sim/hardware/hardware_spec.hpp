// The cluster a run is simulated on, as loaded from a hardware YAML file (models/*.yaml, kind:
// hardware). Every field is in the unit its name says; defaults and their sources live in
// models/h100-sxm-8.yaml, not here.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace epsim {

/// One point of the grouped-GEMM efficiency curve: the fraction of peak reached by an expert GEMM
/// with `tokens_per_expert` rows (after padding). Interpolated linearly in log2(tokens) between points,
/// clamped at both ends.
struct GemmEfficiencyPoint {
  double tokens_per_expert;
  double efficiency;
};

/// Protocol efficiency of the EP backend for a message of `bytes`: wire time = bytes / (bw * efficiency).
/// Interpolated like the GEMM curve.
struct MessageEfficiencyPoint {
  double bytes;
  double efficiency;
};

struct GpuSpec {
  int sms = 0;
  double bf16_peak_TFLOPs = 0;  ///< dense
  double fp8_peak_TFLOPs = 0;   ///< dense; 0: no FP8 tensor cores (an FP8 GEMM is refused)
  double hbm_GBps = 0;          ///< achievable streaming bandwidth
  double hbm_capacity_GB = 0;
};

struct GemmSpec {
  int row_alignment = 0;  ///< each expert's token rows are padded up to a multiple of this
  std::vector<GemmEfficiencyPoint> efficiency;      ///< BF16 (and FP16) inputs, of bf16_peak_TFLOPs
  std::vector<GemmEfficiencyPoint> fp8_efficiency;  ///< FP8 inputs, of fp8_peak_TFLOPs; empty: not known
  double launch_us = 0;  ///< fixed cost per grouped-GEMM kernel
};

struct CopyEngineSpec {
  double bw_GBps = 0;        ///< one direction, one copy
  double fixed_cost_us = 0;  ///< enqueue + P2P latency per copy
  /// HBM bytes a copy adds on each of its two GPUs per byte copied (it reads the source's HBM and
  /// writes the destination's). Kernels share the rest of HBM bandwidth: a memory-bound GEMM slows
  /// down while copies touch its GPU, a compute-bound one does not (see SmPool).
  double hbm_traffic_factor = 1.0;
};

struct NvlinkSpec {
  double port_bw_GBps = 0;  ///< per GPU per direction, line rate (through NVSwitch)
  double latency_us = 0;    ///< per message, GPU to GPU through NVSwitch
};

struct InfinibandSpec {
  double nic_bw_GBps = 0;  ///< per GPU per direction, line rate (NDR: 50)
  double latency_us = 0;   ///< per message, GPU to GPU across the fabric
};

struct PcieSpec {
  double h2d_GBps = 0;
  double d2h_GBps = 0;
  double latency_us = 0;
};

/// What moves a phase's tokens: communication kernels on the SMs (DeepEP, NCCL: they hold comm_sms
/// away from the GEMMs while they run) or the Copy Engines (no SMs held; copy_engine bandwidth and fixed
/// cost per copy; inside an NVLink domain only).
enum class CommEngine { sms, copy_engine };
const char* to_string(CommEngine engine);

/// How many copies of a token the EP exchange moves. per_expert: one per (token, expert) pair, as an
/// all-to-all-v of tokens permuted by expert does (Megatron's NCCL dispatcher). per_gpu: one per
/// destination GPU, however many of the token's experts live there (DeepEP's intranode kernels,
/// pplx-kernels); the combine sums a GPU's outputs for a token before sending them back. per_node: one
/// per destination node over RDMA to the rail peer, which forwards one copy per destination GPU over
/// NVLink (DeepEP's internode normal kernels); the combine sums per GPU, then per node at the peer.
enum class TokenCopies { per_expert, per_gpu, per_node };
const char* to_string(TokenCopies copies);

/// How the EP backend (DeepEP-style all-to-all-v) is modelled.
struct EpBackendSpec {
  int comm_sms = 0;  ///< SMs its dispatch/combine kernels hold while running
  /// Payload one communication SM moves per second and direction (GB/s): a rank's kernel sends and
  /// receives at most comm_sms * sm_GBps, whatever the links allow. 0: the SMs never limit.
  double sm_GBps = 0;
  /// Fixed cost of one dispatch / combine kernel on a rank (launch, count exchange, barrier), paid
  /// before its first byte moves.
  double dispatch_fixed_us = 0;
  double combine_fixed_us = 0;
  CommEngine dispatch_engine = CommEngine::sms;
  CommEngine combine_engine = CommEngine::sms;
  /// "rail_forward": inter-node tokens cross IB to the same-local-index GPU of the destination node,
  /// then NVLink to the destination (DeepEP normal kernels); "direct": IB straight to the destination.
  std::string internode_route;
  /// Copies of a token the exchange moves; per_node needs internode_route rail_forward.
  TokenCopies token_copies = TokenCopies::per_expert;
  /// Payload fraction of line rate for large messages (protocol overhead), per fabric.
  double nvlink_efficiency = 0;
  double ib_efficiency = 0;
  /// Extra size dependence, 1.0 for large messages: wire bytes = bytes / (fabric eff * curve(bytes)).
  std::vector<MessageEfficiencyPoint> message_efficiency;
};

/// How the engine shares link bandwidth between flows (docs/config.md, `engine`; docs/performance.md).
enum class BandwidthSharing { exact, epochs, per_link, local, coupled, automatic };
/// "exact", "epochs", "per_link", "local", "coupled" or "auto" (automatic), as written in a hardware file.
const char* to_string(BandwidthSharing sharing);
/// The mode a name written by to_string stands for; nullopt for any other name.
std::optional<BandwidthSharing> bandwidth_sharing_from_string(std::string_view name);

/// Simulator settings read with the hardware file: they change how precisely, not what, is simulated.
struct EngineSpec {
  /// exact: max-min rates re-solved at every flow start and end. epochs: after a flow ends, the flows
  /// it speeds up may keep their rates a little longer, so that several ends share one re-solve.
  /// per_link: each link shares itself equally among its flows on its own, not max-min (the coarse
  /// model for wide EP, sim/engine/per_link_sharing.hpp). local: max-min within each GPU's sending
  /// links and within its receiving links, each side on its own (sim/engine/group_sharing.hpp).
  /// coupled: local, with the sending and receiving links of the busiest GPUs (coupled_gpus of them)
  /// and of those receiving weight syncs held to the rate the links before them on each flow's route
  /// give it (sim/engine/group_coupling.cpp).
  /// automatic ("auto", the default): exact up to exact_max_gpus simulated GPUs, coupled up to
  /// coupled_max_gpus, local beyond (sharing_for). The default: up to exact_max_gpus it is exact,
  /// and past it exact takes seconds to minutes a layer where coupled takes about one second
  /// (docs/performance.md, "auto, the default").
  BandwidthSharing bandwidth_sharing = BandwidthSharing::automatic;
  /// auto: the most GPUs simulated with exact sharing. Up to EP 256 exact took up to about 2 s a
  /// layer in the layers measured; beyond, exact grows as about EP^4 (minutes a layer at EP 1,024),
  /// and local costs about what per_link does, EP^2, but is 1 to 2.2% early where skewed traffic
  /// meets across the fabric (docs/performance.md, "local").
  int exact_max_gpus = 256;
  /// auto: the most GPUs simulated with coupled sharing, past exact_max_gpus (none when not above
  /// it). On the wide sweep's layers coupled came to within 0.06% of exact for UltraEP where local
  /// was 1.7% early, and to -0.9% for the ideal-balance what-if at EP 1,024 where local was -4.5%,
  /// at 3 to 5 x local's CPU time (0.4 to 0.7 s a layer at EP 512, 3 to 5 s at EP 1,024;
  /// docs/performance.md, "auto's coupled range").
  int coupled_max_gpus = 1024;
  /// coupled: the share of the simulated GPUs whose links follow besides weight syncs' receivers,
  /// the busiest (LayerRun::couple_busiest); in (0, 1]. A tenth removed nearly all of local's error
  /// on the layers measured (docs/performance.md, "coupled").
  double coupled_gpus = 0.1;
  /// epochs: the idle capacity a link may accumulate while re-solves wait, as a fraction of its
  /// busy time (FlowNetwork::Sharing::tolerance).
  double epoch_tolerance = 0.001;
};

/// The sharing a simulation of `num_gpus` GPUs runs with: `engine.bandwidth_sharing`, with auto
/// resolved by the GPU count (never returns automatic).
BandwidthSharing sharing_for(const EngineSpec& engine, int num_gpus);
/// auto's ranges as summaries write them: "exact up to 256`unit`, coupled up to 1024, local beyond",
/// the coupled range only where coupled_max_gpus is above exact_max_gpus (sharing_for's rule).
std::string auto_ranges(const EngineSpec& engine, std::string_view unit = "");

struct HardwareSpec {
  std::string name;
  std::string description;  ///< one line for `epsim hardware list`; may be empty
  std::string source_file;  ///< where it was loaded from, for messages
  int nodes = 0;
  int gpus_per_node = 0;
  GpuSpec gpu;
  GemmSpec gemm;
  CopyEngineSpec copy_engine;
  NvlinkSpec nvlink;
  InfinibandSpec infiniband;
  PcieSpec pcie;
  EpBackendSpec ep_backend;
  EngineSpec engine;

  int total_gpus() const { return nodes * gpus_per_node; }
};

}  // namespace epsim

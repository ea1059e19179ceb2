// The Plan: the single contract between balancers, the simulator and the hardware runner. A balancer
// turns one (step, micro-batch, layer) of routing counts into a Plan; the engine executes it; the
// hw backend will execute the same Plan on GPUs. A Plan says where every expert instance lives, which
// tokens go to which instance over which carrier, which weights and gradients move, in what order each
// GPU runs its grouped GEMMs, and what planning itself costs. It carries no timing of its own.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/memory/default_init_allocator.hpp"

namespace epsim {

constexpr int kPlanVersion = 1;

/// How bytes travel. (The plan's enums are one byte each: a Transfer packs four of them in one word.)
enum class Carrier : std::uint8_t {
  ep_backend,   ///< the EP all-to-all-v (DeepEP/NCCL kernels: SMs + NVLink/IB)
  copy_engine,  ///< the GPU's P2P Copy Engine over NVLink (no SMs), inside a node
  none,         ///< already where it is needed (a rank's tokens for its own experts)
};

enum class InstanceKind {
  static_expert,   ///< the expert's home copy under the base placement
  dynamic_expert,  ///< a copy placed for this micro-batch only (weights moved in, gradients back)
  replica,         ///< a copy placed ahead of time (no per-micro-batch move)
};

/// One copy of an expert on one GPU.
struct ExpertInstance {
  int expert = 0;
  int gpu = 0;
  InstanceKind kind = InstanceKind::static_expert;
};

/// `tokens` assignments from source rank `src_rank` computed by instance `instance`.
///
/// A direct route moves the tokens src_rank -> instance GPU on `carrier` (and the outputs back the
/// same way in the combine). A two-phase route (via_gpu >= 0, FEPLB) first moves them on the EP
/// backend src_rank -> via_gpu (no transfer if equal), then via_gpu -> instance GPU on `carrier`
/// (the Copy Engine, inside one node); outputs return instance GPU -> via_gpu -> src_rank.
/// `stage` is the exchange step the EP leg belongs to (FasterMoE's group-wise exchange): a GPU's
/// stage k exchange starts after its stage k-1 exchange has finished on its communication stream, a
/// GEMM group waits for the stages of its tokens and combine stage k waits for the groups with stage-k
/// tokens. A rank's own tokens for its own experts take part in stage 0 like the others. Stage -1
/// marks tokens computed where they are, outside any exchange (FasterMoE's shadowed experts): they
/// neither wait for nor hold up an exchange.
///
/// A trivial type, without default member initialisers: a plan holds one route per (source,
/// instance) pair with tokens, tens of thousands in a wide layer, and a vector of trivial routes is
/// copied as plain bytes and grown without constructors (TokenRoutes). Every route is therefore
/// written with all six fields (a direct route: via_gpu -1, stage 0); `TokenRoute{}` zeroes them all,
/// which is not a direct route (via_gpu 0).
struct TokenRoute {
  int src_rank;
  int instance;
  std::int64_t tokens;
  Carrier carrier;
  int via_gpu;
  int stage;
};
static_assert(std::is_trivial_v<TokenRoute>, "TokenRoute stays trivial (see its comment)");

/// A plan's routes. Growing it leaves the new routes unwritten (DefaultInitAllocator), so that a
/// balancer can size it once for the most routes there can be, write them in place and cut it to the
/// routes written, without a pass that zeroes them first or a copy from a buffer of its own. Whoever
/// grows it with resize(n) writes all six fields of every new route.
using TokenRoutes = std::vector<TokenRoute, DefaultInitAllocator<TokenRoute>>;

enum class TransferKind : std::uint8_t { weights, gradients };
enum class PassKind : std::uint8_t { forward, backward };

/// When a transfer leaves.
///
/// Forward transfers:
///   after_dispatch   EP: in the collective after the dispatch stages; Copy Engine: once the planner
///                    is done.
///   before_dispatch  EP: a collective the dispatch waits for (replica weights synchronised first);
///                    Copy Engine: at the layer's start.
///   prefetch         issued at the layer's start beside the dispatch (FSEP's parameter all-gather).
/// Backward transfers:
///   after_dispatch   gradients (or weights) after the instance's weight-gradient GEMM. EP: one
///                    collective on the communication stream after the gradient-combine stages and
///                    after all of the GPU's weight-gradient GEMMs; Copy Engine: right after the
///                    instance's weight-gradient GEMM.
///   before_dispatch  weights only, EP only: a weights-sync collective on the communication stream
///                    before the gradient-dispatch stages; the data-gradient GEMMs of the instances it
///                    serves wait for it (UltraEP restores its copies' weights, blocking, before the
///                    expert backward).
///   after_wgrad      gradients only. EP: the pass's after_wgrad transfers of one expert (the
///                    instance's) form one collective, a reduce, on each GPU's gradient-reduce stream
///                    of its own, in expert order; a GPU joins it once the weight-gradient GEMMs of
///                    its instances of that expert are done, so it overlaps the gradient exchange and
///                    the other experts' backward (FasterMoE's per-expert ncclReduce issued right
///                    after that expert's backward). Copy Engine: as after_dispatch.
/// prefetch is for the forward only, after_wgrad for the backward only.
enum class TransferStart : std::uint8_t {
  after_dispatch,
  before_dispatch,
  prefetch,
  after_wgrad,
};

/// Bytes that move besides tokens: an expert's weights to a new instance before its GEMM (forward,
/// or restored before the backward), or its weight gradients back to the owner (backward). On the EP
/// backend a pass's transfers of one start form one collective (like FasterMoE's broadcast / reduce)
/// whose kernels hold SMs; TransferStart says where it runs.
///
/// A trivial type, like TokenRoute and for the same reason: LAER-MoE's FSEP plans hold 2 (N - 1)
/// transfers per instance (32,256 at EP 64; about four million at EP 1,024 with 1,024 experts),
/// written in place (Transfers). Its four one-byte enums come first and share a word, so that a
/// transfer takes 24 bytes, not 40: writing LAER-MoE's transfers was a fifth of its plan()'s time.
/// A brace list names them in this order: kind, pass, carrier, start, instance, src_gpu, dst_gpu,
/// bytes.
struct Transfer {
  TransferKind kind;
  PassKind pass;
  Carrier carrier;
  TransferStart start;
  int instance;  ///< the instance the bytes serve
  int src_gpu;
  int dst_gpu;
  std::int64_t bytes;
};
static_assert(std::is_trivial_v<Transfer>, "Transfer stays trivial (see its comment)");
static_assert(sizeof(Transfer) == 24, "a Transfer's enums share one word (see its comment)");

/// A plan's transfers. Growing it leaves the new ones unwritten (DefaultInitAllocator), as TokenRoutes
/// does: whoever grows it with resize(n) writes every field of every new transfer.
using Transfers = std::vector<Transfer, DefaultInitAllocator<Transfer>>;

/// A grouped GEMM: instances on one GPU computed by one kernel. Each GPU runs its groups in order,
/// except that a group marked `on_arrival` is launched at the first kernel boundary after its inputs
/// are in, ahead of groups listed before it that have not started (moved work is not left waiting
/// behind the receiver's own experts). A waiting on_arrival group does not hold up later groups: while
/// its inputs are missing, the GPU runs the next group in plan order that is not on_arrival. A group
/// marked `after_planner` also waits for its node's planner: its token count is only known once the
/// planner has decided (the home share of a split expert).
///
/// In the backward a GPU runs, first, each `backward_first` group's whole backward (its data-gradient
/// GEMM, then its weight-gradient GEMM) in the order the forward ran them, and then the other groups'
/// data-gradient GEMMs followed by their weight-gradient GEMMs (FastMoE v1 runs the shadowed experts'
/// backward before the exchanged experts', as their tokens need no gradient dispatch).
struct GemmGroup {
  int gpu = 0;
  std::vector<int> instances;
  bool on_arrival = false;
  bool after_planner = false;
  bool backward_first = false;
};

enum class PlannerSite { none, host_cpu, gpu };

/// When the planner runs. before_dispatch: the whole layer waits for it. after_dispatch (FEPLB): on
/// each node, once its GPUs' EP dispatch is done and the counts have reached the host (a device-to-host
/// copy of `d2h_bytes`), while the GPUs already compute; only Copy Engine moves wait for it.
enum class PlannerStart { before_dispatch, after_dispatch };

/// What it costs to make the plan, and where that time is spent.
struct PlannerCost {
  PlannerSite site = PlannerSite::none;
  Time_ps duration_ps = 0;
  PlannerStart start = PlannerStart::before_dispatch;
  std::int64_t d2h_bytes = 0;
};

struct Plan {
  int version = kPlanVersion;
  std::string balancer;
  std::uint32_t step = 0;
  std::uint32_t micro_batch = 0;
  std::uint32_t layer = 0;
  int num_gpus = 0;
  /// Exchange steps of the EP backend (1 = one all-to-all-v each way). Forward order on each GPU's
  /// communication stream: the EP weights synchronised before the dispatch (start before_dispatch),
  /// dispatch stages 0..K-1, the EP weight transfers (after_dispatch), combine stages 0..K-1.
  /// Backward: the EP weights restored before the gradient dispatch (before_dispatch), gradient
  /// dispatch stages 0..K-1, gradient combine stages 0..K-1, the EP gradients (after_dispatch).
  int exchange_stages = 1;
  std::vector<ExpertInstance> instances;
  Transfers transfers;
  /// Per GPU, its grouped GEMMs in execution order (forward; backward runs the backward_first groups'
  /// data- and weight-gradient GEMMs, then each other group's data-gradient GEMM in the same order,
  /// then their weight-gradient GEMMs).
  std::vector<std::vector<GemmGroup>> gemm_order;
  PlannerCost planner;
  /// Declared last so that a plan frees its routes first, before the GEMM lists' small blocks, one or
  /// two per GPU: glibc's malloc merges its bins of small free blocks whenever a large block is freed,
  /// and merged they make the next plan's small allocations take the slow path (at EP 64, UltraEP's
  /// plan() and the plan's destruction run 4% more instructions with the routes freed last).
  TokenRoutes routes;

  /// Tokens computed by each instance (sum of its routes).
  std::vector<std::int64_t> tokens_per_instance() const;
  /// L_g: tokens computed by each GPU.
  std::vector<std::int64_t> tokens_per_gpu() const;
};

/// Bounds every plan is held to, so that no count, sum or size derived from one can overflow.
constexpr int kMaxPlanGpus = 1 << 16;
constexpr int kMaxPlanExperts = 1 << 16;
constexpr int kMaxExchangeStages = 1 << 20;
constexpr std::int64_t kMaxPlanTokens = std::int64_t{1} << 40;  ///< all routes of a plan together
constexpr std::int64_t kMaxPlanBytes = std::int64_t{1} << 50;   ///< one transfer, or the counts' copy
constexpr Time_ps kMaxPlannerDuration_ps = Time_ps{3'600} * 1'000'000 * kPsPerUs;  ///< one hour

/// A structural defect of a plan: where it is, as a key path of the plan's JSON form
/// ("routes[3].instance"), and what is wrong with it.
struct PlanDefect {
  std::string place;
  std::string message;
};

/// The first structural defect of `plan`, if any: a scalar outside its bounds (num_gpus,
/// exchange_stages, the planner's cost), an index out of range (instance expert and GPU, route rank,
/// instance, via GPU and stage, transfer instance and GPUs, GEMM group instances), a negative or
/// oversized token or byte count, a carrier that contradicts the route, a transfer start its pass and
/// kind do not allow (TransferStart), gemm_order without exactly one
/// list per GPU or an instance not computed in exactly one GEMM group on its own GPU. `num_experts`
/// <= 0 when unknown (a plan read without its model): expert ids are then checked against
/// kMaxPlanExperts. With `gpus_per_node` > 0 it also checks that Copy Engine legs stay inside a node.
/// Every consumer of a plan may index with its fields once this found nothing.
std::optional<PlanDefect> find_plan_defect(const Plan& plan, int num_experts, int gpus_per_node = 0);

/// find_plan_defect for plans that balancers make: a defect throws std::logic_error naming it.
/// Balancers are code, so a bad plan is a bug, not bad input (plans read from files are checked by
/// their reader, which reports InputError).
void validate_plan(const Plan& plan, int num_experts, int gpus_per_node = 0);

const char* to_string(Carrier carrier);
const char* to_string(InstanceKind kind);

}  // namespace epsim

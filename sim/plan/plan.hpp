// The Plan: the single contract between balancers, the simulator and the hardware runner. A balancer
// turns one (step, micro-batch, layer) of routing counts into a Plan; the engine executes it; the
// hw backend will execute the same Plan on GPUs. A Plan says where every expert instance lives, which
// tokens go to which instance over which carrier, which weights and gradients move, in what order each
// GPU runs its grouped GEMMs, and what planning itself costs. It carries no timing of its own.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/core/time.hpp"

namespace epsim {

constexpr int kPlanVersion = 1;

/// How bytes travel.
enum class Carrier {
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
struct TokenRoute {
  int src_rank = 0;
  int instance = 0;
  std::int64_t tokens = 0;
  Carrier carrier = Carrier::ep_backend;
};

enum class TransferKind { weights, gradients };
enum class PassKind { forward, backward };

/// Bytes that move besides tokens: an expert's weights to a new instance before its GEMM (forward),
/// or its weight gradients back to the owner (backward).
struct Transfer {
  TransferKind kind = TransferKind::weights;
  PassKind pass = PassKind::forward;
  int instance = 0;  ///< the instance the bytes serve
  int src_gpu = 0;
  int dst_gpu = 0;
  std::int64_t bytes = 0;
  Carrier carrier = Carrier::ep_backend;
};

/// A grouped GEMM: instances on one GPU computed by one kernel. Each GPU runs its groups in order.
struct GemmGroup {
  int gpu = 0;
  std::vector<int> instances;
};

enum class PlannerSite { none, host_cpu, gpu };

/// What it costs to make the plan, and where that time is spent.
struct PlannerCost {
  PlannerSite site = PlannerSite::none;
  Time_ps duration_ps = 0;
};

struct Plan {
  int version = kPlanVersion;
  std::string balancer;
  std::uint32_t step = 0;
  std::uint32_t micro_batch = 0;
  std::uint32_t layer = 0;
  int num_gpus = 0;
  std::vector<ExpertInstance> instances;
  std::vector<TokenRoute> routes;
  std::vector<Transfer> transfers;
  /// Per GPU, its grouped GEMMs in execution order.
  std::vector<std::vector<GemmGroup>> gemm_order;
  PlannerCost planner;

  /// Tokens computed by each instance (sum of its routes).
  std::vector<std::int64_t> tokens_per_instance() const;
  /// L_g: tokens computed by each GPU.
  std::vector<std::int64_t> tokens_per_gpu() const;
};

/// Checks the plan's internal consistency (indices in range, every instance computed in exactly one
/// GEMM group on its own GPU, token counts non-negative); throws std::logic_error naming the defect.
/// Balancers are code, so a bad plan is a bug, not bad input.
void validate_plan(const Plan& plan, int num_experts);

const char* to_string(Carrier carrier);
const char* to_string(InstanceKind kind);

}  // namespace epsim

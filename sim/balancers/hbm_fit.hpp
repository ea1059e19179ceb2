// Whether a plan's expert weights fit in each GPU's HBM. A GPU holds, for each of the model's
// `moe_layers` resident MoE layers (laid out like the replayed one), the weights of every distinct
// routed expert it has an instance of (home, replica, shadow or dynamic copy) and of the shared
// experts. Activations, gradients, optimizer states and dense layers are not counted: the check is a
// floor on what the plan needs, so a plan it refuses cannot run on that GPU at all.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "sim/hardware/hardware_spec.hpp"
#include "sim/hardware/model_spec.hpp"
#include "sim/plan/plan.hpp"

namespace epsim {

/// What the GPU that needs the most expert-weight bytes needs.
struct HbmNeed {
  int gpu = 0;
  std::int64_t routed_experts = 0;  ///< distinct routed experts with an instance on that GPU
  double bytes = 0;                 ///< their weights and the shared experts', times moe_layers
};

/// The GPU with the largest expert-weight footprint under `plan` (the lowest index among equals).
HbmNeed largest_hbm_need(const Plan& plan, const ModelSpec& model);

/// A one-line message when some GPU's expert weights exceed gpu.hbm_capacity_GB, naming the GPU, the
/// bytes needed and the capacity; nothing when every GPU fits.
std::optional<std::string> hbm_overflow(const Plan& plan, const ModelSpec& model, const HardwareSpec& hw);

}  // namespace epsim

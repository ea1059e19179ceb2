#include "sim/balancers/hbm_fit.hpp"

#include <cstdio>
#include <set>
#include <utility>

namespace epsim {

namespace {

std::string gigabytes(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.4g GB", bytes / 1e9);
  return buf;
}

/// Whole bytes, without the overflow of a cast to an integer type.
std::string byte_count(double bytes) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.0f bytes", bytes);
  return buf;
}

}  // namespace

HbmNeed largest_hbm_need(const Plan& plan, const ModelSpec& model) {
  std::vector<std::int64_t> experts_on(static_cast<std::size_t>(plan.num_gpus), 0);
  std::set<std::pair<int, int>> seen;  // (gpu, expert)
  for (const ExpertInstance& i : plan.instances)
    if (seen.insert({i.gpu, i.expert}).second) ++experts_on[static_cast<std::size_t>(i.gpu)];
  const double shared_bytes = static_cast<double>(model.shared_weight_bytes());
  HbmNeed worst;
  for (int g = 0; g < plan.num_gpus; ++g) {
    const std::int64_t e = experts_on[static_cast<std::size_t>(g)];
    const double bytes =
        (static_cast<double>(e) * static_cast<double>(model.expert_weight_bytes()) + shared_bytes) * model.moe_layers;
    if (g == 0 || bytes > worst.bytes) worst = HbmNeed{g, e, bytes};
  }
  return worst;
}

std::optional<std::string> hbm_overflow(const Plan& plan, const ModelSpec& model, const HardwareSpec& hw) {
  if (plan.num_gpus <= 0) return std::nullopt;
  const HbmNeed need = largest_hbm_need(plan, model);
  const double capacity = hw.gpu.hbm_capacity_GB * 1e9;
  if (need.bytes <= capacity) return std::nullopt;
  return "the plan does not fit in HBM: GPU " + std::to_string(need.gpu) + " needs " + gigabytes(need.bytes) +
         " (" + byte_count(need.bytes) + ") for the weights of " +
         std::to_string(need.routed_experts) + " routed expert" + (need.routed_experts == 1 ? "" : "s") +
         (model.shared_experts > 0 ? " and " + std::to_string(model.shared_experts) + " shared" : std::string()) +
         " x " + std::to_string(model.moe_layers) + " MoE layer" + (model.moe_layers == 1 ? "" : "s") +
         " of model " + model.name + ", more than gpu.hbm_capacity_GB = " + gigabytes(capacity) + " of hardware " +
         hw.name;
}

}  // namespace epsim

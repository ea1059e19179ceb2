#include "sim/plan/plan.hpp"

#include <stdexcept>
#include <string>

namespace epsim {

std::vector<std::int64_t> Plan::tokens_per_instance() const {
  std::vector<std::int64_t> tokens(instances.size(), 0);
  for (const TokenRoute& r : routes) tokens[r.instance] += r.tokens;
  return tokens;
}

std::vector<std::int64_t> Plan::tokens_per_gpu() const {
  std::vector<std::int64_t> tokens(num_gpus, 0);
  for (const TokenRoute& r : routes) tokens[instances[r.instance].gpu] += r.tokens;
  return tokens;
}

namespace {

std::string indexed(const char* list, std::size_t i) { return std::string(list) + "[" + std::to_string(i) + "]"; }

/// An element of one of the plan's lists, named ("routes[12].tokens") only when a defect is found there.
struct Place {
  const char* list;
  std::size_t index;
  std::string operator+(const char* field) const { return indexed(list, index) + field; }
};

/// "value V outside [lo, hi)" for an index, "value V outside [lo, hi]" for a bound.
std::string outside(std::int64_t v, std::int64_t lo, std::int64_t hi, bool half_open) {
  return "value " + std::to_string(v) + " outside [" + std::to_string(lo) + ", " + std::to_string(hi) +
         (half_open ? ")" : "]");
}

}  // namespace

std::optional<PlanDefect> find_plan_defect(const Plan& plan, int num_experts, int gpus_per_node) {
  const int gpus = plan.num_gpus;
  if (gpus < 1 || gpus > kMaxPlanGpus) return PlanDefect{"num_gpus", outside(gpus, 1, kMaxPlanGpus, false)};
  if (plan.exchange_stages < 1 || plan.exchange_stages > kMaxExchangeStages)
    return PlanDefect{"exchange_stages", outside(plan.exchange_stages, 1, kMaxExchangeStages, false)};
  const int experts = num_experts > 0 ? num_experts : kMaxPlanExperts;
  const std::size_t n_inst = plan.instances.size();
  for (std::size_t i = 0; i < n_inst; ++i) {
    const ExpertInstance& inst = plan.instances[i];
    if (inst.expert < 0 || inst.expert >= experts)
      return PlanDefect{indexed("instances", i) + ".expert",
                        outside(inst.expert, 0, experts, true) + (num_experts > 0 ? " (the model's experts)" : "")};
    if (inst.gpu < 0 || inst.gpu >= gpus)
      return PlanDefect{indexed("instances", i) + ".gpu", outside(inst.gpu, 0, gpus, true) + " (num_gpus)"};
  }
  const auto inst_count = static_cast<std::int64_t>(n_inst);
  std::int64_t total_tokens = 0;
  for (std::size_t k = 0; k < plan.routes.size(); ++k) {
    const TokenRoute& r = plan.routes[k];
    // The place is spelled out only for a defect: a wide plan has millions of routes.
    const Place at{"routes", k};
    if (r.src_rank < 0 || r.src_rank >= gpus)
      return PlanDefect{at + ".src_rank", outside(r.src_rank, 0, gpus, true) + " (num_gpus)"};
    if (r.instance < 0 || r.instance >= inst_count)
      return PlanDefect{at + ".instance", outside(r.instance, 0, inst_count, true) + " (the plan's instances)"};
    if (r.tokens < 0 || r.tokens > kMaxPlanTokens - total_tokens)
      return PlanDefect{at + ".tokens", r.tokens < 0 ? "negative token count " + std::to_string(r.tokens)
                                                     : "the plan's routes carry more than 2^40 tokens"};
    total_tokens += r.tokens;
    if (r.via_gpu < -1 || r.via_gpu >= gpus)
      return PlanDefect{at + ".via_gpu", outside(r.via_gpu, -1, gpus, true) + " (-1 for none, or a GPU)"};
    if (r.stage < -1 || r.stage >= plan.exchange_stages)
      return PlanDefect{at + ".stage", outside(r.stage, -1, plan.exchange_stages, true) + " (exchange_stages)"};
    if (r.stage == -1 && (r.carrier != Carrier::none || r.via_gpu >= 0))
      return PlanDefect{at + ".stage", "stage -1 is for tokens computed where they are (carrier none, no via_gpu)"};
    const int dst = plan.instances[static_cast<std::size_t>(r.instance)].gpu;
    const int last_hop_from = r.via_gpu >= 0 ? r.via_gpu : r.src_rank;
    if (r.carrier == Carrier::none && last_hop_from != dst)
      return PlanDefect{at + ".carrier", "carrier 'none' for tokens that change GPU"};
    if (r.carrier == Carrier::copy_engine && last_hop_from != dst && gpus_per_node > 0 &&
        last_hop_from / gpus_per_node != dst / gpus_per_node)
      return PlanDefect{at + ".carrier", "Copy Engine route leaves its node"};
  }
  for (std::size_t k = 0; k < plan.transfers.size(); ++k) {
    const Transfer& t = plan.transfers[k];
    const Place at{"transfers", k};
    if (t.instance < 0 || t.instance >= inst_count)
      return PlanDefect{at + ".instance", outside(t.instance, 0, inst_count, true) + " (the plan's instances)"};
    if (t.src_gpu < 0 || t.src_gpu >= gpus)
      return PlanDefect{at + ".src_gpu", outside(t.src_gpu, 0, gpus, true) + " (num_gpus)"};
    if (t.dst_gpu < 0 || t.dst_gpu >= gpus)
      return PlanDefect{at + ".dst_gpu", outside(t.dst_gpu, 0, gpus, true) + " (num_gpus)"};
    if (t.bytes < 0 || t.bytes > kMaxPlanBytes) return PlanDefect{at + ".bytes", outside(t.bytes, 0, kMaxPlanBytes, false)};
    if (t.pass == PassKind::forward && t.start == TransferStart::after_wgrad)
      return PlanDefect{at + ".start", "after_wgrad is for backward transfers"};
    if (t.pass == PassKind::backward && t.start == TransferStart::prefetch)
      return PlanDefect{at + ".start", "a backward transfer leaves after its instance's weight-gradient GEMM "
                                       "(after_dispatch, after_wgrad) or restores weights before the gradient "
                                       "dispatch (before_dispatch)"};
    if (t.pass == PassKind::backward && t.start == TransferStart::before_dispatch &&
        (t.kind != TransferKind::weights || t.carrier != Carrier::ep_backend))
      return PlanDefect{at + ".start", "a backward transfer before the gradient dispatch restores weights on the EP "
                                       "backend (kind weights, carrier ep_backend)"};
    if (t.pass == PassKind::backward && t.start == TransferStart::after_wgrad && t.kind != TransferKind::gradients)
      return PlanDefect{at + ".start", "after_wgrad is for gradients"};
  }
  if (plan.gemm_order.size() != static_cast<std::size_t>(gpus))
    return PlanDefect{"gemm_order", "has " + std::to_string(plan.gemm_order.size()) + " lists, expected one per GPU (" +
                                        std::to_string(gpus) + ")"};
  std::vector<int> seen(n_inst, 0);
  for (std::size_t g = 0; g < plan.gemm_order.size(); ++g) {
    for (std::size_t k = 0; k < plan.gemm_order[g].size(); ++k) {
      const GemmGroup& group = plan.gemm_order[g][k];
      const auto at = [&] { return indexed("gemm_order", g) + "[" + std::to_string(k) + "]"; };
      if (group.gpu != static_cast<int>(g)) return PlanDefect{at(), "a GEMM group listed under the wrong GPU"};
      for (std::size_t m = 0; m < group.instances.size(); ++m) {
        const int i = group.instances[m];
        const auto where = [&] { return at() + "[" + std::to_string(m) + "]"; };
        if (i < 0 || i >= inst_count) return PlanDefect{where(), outside(i, 0, inst_count, true) + " (the plan's instances)"};
        if (plan.instances[static_cast<std::size_t>(i)].gpu != static_cast<int>(g))
          return PlanDefect{where(), "instance " + std::to_string(i) + " lives on GPU " +
                                       std::to_string(plan.instances[static_cast<std::size_t>(i)].gpu) +
                                       ", not on GPU " + std::to_string(g)};
        if (++seen[static_cast<std::size_t>(i)] > 1)
          return PlanDefect{where(), "instance " + std::to_string(i) + " is in a second GEMM group"};
      }
    }
  }
  for (std::size_t i = 0; i < n_inst; ++i)
    if (seen[i] == 0) return PlanDefect{"gemm_order", "instance " + std::to_string(i) + " is in no GEMM group"};
  const PlannerCost& planner = plan.planner;
  if (planner.duration_ps < 0 || planner.duration_ps > kMaxPlannerDuration_ps)
    return PlanDefect{"planner.duration_ps", outside(planner.duration_ps, 0, kMaxPlannerDuration_ps, false)};
  if (planner.d2h_bytes < 0 || planner.d2h_bytes > kMaxPlanBytes)
    return PlanDefect{"planner.d2h_bytes", outside(planner.d2h_bytes, 0, kMaxPlanBytes, false)};
  return std::nullopt;
}

void validate_plan(const Plan& plan, int num_experts, int gpus_per_node) {
  if (const auto defect = find_plan_defect(plan, num_experts, gpus_per_node))
    throw std::logic_error("invalid plan from balancer '" + plan.balancer + "' (step " + std::to_string(plan.step) +
                           ", micro-batch " + std::to_string(plan.micro_batch) + ", layer " +
                           std::to_string(plan.layer) + "): " + defect->place + ": " + defect->message);
}

const char* to_string(Carrier carrier) {
  switch (carrier) {
    case Carrier::ep_backend: return "ep_backend";
    case Carrier::copy_engine: return "copy_engine";
    case Carrier::none: return "none";
  }
  return "?";
}

const char* to_string(InstanceKind kind) {
  switch (kind) {
    case InstanceKind::static_expert: return "static";
    case InstanceKind::dynamic_expert: return "dynamic";
    case InstanceKind::replica: return "replica";
  }
  return "?";
}

}  // namespace epsim

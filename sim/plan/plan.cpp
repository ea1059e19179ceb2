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
[[noreturn]] void defect(const Plan& plan, const std::string& what) {
  throw std::logic_error("invalid plan from balancer '" + plan.balancer + "' (step " +
                         std::to_string(plan.step) + ", micro-batch " + std::to_string(plan.micro_batch) +
                         ", layer " + std::to_string(plan.layer) + "): " + what);
}
}  // namespace

void validate_plan(const Plan& plan, int num_experts, int gpus_per_node) {
  const int n_inst = static_cast<int>(plan.instances.size());
  if (plan.num_gpus <= 0) defect(plan, "num_gpus must be positive");
  if (plan.exchange_stages < 1) defect(plan, "exchange_stages must be at least 1");
  for (int i = 0; i < n_inst; ++i) {
    const ExpertInstance& inst = plan.instances[i];
    if (inst.expert < 0 || inst.expert >= num_experts) defect(plan, "instance " + std::to_string(i) + " has expert out of range");
    if (inst.gpu < 0 || inst.gpu >= plan.num_gpus) defect(plan, "instance " + std::to_string(i) + " has gpu out of range");
  }
  for (const TokenRoute& r : plan.routes) {
    if (r.instance < 0 || r.instance >= n_inst) defect(plan, "route to a missing instance");
    if (r.src_rank < 0 || r.src_rank >= plan.num_gpus) defect(plan, "route from a rank out of range");
    if (r.tokens < 0) defect(plan, "negative token count");
    const int dst = plan.instances[r.instance].gpu;
    if (r.stage < -1 || r.stage >= plan.exchange_stages) defect(plan, "route stage out of range");
    if (r.stage == -1 && (r.carrier != Carrier::none || r.via_gpu >= 0)) defect(plan, "stage -1 for tokens that move");
    if (r.via_gpu >= plan.num_gpus) defect(plan, "route via a GPU out of range");
    const int last_hop_from = r.via_gpu >= 0 ? r.via_gpu : r.src_rank;
    if (r.carrier == Carrier::none && last_hop_from != dst) defect(plan, "carrier 'none' for tokens that change GPU");
    if (r.carrier == Carrier::copy_engine && last_hop_from != dst && gpus_per_node > 0 &&
        last_hop_from / gpus_per_node != dst / gpus_per_node)
      defect(plan, "Copy Engine route leaves its node");
  }
  for (const Transfer& t : plan.transfers) {
    if (t.instance < 0 || t.instance >= n_inst) defect(plan, "transfer for a missing instance");
    if (t.src_gpu < 0 || t.src_gpu >= plan.num_gpus || t.dst_gpu < 0 || t.dst_gpu >= plan.num_gpus)
      defect(plan, "transfer between GPUs out of range");
    if (t.bytes < 0) defect(plan, "negative transfer size");
  }
  if (static_cast<int>(plan.gemm_order.size()) != plan.num_gpus) defect(plan, "gemm_order needs one list per GPU");
  std::vector<int> seen(n_inst, 0);
  for (int g = 0; g < plan.num_gpus; ++g) {
    for (const GemmGroup& group : plan.gemm_order[g]) {
      if (group.gpu != g) defect(plan, "a GEMM group listed under the wrong GPU");
      for (int i : group.instances) {
        if (i < 0 || i >= n_inst) defect(plan, "GEMM group names a missing instance");
        if (plan.instances[i].gpu != g) defect(plan, "GEMM group computes an instance of another GPU");
        ++seen[i];
      }
    }
  }
  for (int i = 0; i < n_inst; ++i)
    if (seen[i] != 1) defect(plan, "instance " + std::to_string(i) + " is in " + std::to_string(seen[i]) + " GEMM groups");
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

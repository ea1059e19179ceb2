#include "sim/balancers/static_ep.hpp"

#include "sim/balancers/placement.hpp"

namespace epsim {

Plan StaticEp::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  Plan plan = start_plan("static_ep", record, n);
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});
  // Instance i is expert i: the plan's instance list is the placement itself.
  for (int e = 0; e < experts; ++e) {
    const int gpu = home_gpu(e, experts, n, context.placement);
    plan.instances.push_back({e, gpu, InstanceKind::static_expert});
    plan.gemm_order[gpu].front().instances.push_back(e);
  }
  // One route per non-zero count, reserved exactly: growing the vector (and faulting in fresh pages
  // for each copy) was 5% of an EP 256 `epsim run`, more than filling it (perf record).
  std::size_t routes = 0;
  for (const std::uint32_t c : record.counts) routes += c != 0;
  plan.routes.reserve(routes);
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      const std::uint32_t c = record.count(s, e, experts);
      if (c == 0) continue;
      const Carrier carrier = plan.instances[e].gpu == s ? Carrier::none : Carrier::ep_backend;
      plan.routes.push_back({s, e, static_cast<std::int64_t>(c), carrier, -1, 0});
    }
  }
  return plan;
}

}  // namespace epsim

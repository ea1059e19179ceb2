// Invariants that several balancers' plans share, checked the same way in every balancer's tests.
#pragma once

#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/balancers/placement.hpp"
#include "sim/plan/plan.hpp"
#include "traces/format/trace_types.hpp"

namespace epsim::test {

/// Every (source rank, expert) count of the record is routed, no more and no less.
inline void check_counts_preserved(const Plan& plan, const TraceRecord& rec, int experts) {
  const int n = plan.num_gpus;
  std::vector<std::int64_t> got(static_cast<std::size_t>(n) * experts, 0);
  for (const TokenRoute& r : plan.routes)
    got[static_cast<std::size_t>(r.src_rank) * experts + plan.instances[r.instance].expert] += r.tokens;
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) CHECK(got[static_cast<std::size_t>(s) * experts + e] == rec.count(s, e, experts));
}

/// Each moved copy's weights come from the expert's home GPU in the forward pass and its gradients go
/// back there in the backward pass, a whole expert's bytes each way, on `carrier`.
inline void check_copy_transfers(const Plan& plan, const BalancerContext& ctx, Carrier carrier) {
  const int experts = ctx.model->num_experts;
  for (const Transfer& t : plan.transfers) {
    const ExpertInstance& inst = plan.instances[t.instance];
    const int home = home_gpu(inst.expert, experts, ctx.num_gpus, ctx.placement);
    CHECK(t.carrier == carrier);
    CHECK(t.bytes == ctx.model->expert_weight_bytes());
    if (t.kind == TransferKind::weights) {
      CHECK(t.pass == PassKind::forward);
      CHECK((t.src_gpu == home && t.dst_gpu == inst.gpu));
    } else {
      CHECK(t.pass == PassKind::backward);
      CHECK((t.src_gpu == inst.gpu && t.dst_gpu == home));
    }
  }
}

}  // namespace epsim::test

#include "sim/balancers/ideal_balance.hpp"

#include <algorithm>
#include <deque>

#include "sim/balancers/placement.hpp"

namespace epsim {

namespace {
struct Piece {
  int gpu;
  std::int64_t tokens;
};
}  // namespace

Plan IdealBalance::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  std::vector<std::int64_t> load(experts, 0);
  std::vector<std::vector<int>> home_experts(n);
  for (int e = 0; e < experts; ++e) {
    for (int s = 0; s < n; ++s) load[e] += record.count(s, e, experts);
    home_experts[home_gpu(e, experts, n, context.placement)].push_back(e);
  }
  std::int64_t total = 0;
  for (std::int64_t l : load) total += l;

  // Quotas differ by at most one token: the best any balancer can do.
  std::vector<std::int64_t> room(n);
  for (int g = 0; g < n; ++g) room[g] = total / n + (g < total % n ? 1 : 0);

  std::vector<std::vector<Piece>> pieces(experts);
  std::deque<std::pair<int, std::int64_t>> spill;  // (expert, tokens) beyond the home GPU's quota
  for (int g = 0; g < n; ++g) {
    for (int e : home_experts[g]) {
      const std::int64_t keep = std::min(load[e], room[g]);
      room[g] -= keep;
      pieces[e].push_back({g, keep});  // the home instance exists even with no tokens
      if (load[e] > keep) spill.push_back({e, load[e] - keep});
    }
  }
  for (int g = 0; g < n && !spill.empty(); ++g) {
    while (room[g] > 0 && !spill.empty()) {
      auto& [e, left] = spill.front();
      const std::int64_t take = std::min(left, room[g]);
      pieces[e].push_back({g, take});
      room[g] -= take;
      left -= take;
      if (left == 0) spill.pop_front();
    }
  }

  Plan plan = start_plan("ideal-balance", record, n);
  for (int g = 0; g < n; ++g) plan.gemm_order[g].push_back(GemmGroup{g, {}});
  for (int e = 0; e < experts; ++e) {
    // Cut the expert's tokens, taken source rank by source rank, into its pieces in order.
    int s = 0;
    std::int64_t left_at_s = record.count(0, e, experts);
    for (std::size_t p = 0; p < pieces[e].size(); ++p) {
      const Piece& piece = pieces[e][p];
      const int inst = static_cast<int>(plan.instances.size());
      plan.instances.push_back({e, piece.gpu, p == 0 ? InstanceKind::static_expert : InstanceKind::dynamic_expert});
      plan.gemm_order[piece.gpu].front().instances.push_back(inst);
      std::int64_t need = piece.tokens;
      while (need > 0) {
        while (left_at_s == 0) left_at_s = record.count(++s, e, experts);
        const std::int64_t take = std::min(need, left_at_s);
        plan.routes.push_back({s, inst, take, s == piece.gpu ? Carrier::none : Carrier::ep_backend, -1, 0});
        need -= take;
        left_at_s -= take;
      }
    }
  }
  return plan;
}

}  // namespace epsim

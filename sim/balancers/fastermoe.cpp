#include "sim/balancers/fastermoe.hpp"

#include <cassert>

#include "sim/balancers/group_exchange.hpp"
#include "sim/balancers/placement.hpp"

namespace epsim {

FasterMoe::FasterMoe(FasterMoeOptions options) : options_(options) { assert(options_.group_size >= 1); }

Plan FasterMoe::plan(const TraceRecord& record, const BalancerContext& context) {
  const int n = context.num_gpus;
  const int experts = context.model->num_experts;
  // Without smart scheduling the exchange is one step: the same as a single group of every rank.
  const GroupExchange exchange(n, options_.smart_schedule ? options_.group_size : n);
  const int stages = exchange.num_groups();

  std::vector<bool> shadowed(experts, false);
  for (int e : shadowed_experts(options_.policy, record, context)) shadowed[e] = true;

  Plan plan = start_plan("fastermoe", record, n);
  plan.exchange_stages = stages;
  // No policy, no all_gather of the counts and nothing to decide: v1's no_shadow_policy is free.
  if (options_.policy != ShadowPolicy::none) {
    plan.planner.site = PlannerSite::gpu;
    plan.planner.duration_ps = us_to_ps(options_.planner_time_us);
    plan.planner.start = PlannerStart::before_dispatch;
  }

  // Instance e is expert e's home copy: its stage-0 tokens, or for a shadowed expert the owner's own
  // tokens. It exists even without tokens, as in static EP.
  std::vector<int> home(experts);
  for (int e = 0; e < experts; ++e) {
    home[e] = home_gpu(e, experts, n, context.placement);
    plan.instances.push_back({e, home[e], InstanceKind::static_expert});
  }
  // More home instances, one per (expert, later stage) that has tokens, so C_j is its own GEMM.
  // The (expert, stage) pairs with tokens are found in one pass over the counts, then numbered stage
  // by stage (at EP 1,024, 256 stages: a pass over the counts for each stage was most of plan()).
  std::vector<std::vector<int>> stage_instance(experts, std::vector<int>(stages, -1));
  for (int e = 0; e < experts; ++e) stage_instance[e][0] = e;
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      if (shadowed[e] || record.count(s, e, experts) == 0) continue;
      const int j = exchange.stage(s, home[e]);
      if (j > 0) stage_instance[e][j] = 0;  // has tokens: numbered below
    }
  }
  for (int j = 1; j < stages; ++j) {
    for (int e = 0; e < experts; ++e) {
      if (stage_instance[e][j] < 0) continue;
      stage_instance[e][j] = static_cast<int>(plan.instances.size());
      plan.instances.push_back({e, home[e], InstanceKind::static_expert});
    }
  }
  // A shadow on every other GPU, tokens or not: v1 broadcasts to all and reduces from all.
  const std::int64_t weight_bytes = context.model->expert_weight_bytes();
  std::vector<std::vector<int>> shadow_instance(experts);
  for (int e = 0; e < experts; ++e) {
    if (!shadowed[e]) continue;
    shadow_instance[e].assign(n, e);  // the owner computes its own tokens on its home instance
    for (int g = 0; g < n; ++g) {
      if (g == home[e]) continue;
      shadow_instance[e][g] = static_cast<int>(plan.instances.size());
      plan.instances.push_back({e, g, InstanceKind::dynamic_expert});
    }
  }
  // The broadcast's pieces (each serves the instance it reaches), then the reduce: the same pieces
  // reversed, each carrying the partial sum of the gradients behind it.
  const int per_node = context.gpus_per_node > 0 ? context.gpus_per_node : n;
  for (const PassKind pass : {PassKind::forward, PassKind::backward}) {
    for (int e = 0; e < experts; ++e) {
      if (!shadowed[e]) continue;
      for (const CollectiveEdge& edge : broadcast_edges(options_.collective, home[e], n, per_node, weight_bytes)) {
        const int inst = shadow_instance[e][edge.dst];
        if (pass == PassKind::forward)
          plan.transfers.push_back(
              {TransferKind::weights, pass, Carrier::ep_backend, TransferStart::after_dispatch, inst, edge.src,
               edge.dst, edge.bytes});
        else  // v1's per-expert ncclReduce, issued right after the shadow's backward on a stream of its own
          plan.transfers.push_back({TransferKind::gradients, pass, Carrier::ep_backend, TransferStart::after_wgrad,
                                    inst, edge.dst, edge.src, edge.bytes});
      }
    }
  }

  // A route per (source, expert) with tokens, counted first: grown by doubling, the routes were a
  // third of plan()'s time at EP 64, in the stores to fresh memory.
  std::size_t routes = 0;
  for (int s = 0; s < n; ++s)
    for (int e = 0; e < experts; ++e) routes += record.count(s, e, experts) != 0 ? 1 : 0;
  plan.routes.reserve(routes);
  for (int s = 0; s < n; ++s) {
    for (int e = 0; e < experts; ++e) {
      const std::int64_t c = record.count(s, e, experts);
      if (c == 0) continue;
      if (shadowed[e]) {
        // Stage -1: computed where they are, outside the exchange; no combine waits for them.
        plan.routes.push_back({s, shadow_instance[e][s], c, Carrier::none, -1, -1});
        continue;
      }
      const int j = exchange.stage(s, home[e]);
      const Carrier carrier = s == home[e] ? Carrier::none : Carrier::ep_backend;
      plan.routes.push_back({s, stage_instance[e][j], c, carrier, -1, j});
    }
  }

  // Per GPU: C_0 .. C_{n_g-1}, then the shadow computations; per_expert: one group per instance in
  // the same order, as v1 runs expert by expert.
  const bool per_expert = options_.gemm == FasterMoeGemm::per_expert;
  std::vector<std::vector<int>> homed(n);  // per GPU, the experts it owns, ascending
  for (int e = 0; e < experts; ++e) homed[home[e]].push_back(e);
  for (int g = 0; g < n; ++g) {
    for (int j = 0; j < stages; ++j) {
      GemmGroup group{g, {}};
      for (const int e : homed[g]) {
        if (shadowed[e] || stage_instance[e][j] < 0) continue;
        if (per_expert) plan.gemm_order[g].push_back(GemmGroup{g, {stage_instance[e][j]}});
        else group.instances.push_back(stage_instance[e][j]);
      }
      if (!group.instances.empty()) plan.gemm_order[g].push_back(group);
    }
    // v1 runs the shadows' whole backward first: their tokens need no gradient exchange.
    GemmGroup shadows{g, {}, false, false, true};
    for (int e = 0; e < experts; ++e) {
      if (!shadowed[e]) continue;
      if (per_expert) plan.gemm_order[g].push_back(GemmGroup{g, {shadow_instance[e][g]}, false, false, true});
      else shadows.instances.push_back(shadow_instance[e][g]);
    }
    if (!shadows.instances.empty()) plan.gemm_order[g].push_back(shadows);
  }
  return plan;
}

std::unique_ptr<Balancer> make_fastermoe(ConfigMap& params) {
  FasterMoeOptions options;
  const std::string policy = params.get_choice_or("policy", "paper", {"paper", "code", "prototype", "none"});
  options.policy = policy == "code"        ? ShadowPolicy::code
                   : policy == "prototype" ? ShadowPolicy::prototype
                   : policy == "none"      ? ShadowPolicy::none
                                           : ShadowPolicy::paper;
  options.smart_schedule = params.get_bool_or("smart_schedule", options.smart_schedule);
  options.group_size = static_cast<int>(params.get_int_or("group_size", options.group_size, 1, 1 << 20));
  options.planner_time_us = params.get_double_or("planner_time_us", options.planner_time_us, 0, 1e9);
  const std::string collective = params.get_choice_or("collective", "ring", {"ring", "tree", "star"});
  options.collective = collective == "tree"   ? ShadowCollective::tree
                       : collective == "star" ? ShadowCollective::star
                                              : ShadowCollective::ring;
  const std::string gemm = params.get_choice_or("gemm", "per_expert", {"per_expert", "grouped"});
  options.gemm = gemm == "grouped" ? FasterMoeGemm::grouped : FasterMoeGemm::per_expert;
  return std::make_unique<FasterMoe>(options);
}

}  // namespace epsim

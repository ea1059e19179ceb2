#include "sim/balancers/registry.hpp"

#include "sim/balancers/deepseek_eplb.hpp"
#include "sim/balancers/fastermoe.hpp"
#include "sim/balancers/feplb.hpp"
#include "sim/balancers/laer_moe.hpp"
#include "sim/balancers/micromoe.hpp"
#include "sim/balancers/ideal_balance.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/balancers/ultraep.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {

const char* const kOracleIsABound =
    "'oracle' is not a balancer: it is the lower bound on layer time that every run reports beside each "
    "balancer (bound_layer_time_us, gap_to_bound_us; docs/balancers.md \"The oracle\"); the plan that gives "
    "every GPU the mean load for free is 'ideal-balance'";

const std::vector<BalancerInfo>& balancer_registry() {
  // An explicit list rather than self-registering statics: the order is fixed and nothing depends on
  // static initialisation order.
  static const std::vector<BalancerInfo> registry = {
      {"static_ep", "no balancing: experts stay on their home GPU, tokens go there over the EP backend",
       [](ConfigMap&) { return std::make_unique<StaticEp>(); }},
      {"fastermoe", "FasterMoE: shadow hot experts (weights broadcast, gradients reduced) + group-wise exchange",
       [](ConfigMap& params) { return make_fastermoe(params); }},
      {"feplb", "FEPLB: EP dispatch, then dynamic experts' tokens and weights moved in the node by Copy Engine",
       [](ConfigMap& params) { return make_feplb(params); }},
      {"deepseek_eplb", "DeepSeek EPLB: replicas placed periodically from history, tokens split evenly over copies",
       [](ConfigMap& params) { return make_deepseek_eplb(params); }},
      {"laer_moe", "LAER-MoE: fully sharded experts re-laid out from recent history, node-local routing",
       [](ConfigMap& params) { return make_laer_moe(params); }},
      {"ultraep", "UltraEP: per-layer token-cap search, quotas to spare replica slots in the NVLink domain",
       [](ConfigMap& params) { return make_ultraep(params); }},
      {"micromoe", "MicroMoE (stand-in LP): per-micro-batch token split over a fixed ring of replicas (GLPK)",
       [](ConfigMap& params) { return make_micromoe(params); }},
      {"ideal-balance", "what-if, not a bound: every GPU computes the mean load with static EP's traffic, for free",
       [](ConfigMap&) { return std::make_unique<IdealBalance>(); }},
  };
  return registry;
}

std::unique_ptr<Balancer> make_balancer(const BalancerChoice& choice, const std::string& file) {
  if (choice.name == "oracle") throw InputError(choice.params_place.empty() ? file : choice.params_place, "", kOracleIsABound);
  std::string known;
  for (const BalancerInfo& info : balancer_registry()) {
    if (info.name == choice.name) {
      ConfigMap params(choice.params, file, "balancer.params");
      auto balancer = info.make(params);
      params.finish();
      return balancer;
    }
    known += (known.empty() ? "" : ", ") + info.name;
  }
  throw InputError(choice.params_place.empty() ? file : choice.params_place, "",
                   "unknown balancer '" + choice.name + "' (expected one of: " + known + ")");
}

}  // namespace epsim

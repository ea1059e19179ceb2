#include "sim/balancers/registry.hpp"

#include "sim/balancers/fastermoe.hpp"
#include "sim/balancers/feplb.hpp"
#include "sim/balancers/oracle.hpp"
#include "sim/balancers/static_ep.hpp"
#include "sim/core/input_error.hpp"

namespace epsim {

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
      {"oracle", "lower bound: every GPU computes the mean load, extra instances appear at zero cost",
       [](ConfigMap&) { return std::make_unique<Oracle>(); }},
  };
  return registry;
}

std::unique_ptr<Balancer> make_balancer(const BalancerChoice& choice, const std::string& file) {
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

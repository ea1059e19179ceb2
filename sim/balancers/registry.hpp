// Balancers by name. An experiment's `balancer.name` and `epsim balancers` go through this list; each
// entry validates its own parameter block (unknown keys are errors, as everywhere in epsim).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "sim/balancers/balancer.hpp"
#include "sim/config/config_map.hpp"

namespace epsim {

struct BalancerInfo {
  std::string name;
  std::string summary;  ///< one line for `epsim balancers`
  /// Builds the balancer from its parameter block (read through `params`; finish() is called after).
  std::function<std::unique_ptr<Balancer>(ConfigMap& params)> make;
};

/// Every balancer epsim knows, in a fixed order.
const std::vector<BalancerInfo>& balancer_registry();

/// What a file that names the balancer "oracle" is told: the oracle is the lower bound every run
/// reports, not a plan to simulate.
extern const char* const kOracleIsABound;

/// Builds the balancer an experiment names. Throws InputError for an unknown name (listing the known
/// ones) or bad parameters.
std::unique_ptr<Balancer> make_balancer(const BalancerChoice& choice, const std::string& file);

}  // namespace epsim

// The oracle: the same work perfectly balanced at zero cost. Every GPU computes the global mean
// number of tokens (to the token); an overloaded GPU keeps its home experts up to that quota and the
// rest of their tokens are computed by instances on under-loaded GPUs whose weights appear there for
// free (no transfer, no planner time). Tokens still travel over the EP backend as in static EP, so the
// oracle's layer time is what perfect balance alone would buy; "exposed overhead" is measured
// against it.
#pragma once

#include "sim/balancers/balancer.hpp"

namespace epsim {

class Oracle : public Balancer {
 public:
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;
};

}  // namespace epsim

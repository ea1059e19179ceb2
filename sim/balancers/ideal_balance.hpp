// Ideal balance: the same work with every GPU computing the global mean number of tokens (to the
// token), at zero cost. An overloaded GPU keeps its home experts up to that quota and the rest of
// their tokens are computed by instances on under-loaded GPUs whose weights appear there for free (no
// transfer, no planner time, no HBM check). Tokens still travel over the EP backend as in static EP,
// so its layer time is what token balance alone would buy with static EP's traffic.
//
// It is a what-if, not a bound: a plan that computes tokens where they are (replicas, shadows) sends
// less than it and can beat it, and on small batches its split experts run many small, memory-bound
// GEMMs. The bound is the oracle (oracle.hpp).
#pragma once

#include "sim/balancers/balancer.hpp"

namespace epsim {

class IdealBalance : public Balancer {
 public:
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;
};

}  // namespace epsim

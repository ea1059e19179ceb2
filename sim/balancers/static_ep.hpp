// Static expert parallelism, the baseline: every expert stays on its home GPU, every token goes there
// over the EP backend (or stays, when its source rank is the home GPU), one grouped GEMM per GPU.
#pragma once

#include "sim/balancers/balancer.hpp"

namespace epsim {

class StaticEp : public Balancer {
 public:
  Plan plan(const TraceRecord& record, const BalancerContext& context) override;
};

}  // namespace epsim

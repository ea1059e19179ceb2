#include <cstdio>
#include <iostream>

#include "sim/balancers/registry.hpp"
#include "sim/cli/commands.hpp"

namespace epsim {

int balancers_command(const std::vector<std::string>&) {
  for (const BalancerInfo& info : balancer_registry()) {
    char buf[256];
    std::snprintf(buf, sizeof buf, "%-14s %s\n", info.name.c_str(), info.summary.c_str());
    std::cout << buf;
  }
  return 0;
}

}  // namespace epsim

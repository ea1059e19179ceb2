// What the bandwidth-sharing tests record of their flows: each flow's end, and the order the ends
// came in (tests/engine/flow_fast_path_test.cpp, per_link_sharing_test.cpp, group_sharing_test.cpp),
// and the sharing modes they set.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include "sim/core/time.hpp"
#include "sim/engine/flow_network.hpp"

namespace epsim::test {

struct FlowEnds {
  std::vector<Time_ps> ended;  ///< -1 until the flow ends
  std::vector<int> order;      ///< flow indices, in the order their ends ran
  explicit FlowEnds(std::size_t n) : ended(n, -1) {}
  /// The callback of flow `i`.
  FlowNetwork::DoneCallback at(std::size_t i) {
    return [this, i](Time_ps, Time_ps e) {
      ended[i] = e;
      order.push_back(static_cast<int>(i));
    };
  }
};

/// The sharing settings of mode `m`, with the defaults of the rest.
inline FlowNetwork::Sharing sharing(FlowNetwork::SharingMode m) {
  FlowNetwork::Sharing s;
  s.mode = m;
  return s;
}

/// |fast - exact| / exact (exact taken as at least 1 ps).
inline double relative(Time_ps fast, Time_ps exact) {
  return std::fabs(static_cast<double>(fast - exact)) / static_cast<double>(std::max<Time_ps>(exact, 1));
}

}  // namespace epsim::test

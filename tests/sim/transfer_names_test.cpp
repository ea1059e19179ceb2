// simulate_layer without transfer names: the same timeline, times and bytes, with the exchange hops'
// names left empty (replay names only the records `epsim run` may draw).
#include <doctest/doctest.h>

#include <cstdint>
#include <vector>

#include "sim/config/loaders.hpp"
#include "sim/replay/simulate_layer.hpp"
#include "tests/engine/random_layer.hpp"
#include "tests/test_paths.hpp"

TEST_CASE("simulate_layer: without transfer names only the hops' names differ") {
  using namespace epsim;
  HardwareSpec hw = load_hardware((test::source_dir() / "models/h100-sxm-8.yaml").string());
  const ModelSpec model = load_model((test::source_dir() / "models/glm5-like-128.yaml").string());
  const int ep = 16;  // two nodes: NVLink and RDMA hops
  const Plan plan = test::random_static_plan(hw, model, ep, 1024, 1);
  const std::vector<std::int64_t> local(static_cast<std::size_t>(ep), 1024);
  const LayerResult named = simulate_layer(hw, model, plan, local, true);
  const LayerResult unnamed = simulate_layer(hw, model, plan, local, true, nullptr, false);
  CHECK(named.layer_ps() == unnamed.layer_ps());
  REQUIRE(named.timeline.events.size() == unnamed.timeline.events.size());
  int hops = 0;
  for (std::size_t i = 0; i < named.timeline.events.size(); ++i) {
    const TimelineEvent& a = named.timeline.events[i];
    const TimelineEvent& b = unnamed.timeline.events[i];
    CHECK(a.gpu == b.gpu);
    CHECK(a.track == b.track);
    CHECK(a.start_ps == b.start_ps);
    CHECK(a.end_ps == b.end_ps);
    CHECK(a.bytes == b.bytes);
    if (a.track == Track::nvlink_out || a.track == Track::nic_out) {
      ++hops;
      CHECK(a.name.find("->") != std::string::npos);  // "dispatch 3->5"
      CHECK(b.name.empty());
    } else {
      CHECK(a.name == b.name);
    }
  }
  CHECK(hops > 0);
}
